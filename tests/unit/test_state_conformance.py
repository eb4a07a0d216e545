"""One conformance suite for the `WorkerGraphState` protocol, run against our model
(`GraphState`) and the real mstar code (`MstarGraphState`, over mstar's ``WorkerGraphIO``).

Every test here uses only the protocol (`simharness.runtime.protocol.WorkerGraphState`), so an
adapter for another runtime can be held to the same behaviour by adding its factory to
`STATES`.
"""

from __future__ import annotations

import itertools

import pytest

from simharness.graph.ir import Edge, Loop, Node, Sequential
from simharness.runtime.graph_spec import GraphSpec, Semantics
from simharness.runtime.graph_state import CURRENT, NEXT, REJECTED, GraphState
from simharness.runtime.protocol import WorkerGraphState
from simharness.signals import ORIGIN_WALK_START, Signal
from tests.factories import denoise_loop, denoise_start, route_back
from tests.helpers import needs_mstar

_seq = itertools.count(1)


def sig(name: str, dest: str) -> Signal:
    return Signal(name, dest, False, False, 0, "test", 0, "w", 0, None, ORIGIN_WALK_START,
                  next(_seq))


def ours(section) -> WorkerGraphState:
    return GraphState(GraphSpec("w#0", "w", section, Semantics()))


def mstar(section) -> WorkerGraphState:
    from simharness.mstar import convert
    from simharness.mstar.state import MstarGraphState

    spec = GraphSpec("w#0", "w", section, Semantics())
    return MstarGraphState(spec, convert.to_mstar(section))


STATES = [pytest.param(ours, id="graph_state"),
          pytest.param(mstar, id="mstar", marks=needs_mstar())]


def targets(items) -> list[tuple[str, str]]:
    return sorted((e.name, e.to if isinstance(e, Edge) else e.dest) for e in items)


def run(st: WorkerGraphState, node: str):
    assert node in st.ready and st.pop_ready(node) and node not in st.ready
    st.clear_current(node)
    return st.complete(node)


@pytest.mark.parametrize("make", STATES)
def test_the_state_declares_every_member_of_the_protocol(make):
    assert isinstance(make(Node("n", ("x",), ())), WorkerGraphState)


@pytest.mark.parametrize("make", STATES)
def test_a_node_is_ready_once_every_input_is_there_and_completes_its_edges(make):
    st = make(Node("n", ("x", "y"), (Edge("out", "client"),)))
    x = sig("x", "n")
    assert st.ingest(x) == CURRENT and list(st.ready) == [] and dict(st.inputs("n")) == {"x": x}
    assert st.ingest(sig("nope", "n")) == REJECTED
    assert st.ingest(sig("x", "elsewhere")) == REJECTED
    assert st.ingest(sig("y", "n")) == CURRENT and list(st.ready) == ["n"]
    assert st.counter("n") is None and st.loop_context("n") == ()
    items, filtered, finished = run(st, "n")
    assert targets(items) == [("out", "client")] and not filtered and finished == []
    assert st.done and st.times_run == 1
    st.reset()
    assert st.is_clean() and not st.done and list(st.held()) == []


@pytest.mark.parametrize("make", STATES)
def test_a_second_copy_waits_for_the_next_iteration_and_a_third_is_refused(make):
    st = make(Loop("L", 3, Node("n", ("x",), (Edge("x", "n"),))))
    first, second = sig("x", "n"), sig("x", "n")
    assert st.ingest(first) == CURRENT and st.ingest(second) == NEXT
    assert st.ingest(sig("x", "n")) == REJECTED
    assert dict(st.inputs("n")) == {"x": first} and dict(st.next_inputs("n")) == {"x": second}
    held = sorted((node, slot, s.seq) for node, slot, s in st.held())
    assert held == sorted([("n", CURRENT, first.seq), ("n", NEXT, second.seq)])


@pytest.mark.parametrize("make", STATES)
def test_a_loop_reinjects_its_external_input_and_filters_loop_backs_at_the_end(make):
    st = make(denoise_loop(3))
    for s in denoise_start():
        assert st.ingest(s) == CURRENT
    seen = []
    for it in range(3):
        assert st.counter("dit") == it and st.loops["denoise"].curr_iter == it
        assert st.loop_context("dit") == (("denoise", it, 3, it == 2),)
        items, filtered, finished = run(st, "dit")
        seen.append((targets(items), sorted(filtered), finished))
        route_back(st, items, "dit")
    loop_back = [("emb", "dit"), ("latents", "dit"), ("t", "dit")]
    assert seen[0] == (loop_back, [], []) and seen[1] == seen[0]
    assert seen[2] == ([("latents", "vae")], [("latents", "dit"), ("t", "dit")], ["denoise"])
    assert st.done
    st.reset()
    assert st.is_clean()


@pytest.mark.parametrize("make", STATES)
def test_a_registered_stop_finishes_the_loop_at_its_current_iteration(make):
    body = Node("tok", ("h",), (Edge("h", "tok"), Edge("word", "client")))
    st = make(Sequential((Loop("decode", 10, body, outputs=(Edge("h", "client"),)),)))
    assert st.register_finish("nowhere") is False
    st.ingest(sig("h", "tok"))
    run(st, "tok")
    st.ingest(sig("h", "tok"))
    assert st.register_finish("decode") is True and st.loops["decode"].finish
    assert st.loop_context("tok") == (("decode", 1, 10, True),)
    items, filtered, finished = run(st, "tok")
    assert finished == ["decode"] and ("h", "tok") in filtered
    assert ("h", "client") in targets(items) and st.done


@pytest.mark.parametrize("make", STATES)
def test_speculative_marks_come_and_go_without_touching_readiness(make):
    st = make(Loop("L", 3, Node("n", ("x",), (Edge("x", "n"),), async_scheduling=True)))
    st.ingest(sig("x", "n"))
    st.mark_speculative("n")
    st.unmark_speculative("n")
    assert list(st.ready) == ["n"]


@pytest.mark.parametrize("make", STATES)
def test_a_loop_mid_way_is_not_clean_even_with_no_signal_held(make):
    st = make(Loop("L", 3, Node("n", ("x",), (Edge("x", "n"),))))
    st.ingest(sig("x", "n"))
    run(st, "n")  # the loop-back is not routed back: the loop waits at its second iteration
    assert st.loops["L"].curr_iter == 1 and not st.done
    assert list(st.held()) == [] and list(st.ready) == []
    assert not st.is_clean()
    st.reset()
    assert st.is_clean()
