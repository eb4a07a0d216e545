"""The ``mstar`` adapter: its state lives in mstar's own objects, and the harness sees what
mstar's code does to them."""

from __future__ import annotations

import pytest

from simharness.errors import UsageError
from simharness.mstar import convert, package
from simharness.mstar import placement as mstar_placement
from simharness.mstar import state as mstar_state
from simharness.mstar.runtime import MstarRuntime
from simharness.placement.layout import Layout
from simharness.run import run_scenario
from simharness.runtime import registry
from simharness.runtime.graph_state import CURRENT, NEXT, REJECTED
from simharness.scenario import load_scenario
from simharness.signals import ORIGIN_WALK_START, Signal
from tests.conftest import SCENARIOS
from tests.helpers import build, needs_mstar, split_loop


def _sig(name, dest, seq=1):
    return Signal(name, dest, False, False, 0, "conductor", -1, "w", 0, None, ORIGIN_WALK_START, seq)


def test_without_mstar_ai_the_runtime_names_the_pip_command(monkeypatch):
    import sys
    monkeypatch.setattr(package, "_GRAPH", None)
    monkeypatch.setitem(sys.modules, "mstar.graph.graph_io", None)  # makes the import fail
    assert not package.is_available()
    with pytest.raises(UsageError) as exc:
        registry.resolve("mstar-graph")
    assert "pip install --no-deps --ignore-requires-python mstar-ai==0.2.1" in str(exc.value)


@pytest.fixture
def split_rank():
    sc = build(split_loop(max_iters=3))
    rt = MstarRuntime()
    lay = Layout.build(sc)
    rank = rt.build_rank(1, lay)
    rank.admit("r0", "w", 0, lay.assign(lambda n: 0))
    return rank


@needs_mstar()[0]
@needs_mstar()[1]
class TestStateLivesInMstar:
    def test_each_state_wraps_a_real_worker_graph_io(self, split_rank):
        from mstar.graph.base import GraphNode, Loop, LoopStateRegistry
        from mstar.graph.graph_io import WorkerGraphIO
        st = split_rank.requests["r0"].states["w#1"]
        assert isinstance(st, mstar_state.MstarGraphState)
        assert isinstance(st.io, WorkerGraphIO)
        assert isinstance(st.io.nodes["B"], GraphNode) and isinstance(st.io.loops["L"], Loop)
        assert isinstance(st.io.nodes["B"]._managing_registry, LoopStateRegistry)
        # Every request gets its own copy of the section, as mstar's add_request makes it.
        split_rank.admit("r1", "w", 0, split_rank.requests["r0"].assignment)
        other = split_rank.requests["r1"].states["w#1"]
        assert other.io.nodes["B"] is not st.io.nodes["B"]

    def test_ingest_goes_through_mstar_and_readiness_is_mstar_s(self, split_rank):
        st = split_rank.requests["r0"].states["w#1"]
        assert st.ingest(_sig("y", "B")) == CURRENT
        assert "y" in st.io.nodes["B"].ready_signals.ready_names
        assert st.ready == [] and not st.io.ready_node_names
        assert st.ingest(_sig("x", "B", 2)) == CURRENT
        assert st.io.ready_node_names == {"B"} and st.ready == ["B"]
        assert st.ingest(_sig("x", "B", 3)) == NEXT
        assert "x" in st.io.nodes["B"].ready_next_iter.ready_names
        assert st.ingest(_sig("x", "B", 4)) == REJECTED  # a third copy
        assert st.ingest(_sig("z", "Q")) == REJECTED  # not a node here
        assert st.pop_ready("B") and "B" not in st.io.ready_node_names

    def test_changes_made_through_mstar_are_what_the_harness_sees(self, split_rank):
        from mstar.graph.base import GraphEdge
        st = split_rank.requests["r0"].states["w#1"]
        sig = _sig("y", "B")
        edge = GraphEdge(next_node="B", name="y")
        setattr(edge, convert.CARRIES, sig)
        assert st.io.ingest_input(edge)  # straight into mstar, not through the wrapper
        assert st.inputs("B") == {"y": sig}
        st.io.loops["L"].curr_iter = 2
        assert st.counter("B") == 2 and st.loops["L"].curr_iter == 2
        assert st.loop_context("B") == (("L", 2, 3, True),)
        st.io.register_loop_finish_signal("L")
        assert st.loops["L"].finish
        st.io.wg_state_registry.ready_names.add("B")
        assert st.ready == ["B"]
        st.io.clear()
        assert st.inputs("B") == {} and st.ready == [] and st.loops["L"].curr_iter == 0
        assert st.is_clean()

    def test_completion_is_mstar_s_mark_node_complete(self, split_rank):
        st = split_rank.requests["r0"].states["w#1"]
        for it in range(3):
            st.ingest(_sig("y", "B", 10 * it + 1))
            st.ingest(_sig("x", "B", 10 * it + 2))  # the seed, then B's own loop-back
            assert st.pop_ready("B")
            st.clear_current("B")
            items, filtered, finished = st.complete("B")
            names = sorted((getattr(e, "to", None) or e.dest, e.name) for e in items)
            if it < 2:
                assert filtered == frozenset() and finished == []
                assert st.io.loops["L"].curr_iter == it + 1
                assert ("A", "x") in names and ("B", "x") in names
            else:
                # The last iteration: mstar filters the whole loop-back set (A's pair included,
                # though A lives in another worker graph) and emits the declared output.
                assert filtered == {("x", "A"), ("x", "B")} and finished == ["L"]
                assert names == [("C", "x")]
                assert not st.done  # C, the other root entity of w#1, has not run
        st.ingest(_sig("x", "C", 99))
        assert st.ready == ["C"]
        st.clear_current("C")
        items, _, _ = st.complete("C")
        assert [e.to for e in items] == ["client"]
        assert st.done and st.times_run == 1

    def test_the_verdict_follows_mstar_s_code(self, monkeypatch):
        """Break mstar's own Loop (not ours): the harness reports what the broken code does."""
        from mstar.graph import base
        real = base.Loop._advance_one_iter

        def advance_twice(self):
            real(self)
            self.curr_iter += 1

        sc = load_scenario(SCENARIOS / "bagel_cfg.yaml")
        assert run_scenario(sc, "mstar-graph").violations == []
        monkeypatch.setattr(base.Loop, "_advance_one_iter", advance_twice)
        rep = run_scenario(sc, "mstar-graph")
        assert any(v.check == "forwards" and "25 forwards, expected 49" in v.message
                   for v in rep.violations)
        assert run_scenario(sc, "mstar-python").violations == []

    def test_bagel_passes_with_49_49_49_49_1(self):
        from tests.helpers import counts
        rep = run_scenario(load_scenario(SCENARIOS / "bagel_cfg.yaml"), "mstar-graph")
        assert rep.violations == [] and rep.runtime == "mstar-graph"
        per = {(w, n): c for (w, n, _r, _rid), c in counts(rep).items()}
        assert per == {("prefill_text", "LLM"): 1, ("image_gen_cfg", "LLM"): 49,
                       ("image_gen_cfg", "LLM_cfg_text"): 49, ("image_gen_cfg", "LLM_cfg_img"): 49,
                       ("image_gen_cfg", "combine_cfg"): 49, ("image_gen_cfg", "vae_decoder"): 1}

    def test_the_states_a_run_uses_are_mstar_objects(self):
        """Look inside the ranks while the simulation runs."""
        from mstar.graph.graph_io import WorkerGraphIO

        from simharness.engine.simulation import Simulation
        sc = load_scenario(SCENARIOS / "bagel_cfg.yaml", ["workload=[{request: t2i, count: 1}]"])
        seen = []

        class Peek:
            sim = None

            def on_Forward(self, e):
                st = self.sim.workers[e.rank].loop.runtime.requests[e.rid].states[e.wg]
                assert isinstance(st.io, WorkerGraphIO)
                if e.node == "LLM_cfg_text":
                    seen.append(st.io.loops["denoise"].curr_iter)

        peek = Peek()
        sim = Simulation(sc, MstarRuntime(), observers=[peek])
        peek.sim = sim
        sim.run()
        # After each forward the real Loop object has advanced (and is reset after the last).
        assert seen == list(range(1, 49)) + [0]


@needs_mstar()[0]
@needs_mstar()[1]
class TestPlacement:
    def test_without_mstar_model_base_ours_is_used_and_said(self, monkeypatch, capsys):
        from simharness.cli import main
        monkeypatch.setattr(package, "_DIVIDE", (None, "ModuleNotFoundError: No module named 'torch'"))
        rt = MstarRuntime()
        assert rt.placement == "simharness"
        assert "cannot be imported" in rt.notes[0] and "simharness's placement" in rt.notes[0]
        assert main(["run", str(SCENARIOS / "bagel_cfg.yaml"), "--runtime", "mstar-graph"]) == 0
        assert "note: runtime mstar-graph: mstar.model.base cannot be imported" in capsys.readouterr().err
        with pytest.raises(UsageError, match="placement 'mstar' needs mstar.model.base"):
            MstarRuntime(placement="mstar")

    def test_our_placement_converted_gives_the_same_run(self):
        from simharness.engine.simulation import Simulation
        sc = load_scenario(SCENARIOS / "bagel_cfg.yaml")
        a = run_scenario(sc, "mstar-graph")
        b = Simulation(sc, MstarRuntime(placement="simharness")).run()
        assert a.result.recorder.digest() == b.recorder.digest()

    def test_a_different_division_is_refused(self):
        lay = Layout.build(build(split_loop()))
        wg = lay.by_id["w#0"]
        other = lay.by_id["w#1"]
        theirs = convert.to_mstar(other.section)
        with pytest.raises(mstar_placement.PlacementMismatch, match="worker graph w#0"):
            mstar_placement.check_same_worker_graph(wg.id, wg.section, wg.group, theirs, other.group)
