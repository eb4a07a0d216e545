"""The per-worker-graph state machine, driven by hand (no engine)."""

import itertools

from simharness.graph.ir import Edge, Loop, Node, Sequential
from simharness.runtime.graph_spec import GraphSpec, Semantics
from simharness.runtime.graph_state import CURRENT, NEXT, PARKED, REJECTED, GraphState
from simharness.signals import Signal
from simharness.testing import denoise_loop, denoise_start, route_back

_seq = itertools.count()
PY = Semantics("all", False)
RUST_PREFIX = Semantics("local", True)


def sig(name: str, dest: str, origin: str = "node") -> Signal:
    return Signal(name, dest, False, False, 0, "test", 0, "w", 0, None, origin, next(_seq))


def names(items) -> list[tuple[str, str]]:
    return [(e.name, e.to if isinstance(e, Edge) else e.dest) for e in items]


def state(section, semantics=PY) -> GraphState:
    return GraphState(GraphSpec("w#0", "w", section, semantics))


def run_node(st: GraphState, node: str):
    assert st.pop_ready(node)
    st.clear_current(node)
    return st.complete(node)


def test_denoise_loop_reinjects_external_inputs_and_filters_loop_backs_at_the_end():
    st = state(denoise_loop(3))
    for s in denoise_start():
        assert st.ingest(s) == CURRENT
    outputs = []
    for _ in range(3):
        edges, filtered, finished = run_node(st, "dit")
        outputs.append((names(edges), filtered, finished))
        route_back(st, edges, "dit")
    assert outputs[0][0] == [("latents", "dit"), ("t", "dit"), ("emb", "dit")]
    assert outputs[1][0] == outputs[0][0]
    assert outputs[2] == ([("latents", "vae")], {("latents", "dit"), ("t", "dit")}, ["denoise"])
    assert st.done and st.times_run == 1


def test_a_third_copy_of_a_name_is_rejected():
    st = state(Node("n", ("x",), ()))
    assert st.ingest(sig("x", "n")) == CURRENT
    assert st.ingest(sig("x", "n")) == NEXT
    assert st.ingest(sig("x", "n")) == REJECTED
    assert st.ingest(sig("nope", "n")) == REJECTED
    assert st.ingest(sig("x", "elsewhere")) == REJECTED


def _combine_copy(semantics):
    """combine_cfg's copy of the split BAGEL loop: its body is one node, its loop-back set all 8."""
    pairs = frozenset((s, d) for s in ("latents", "time_index")
                      for d in ("LLM", "LLM_cfg_text", "LLM_cfg_img", "combine_cfg"))
    combine = Node("combine_cfg", ("v", "latents", "time_index"),
                   tuple(Edge(s, d) for s, d in sorted(pairs)))
    copy = Loop("denoise", 2, combine, outputs=(Edge("latents", "vae_decoder"),),
                ext_inputs=frozenset(), loop_back=pairs)
    return state(copy, semantics)


def _finish(st):
    for _ in range(2):
        for name in ("v", "latents", "time_index"):
            st.ingest(sig(name, "combine_cfg"))
        edges, filtered, _ = run_node(st, "combine_cfg")
    return names(edges), filtered


def test_python_drops_every_loop_back_pair_at_the_last_iteration():
    edges, filtered = _finish(_combine_copy(PY))
    assert edges == [("latents", "vae_decoder")]
    assert len(filtered) == 8


def test_rust_before_the_fix_drops_only_pairs_local_to_the_worker_graph():
    edges, filtered = _finish(_combine_copy(RUST_PREFIX))
    assert filtered == {("latents", "combine_cfg"), ("time_index", "combine_cfg")}
    assert ("latents", "LLM_cfg_text") in edges and ("latents", "vae_decoder") in edges
    assert len(edges) == 7


def test_rust_parks_an_edge_for_a_finished_loop_python_requeues_it():
    body = Sequential((Node("a", ("x",), (Edge("x", "a"),)),))
    for semantics, expected in ((RUST_PREFIX, PARKED), (PY, CURRENT)):
        # The loop is one root entity and a second root node keeps the graph from being done.
        st = state(Sequential((Loop("L", 1, body), Node("b", ("y",), ()))), semantics)
        st.ingest(sig("x", "a"))
        run_node(st, "a")
        assert st.loops["L"].done and not st.done
        assert st.ingest(sig("x", "a")) == expected
        assert ("a" in st.ready) == (expected == CURRENT)


def test_nested_loops_run_the_inner_body_per_outer_iteration():
    # reference 2.5: outer max 2 over Sequential([Loop(inner, max 3), refiner]).
    den = Node("den", ("z",), (Edge("z", "den"),))
    ref = Node("ref", ("z",), (Edge("z", "den"), Edge("out", "client")))
    st = state(Loop("outer", 2, Sequential((Loop("inner", 3, den, outputs=(Edge("z", "ref"),)), ref)),
                    outputs=(Edge("out", "client"),)))
    st.ingest(sig("z", "den"))
    log = []
    while st.ready:
        n = next(iter(st.ready))
        log.append((n, st.counter(n)))
        edges, _, _ = run_node(st, n)
        for e in edges:
            dest = e.to if isinstance(e, Edge) else e.dest
            if dest in ("den", "ref"):
                st.ingest(sig(e.name, dest))
    assert [n for n, _ in log] == ["den"] * 3 + ["ref"] + ["den"] * 3 + ["ref"]
    assert [c for n, c in log if n == "den"] == [0, 1, 2, 0, 1, 2]


def test_reset_leaves_a_clean_graph():
    st = _combine_copy(PY)
    st.ingest(sig("v", "combine_cfg"))
    st.loops["denoise"].curr_iter = 1
    assert not st.is_clean()
    st.reset()
    assert st.is_clean()


def test_a_loop_named_like_a_node_collides_with_it_as_in_mstar_s_registries():
    """mstar keys a registry's entities by name: loop P and node P are one entity, so the worker
    graph is done when the loop ends, before node P runs (found by the fidelity suite)."""
    a = Node("A", ("x",), (Edge("x", "A"),))
    p = Node("P", ("x",), (Edge("out", "client"),))
    section = Sequential((Loop("P", 2, a, outputs=(Edge("x", "P"),)), p))
    for semantics, done_at_loop_end in ((PY, True), (Semantics(entities_by_name=False), False)):
        st = state(section, semantics)
        assert st.spec.n_root == (1 if done_at_loop_end else 2)
        st.ingest(sig("x", "A"))
        edges, _, _ = run_node(st, "A")
        st.ingest(sig("x", "A"))
        edges, _, finished = run_node(st, "A")
        assert names(edges) == [("x", "P")] and finished == ["P"]
        assert st.done is done_at_loop_end


def _stream_sink(semantics):
    """A loop whose one member takes nothing but the stream `tok`."""
    sink = Node("sink", ("tok",), (Edge("out", "client"),))
    return GraphState(GraphSpec("c#0", "consume", Loop("L", 3, sink), semantics, frozenset({"tok"})))


def test_a_streaming_only_loop_member_takes_one_chunk_per_pass_as_in_mstar_0_2_1():
    st = _stream_sink(PY)
    assert st.streaming_ready("sink") and st.ingest_chunk(sig("tok", "sink")) == CURRENT
    run_node(st, "sink")  # the loop advances to its second iteration
    # mstar's registry took the node out of ready_for_streaming at the first chunk; only a
    # worker-graph clear puts it back, so the second chunk is refused (the request hangs).
    assert not st.streaming_ready("sink")
    assert st.ingest_chunk(sig("tok", "sink")) == REJECTED
    st.reset()
    assert st.streaming_ready("sink") and st.ingest_chunk(sig("tok", "sink")) == CURRENT


def test_the_rust_profiles_keep_a_streaming_only_loop_member_ready():
    st = _stream_sink(Semantics("all", True, entities_by_name=False, stream_ready_once=False))
    for _ in range(3):
        assert st.ingest_chunk(sig("tok", "sink")) == CURRENT
        run_node(st, "sink")
    assert st.done
