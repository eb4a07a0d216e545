"""Conformance suites and keyword factories for code outside simharness, as Trio ships
``trio.testing.check_one_way_stream``: an adapter for another runtime holds itself to the same
behaviour as ours by importing these, never by editing our tests.

* `check_worker_graph_state(make)`: the `protocol.WorkerGraphState` suite. `make(section)`
  returns a fresh state of one request in one worker graph whose section is `section` (a
  `simharness.graph.ir` section: `Node`, `Sequential`, `Parallel` or `Loop`).
* `check_runtime(runtime)`: a whole `protocol.Runtime`: it builds the workers, the conductor and
  the API side for a small layout, checks their doors against the protocols, and runs a small
  scenario (a loop split across two ranks) through the simulation twice, expecting every check
  to pass and the two trace digests to agree.
* Keyword factories for signals, stimuli and messages, to drive the doors by hand in unit tests
  (`signal`, `arrived`, `input_signals`, `remove`, `result`), and the worker-graph section the
  state suite uses (`denoise_loop`, `denoise_start`, `route_back`).

Each suite raises `AssertionError` naming what failed, so it runs under any test runner (and
this module imports without pytest)::

    def test_my_runtime_conforms():
        check_runtime(MyRuntime())
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from simharness.graph.ir import Edge, Loop, Node, Section, Sequential
from simharness.runtime.effects import Arrived
from simharness.runtime.graph_state import CURRENT, NEXT, REJECTED
from simharness.runtime.messages import InputSignals, RemoveRequest, ResultTensors
from simharness.runtime.protocol import ClientDoor, ConductorDoor, Runtime, WorkerDoor, WorkerGraphState
from simharness.scenario.model import Scenario
from simharness.signals import ORIGIN_WALK_START, Signal

# -- keyword factories -------------------------------------------------------------------------

#: sequence numbers of the signals `signal` makes (well clear of a run's own)
_seq = itertools.count(1000)


def signal(name: str, dest: str, *, walk: str = "w", pass_no: int = 0, nbytes: int = 0,
           src_node: str = "conductor", src_rank: int = -1, origin: str = ORIGIN_WALK_START,
           stream: bool = False) -> Signal:
    """A signal `name` for node `dest`, a walk-start input from the conductor unless told
    otherwise; each has a fresh sequence number (signals are identities)."""
    return Signal(name, dest, False, False, nbytes, src_node, src_rank, walk, pass_no, None,
                  origin, next(_seq), stream)


def arrived(msg: Any) -> Arrived:
    """The stimulus for a message that arrived."""
    return Arrived(msg=msg)


def input_signals(*, rid: str = "r0", walk: str = "w", pass_no: int = 0, signals: list[Signal],
                  src: int = 0, **kw: Any) -> InputSignals:
    """INPUT_SIGNALS from rank `src`; anything else (``kv``) is passed through."""
    return InputSignals(rid=rid, walk=walk, pass_no=pass_no, signals=signals, src=src, **kw)


def remove(*, rid: str = "r0", source: str = "conductor") -> RemoveRequest:
    """REMOVE_REQUEST, from the conductor unless told otherwise."""
    return RemoveRequest(rid=rid, source=source)


def result(*, rid: str = "r0", rank: int = 1, name: str = "out") -> ResultTensors:
    """An emit of output `name` to the client from `rank`."""
    return ResultTensors(rid=rid, rank=rank, signal=signal(name, "client"))


def denoise_loop(iters: int = 3) -> Loop:
    """The denoise shape in one worker graph: ``dit`` takes an external ``emb`` and its own
    ``latents`` and ``t`` back each iteration, for `iters` iterations; when the loop ends it
    sends ``latents`` to ``vae``. Start it with `denoise_start`."""
    dit = Node("dit", ("emb", "latents", "t"), (Edge("latents", "dit"), Edge("t", "dit")))
    return Loop("denoise", iters, dit, outputs=(Edge("latents", "vae"),))


def denoise_start() -> list[Signal]:
    """What the walk start hands `denoise_loop`: the external ``emb`` and the first-iteration
    ``latents`` and ``t``."""
    return [signal(name, "dit") for name in ("emb", "latents", "t")]


def route_back(state: Any, items: Any, node: str) -> None:
    """Ingest the items `state` just completed that go to `node` in the same graph, as a rank
    does with its local edges (an `Edge` is turned into a signal)."""
    for e in items:
        dest = e.to if isinstance(e, Edge) else e.dest
        if dest == node:
            state.ingest(e if isinstance(e, Signal) else signal(e.name, dest))


def _expect(ok: bool, what: str) -> None:
    """Fail with `what` unless `ok` (an `assert` would vanish under ``python -O`` and say
    nothing outside pytest)."""
    if not ok:
        raise AssertionError(what)


def _members(protocol: type) -> list[str]:
    """The public members a protocol class declares, its bases' included."""
    names: dict[str, None] = {}
    for klass in reversed(protocol.__mro__):
        if klass is not protocol and not getattr(klass, "_is_protocol", False):
            continue  # object, Protocol's machinery
        for name in [*vars(klass).get("__annotations__", {}), *vars(klass)]:
            if not name.startswith("_"):
                names[name] = None
    return list(names)


def _expect_protocol(obj: Any, protocol: type, where: str) -> None:
    """Fail unless `obj` declares every member of the runtime-checkable `protocol`."""
    missing = [m for m in _members(protocol) if not hasattr(obj, m)]
    _expect(isinstance(obj, protocol) and not missing,
            f"{where} gave a {type(obj).__name__}, which is not a {protocol.__name__}: "
            f"it lacks {', '.join(missing)}")


# -- the WorkerGraphState suite ----------------------------------------------------------------

MakeState = Callable[[Section], WorkerGraphState]


def _sig(name: str, dest: str) -> Signal:
    return signal(name, dest, src_node="test", src_rank=0)


def _targets(items: Iterable[Any]) -> list[tuple[str, str]]:
    return sorted((e.name, e.to if isinstance(e, Edge) else e.dest) for e in items)


def _run(st: WorkerGraphState, node: str) -> tuple[Sequence[Any], Collection[tuple[str, str]], list[str]]:
    """Take `node` from the ready set, consume its inputs and complete it."""
    _expect(node in st.ready, f"{node!r} is not ready (ready: {list(st.ready)})")
    _expect(st.pop_ready(node), f"pop_ready({node!r}) refused a ready node")
    _expect(node not in st.ready, f"{node!r} is still ready after pop_ready")
    st.clear_current(node)
    return st.complete(node)


def _declares_the_protocol(make: MakeState) -> None:
    _expect_protocol(make(Node("n", ("x",), ())), WorkerGraphState, "make(section)")


def _ready_once_every_input_is_there(make: MakeState) -> None:
    st = make(Node("n", ("x", "y"), (Edge("out", "client"),)))
    x = _sig("x", "n")
    _expect(st.ingest(x) == CURRENT, "the first input of a node was not taken as CURRENT")
    _expect(list(st.ready) == [], f"a node with one of two inputs is ready: {list(st.ready)}")
    _expect(dict(st.inputs("n")) == {"x": x}, f"inputs('n') is {dict(st.inputs('n'))}, not x")
    _expect(st.ingest(_sig("nope", "n")) == REJECTED, "an input the node does not have was taken")
    _expect(st.ingest(_sig("x", "elsewhere")) == REJECTED, "a signal for an unknown node was taken")
    _expect(st.ingest(_sig("y", "n")) == CURRENT, "the second input was not taken as CURRENT")
    _expect(list(st.ready) == ["n"], f"with every input there, ready is {list(st.ready)}, not ['n']")
    _expect(st.counter("n") is None, f"a node outside loops has counter {st.counter('n')!r}")
    _expect(st.loop_context("n") == (), f"a node outside loops has loop context {st.loop_context('n')}")
    items, filtered, finished = _run(st, "n")
    _expect(_targets(items) == [("out", "client")],
            f"completing n routed {_targets(items)}, not its declared edge out -> client")
    _expect(not filtered and finished == [], f"completing n filtered {filtered}, finished {finished}")
    _expect(st.done and st.times_run == 1,
            f"after its one node ran: done={st.done}, times_run={st.times_run} (want True, 1)")
    st.reset()
    _expect(st.is_clean() and not st.done and list(st.held()) == [],
            "after reset() the state is not clean, still done, or holds signals")


def _a_second_copy_waits_for_the_next_iteration(make: MakeState) -> None:
    st = make(Loop("L", 3, Node("n", ("x",), (Edge("x", "n"),))))
    first, second = _sig("x", "n"), _sig("x", "n")
    _expect(st.ingest(first) == CURRENT, "the first copy of an input was not taken as CURRENT")
    _expect(st.ingest(second) == NEXT, "a second copy inside a loop was not kept for the NEXT iteration")
    _expect(st.ingest(_sig("x", "n")) == REJECTED, "a third copy was taken")
    _expect(dict(st.inputs("n")) == {"x": first}, "the current slot does not hold the first copy")
    _expect(dict(st.next_inputs("n")) == {"x": second}, "the next slot does not hold the second copy")
    held = sorted((node, slot, s.seq) for node, slot, s in st.held())
    _expect(held == sorted([("n", CURRENT, first.seq), ("n", NEXT, second.seq)]),
            f"held() gives {held}, not the two copies in their slots")


def _a_loop_reinjects_and_filters_loop_backs_at_the_end(make: MakeState) -> None:
    st = make(denoise_loop(3))
    for s in denoise_start():
        _expect(st.ingest(s) == CURRENT, f"the walk-start input {s.name} was not taken as CURRENT")
    seen = []
    for it in range(3):
        _expect(st.counter("dit") == it and st.loops["denoise"].curr_iter == it,
                f"at iteration {it} the counter is {st.counter('dit')} and the loop's "
                f"curr_iter {st.loops['denoise'].curr_iter}")
        _expect(st.loop_context("dit") == (("denoise", it, 3, it == 2),),
                f"at iteration {it} the loop context is {st.loop_context('dit')}")
        items, filtered, finished = _run(st, "dit")
        seen.append((_targets(items), sorted(filtered), finished))
        route_back(st, items, "dit")
    loop_back = [("emb", "dit"), ("latents", "dit"), ("t", "dit")]
    _expect(seen[0] == (loop_back, [], []) and seen[1] == seen[0],
            f"the first two iterations routed {seen[:2]}: want the external input re-injected and "
            f"the loop-backs routed, nothing filtered, no loop finished")
    _expect(seen[2] == ([("latents", "vae")], [("latents", "dit"), ("t", "dit")], ["denoise"]),
            f"the last iteration gave {seen[2]}: want the loop's output routed, the loop-backs "
            f"filtered and the loop finished")
    _expect(st.done, "the worker graph is not done after its loop finished")
    st.reset()
    _expect(st.is_clean(), "after reset() the state is not clean")


def _a_registered_stop_finishes_the_loop(make: MakeState) -> None:
    body = Node("tok", ("h",), (Edge("h", "tok"), Edge("word", "client")))
    st = make(Sequential((Loop("decode", 10, body, outputs=(Edge("h", "client"),)),)))
    _expect(st.register_finish("nowhere") is False, "register_finish of an unknown loop did not say False")
    st.ingest(_sig("h", "tok"))
    _run(st, "tok")
    st.ingest(_sig("h", "tok"))
    _expect(st.register_finish("decode") is True, "register_finish of the loop did not say True")
    _expect(st.loops["decode"].finish, "the loop's status does not show the registered stop")
    _expect(st.loop_context("tok") == (("decode", 1, 10, True),),
            f"after a stop the loop context is {st.loop_context('tok')}, not the last iteration")
    items, filtered, finished = _run(st, "tok")
    _expect(finished == ["decode"], f"the stopped loop did not finish at its current iteration: {finished}")
    _expect(("h", "tok") in filtered, f"the loop-back h -> tok was not filtered: {sorted(filtered)}")
    _expect(("h", "client") in _targets(items), f"the loop's output was not routed: {_targets(items)}")
    _expect(st.done, "the worker graph is not done after its stopped loop finished")


def _speculative_marks_leave_readiness_alone(make: MakeState) -> None:
    st = make(Loop("L", 3, Node("n", ("x",), (Edge("x", "n"),), async_scheduling=True)))
    st.ingest(_sig("x", "n"))
    st.mark_speculative("n")
    st.unmark_speculative("n")
    _expect(list(st.ready) == ["n"],
            f"marking and unmarking a speculative node changed ready: {list(st.ready)}")


def _a_loop_mid_way_is_not_clean(make: MakeState) -> None:
    st = make(Loop("L", 3, Node("n", ("x",), (Edge("x", "n"),))))
    st.ingest(_sig("x", "n"))
    _run(st, "n")  # the loop-back is not routed back: the loop waits at its second iteration
    _expect(st.loops["L"].curr_iter == 1 and not st.done,
            f"after one iteration curr_iter={st.loops['L'].curr_iter}, done={st.done} (want 1, False)")
    _expect(list(st.held()) == [] and list(st.ready) == [],
            "a loop waiting for its loop-back holds or readies something")
    _expect(not st.is_clean(), "a loop mid-way with no signal held says it is clean")
    st.reset()
    _expect(st.is_clean(), "after reset() a loop left mid-way is not clean (its counter was not rewound)")


#: the checks of `check_worker_graph_state`, in order: (what it shows, the check)
WORKER_GRAPH_STATE_CHECKS: tuple[tuple[str, Callable[[MakeState], None]], ...] = (
    ("the state declares every member of the protocol", _declares_the_protocol),
    ("a node is ready once every input is there and completes its edges", _ready_once_every_input_is_there),
    ("a second copy waits for the next iteration and a third is refused",
     _a_second_copy_waits_for_the_next_iteration),
    ("a loop re-injects its external input and filters loop-backs at the end",
     _a_loop_reinjects_and_filters_loop_backs_at_the_end),
    ("a registered stop finishes the loop at its current iteration", _a_registered_stop_finishes_the_loop),
    ("speculative marks come and go without touching readiness", _speculative_marks_leave_readiness_alone),
    ("a loop mid-way is not clean even with no signal held", _a_loop_mid_way_is_not_clean),
)


def check_worker_graph_state(make: MakeState) -> None:
    """Hold the states `make(section)` builds to the `WorkerGraphState` protocol's behaviour
    (each check builds fresh ones). Raises `AssertionError` naming the behaviour that failed."""
    for what, check in WORKER_GRAPH_STATE_CHECKS:
        try:
            check(make)
        except AssertionError as exc:
            raise AssertionError(f"WorkerGraphState: {what}: {exc}") from None


# -- the Runtime suite -------------------------------------------------------------------------
# (the loader, the layout and the simulation are imported when a suite runs: the factories and
# the state suite need none of them)

#: two requests, each through a small pipeline over two ranks: ``enc`` (rank 0) hands ``emb`` to a
#: denoise loop (``dit``, rank 1, three iterations, its loop-backs local), whose output goes
#: back to ``vae`` on rank 0 and on to the client. Every shipped runtime passes it: it steers
#: clear of the cross-rank loop exit that mstar-rust-prefix gets wrong on purpose.
_PIPELINE: dict[str, Any] = {
    "name": "conformance",
    "graph": {
        "walks": {"w": {"sequential": [
            {"node": "enc", "inputs": ["prompt"], "outputs": [{"name": "emb", "to": "dit"}]},
            {"loop": {"name": "denoise", "max_iters": 3, "body": {
                "node": "dit", "inputs": ["emb", "latents"],
                "outputs": [{"name": "latents", "to": "dit"}]},
                "outputs": [{"name": "latents", "to": "vae"}]}},
            {"node": "vae", "inputs": ["latents"], "outputs": [{"name": "image", "to": "client"}]},
        ]}},
        "requests": {"req": {"walks": ["w"], "inputs": ["prompt"]}},
    },
    "placement": {"node_groups": [{"node_names": ["enc", "vae"], "ranks": [0]},
                                  {"node_names": ["dit"], "ranks": [1]}]},
    "workload": [{"request": "req", "count": 2, "concurrency": 2}],
    "network": {"latency_us": 10, "bandwidth_gbps": 100},
}


def conformance_scenario() -> Scenario:
    """The scenario `check_runtime` runs unless given one: a pipeline with a loop over two ranks."""
    from simharness.scenario.loader import parse_scenario

    return parse_scenario(copy.deepcopy(_PIPELINE), source="<simharness.testing>")


def _check_doors(runtime: Runtime, scenario: Scenario) -> None:
    """Build one run's workers, conductor and client and check each door's protocol."""
    from simharness.placement.layout import Layout
    from simharness.rng import RandomStreams
    from simharness.runtime.fake_nodes import FakeNodes

    layout = Layout.build(scenario)
    nodes = FakeNodes(scenario)
    streams = RandomStreams(scenario.seed)
    for r in range(layout.num_ranks):
        worker = runtime.build_worker(r, layout, nodes)
        _expect_protocol(worker, WorkerDoor, f"build_worker({r}, ...)")
        _expect(worker.rank == r, f"build_worker({r}, ...) gave the worker of rank {worker.rank}")
    conductor = runtime.build_conductor(layout, lambda n: streams.choice_index("placement", n))
    _expect_protocol(conductor, ConductorDoor, "build_conductor(...)")
    _expect_protocol(runtime.build_client(), ClientDoor, "build_client()")


def _simulate(runtime: Runtime, scenario: Scenario) -> tuple[str, list[Any], dict[str, str]]:
    """One run of `scenario` under `runtime` with every check: (digest, violations, outcomes)."""
    from simharness.engine.simulation import Simulation
    from simharness.placement.layout import Layout
    from simharness.run import RunChecks

    layout = Layout.build(scenario)
    watch = RunChecks(scenario, layout)
    sim = Simulation(scenario, runtime, observers=watch.observers, layout=layout, guard=watch.guard)
    result = sim.run()
    return result.recorder.digest(), watch.judge(result.outcomes), dict(result.outcomes)


def check_runtime(runtime: Runtime, *, scenario: Scenario | None = None) -> None:
    """Hold a whole runtime to the `protocol.Runtime` contract: it declares the protocol, its
    workers, conductor and API side declare their doors' protocols, and `scenario` (by default
    `conformance_scenario`) runs to a pass under the simulation, with the same trace digest twice.
    Raises `AssertionError` naming what failed."""
    scenario = scenario or conformance_scenario()
    _expect_protocol(runtime, Runtime, "the runtime")
    named = f"runtime {runtime.name!r} ({type(runtime).__qualname__})"
    _check_doors(runtime, scenario)
    digest, violations, outcomes = _simulate(runtime, scenario)
    found = dict.fromkeys(f"{v.check}: {v.message}" for v in violations)
    _expect(not found, f"{named} fails scenario {scenario.name!r}: {'; '.join(found)}")
    _expect(bool(outcomes) and set(outcomes.values()) == {"completed"},
            f"{named}: not every request of {scenario.name!r} completed: {outcomes}")
    again, _, _ = _simulate(runtime, scenario)
    _expect(again == digest, f"{named} is not deterministic: the same scenario and seed gave two "
                             f"trace digests ({digest[:19]}... and {again[:19]}...)")


__all__ = ["WORKER_GRAPH_STATE_CHECKS", "arrived", "check_runtime", "check_worker_graph_state",
           "conformance_scenario", "denoise_loop", "denoise_start", "input_signals", "remove",
           "result", "route_back", "signal"]
