"""The real stack under a searched schedule: `simharness explore --runtime mstar` holds mstar's own
messages (FIFO per link kept), finds the TP REMOVE race on them, replays its moved deliveries bit
for bit, and a model-found schedule case gets its verdict from a search of the stack's own orders."""

from __future__ import annotations

from pathlib import Path

from simharness.engine.deliveries import DeliveryControl
from simharness.explore import search as S
from simharness.explore.verdict import verdict
from simharness.rng import RandomStreams
from simharness.run import simulate
from simharness.scenario.loader import load_scenario
from tests.helpers import needs_mstar_stack

pytestmark = needs_mstar_stack()

FOUND = Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios"
STACK = "mstar"
REMOVE_RACE = "drain:dropped:remove_request:tp-follower"


def test_the_stack_shows_the_remove_race_under_pct_and_replays_it_exactly():
    sc = load_scenario(FOUND / "tp_remove_race.yaml")
    assert simulate(sc, STACK, keep_trace=False)[1] == []  # the default order passes
    found = S.search(sc, STACK, "pct", 20, seed=0, stop_at_first=True)
    assert REMOVE_RACE in found.found
    i = found.found[REMOVE_RACE].run
    policy = S.Pct(RandomStreams(0).stream(f"schedule.pct.{i}"), 3, found.steps)
    first, _ = simulate(sc, STACK, keep_trace=False,
                        control=lambda clock: DeliveryControl(clock, policy))
    again, violations = simulate(S.with_deliveries(sc, first.control.moved), STACK, keep_trace=False)
    assert first.recorder.digest() == again.recorder.digest()
    assert any(v.check == "drain" for v in violations)
    last: dict[tuple[int, int], int] = {}
    for d in first.control.deliveries:  # mstar's own messages kept their links' order
        assert d.nth == last.get((d.src, d.dst), 0) + 1
        last[(d.src, d.dst)] = d.nth


def test_a_model_case_found_by_search_is_real_when_the_stack_search_shows_it():
    sc = load_scenario(FOUND / "stop_loops_late_chain.yaml")
    found = S.search(sc, "mstar-python", "exhaustive", 200, stop_at_first=True)
    sig = "forwards:extra-after-loop"
    moved = S.shrink(sc, "mstar-python", found.found[sig].moved, sig)
    v = verdict(S.with_deliveries(sc, moved), "mstar-python", sig)
    assert v.mstar == "real" and v.faults == "transport" and v.stack_run is not None
    assert "PCT run" in v.text()
