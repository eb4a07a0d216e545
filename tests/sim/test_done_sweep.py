"""The done-sweep's shortcut holds: after every call that changes a rank's state, no worker
graph of that rank is left done.

`RankRuntime.complete` sweeps the walk's worker graphs for done ones (mstar resets each one it
finds) only when the graph it completed is done. That is exact only if nothing but a completion
makes a graph done: an ingest, a stop, a walk change or a removal never does, and a completion
that leaves its own graph undone leaves no other graph done either. A graph made done any other
way would stay done, unswept, until some later completion of its own. These tests run every
shipped scenario and corpus case under every runtime (the real mstar state machines included,
where mstar-ai is installed), and generated layouts under every profile, with every
state-changing call of every rank checked afterwards; and they show that the check fails when an
ingest does make a graph done.
"""

from __future__ import annotations

import copy
import functools

import pytest
from hypothesis import HealthCheck, given, settings

from simharness import strategies as sst
from simharness.run import run_scenario
from simharness.runtime import registry
from simharness.runtime.graph_state import GraphState
from simharness.runtime.rank import RankRuntime
from simharness.scenario import parse_scenario
from simharness.scenario.loader import load_scenario
from tests.conftest import SCENARIOS

#: every RankRuntime method that changes what its requests' worker graphs hold
MUTATORS = ("admit", "set_walk", "deliver", "offer_chunk", "remove", "stop_loops", "peer_stop",
            "complete")

#: the shipped scenarios and the corpus (`scenarios/mstar_configs/` holds mstar configs)
SHIPPED = [*sorted(p.name for p in SCENARIOS.glob("*.yaml")),
           *sorted(f"corpus/{p.name}" for p in (SCENARIOS / "corpus").glob("*.yaml"))]


def _left_done(rank: RankRuntime) -> list[str]:
    return [f"{rid}/{wg}" for rid, req in rank.requests.items()
            for wg, st in req.states.items() if st.done]


@pytest.fixture
def checked(monkeypatch):
    """Every mutator of every rank (`RankRuntime` and its subclasses) checked after each call;
    yields the list of calls that left a graph done."""
    found: list[str] = []

    def check(name, original):
        @functools.wraps(original)
        def wrapper(self, *args, **kwargs):
            out = original(self, *args, **kwargs)
            left = _left_done(self)
            if left:
                found.append(f"rank {self.rank}: {name}{args[:3]} left {left} done")
            return out
        return wrapper

    classes = {RankRuntime}
    try:
        from simharness.mstar.state import MstarRankRuntime
        classes.add(MstarRankRuntime)
    except ImportError:  # mstar-ai is not installed: the profiles alone
        pass
    for cls in sorted(classes, key=lambda c: c.__qualname__):
        for name in MUTATORS:
            if name in vars(cls):
                monkeypatch.setattr(cls, name, check(name, vars(cls)[name]))
    return found


@pytest.mark.parametrize("runtime", registry.runnable())
@pytest.mark.parametrize("name", SHIPPED)
def test_no_worker_graph_is_left_done_after_any_call(checked, name, runtime):
    sc = load_scenario(SCENARIOS / name)
    run_scenario(sc, runtime, keep_trace=False)
    assert checked == []


# The fixture is function-scoped, but what it patches is the same in every example and the
# list it yields is only appended to on a failure, which ends the test.
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sst.scenarios())
def test_no_worker_graph_is_left_done_in_generated_layouts(checked, raw):
    """Generated layouts, schedules, stops and faults: what no scenario was written for."""
    sc = parse_scenario(copy.deepcopy(raw))
    for runtime in sorted(registry.PROFILES):
        run_scenario(sc, runtime, keep_trace=False)
        assert checked == [], runtime


def test_the_check_fails_when_an_ingest_makes_a_graph_done(checked, monkeypatch):
    ingest = GraphState.ingest

    def finishing_ingest(self, sig, can_buffer=True):
        out = ingest(self, sig, can_buffer)
        self.done = True  # as a graph done by its input alone would be
        return out

    monkeypatch.setattr(GraphState, "ingest", finishing_ingest)
    run_scenario(load_scenario(SCENARIOS / "bagel_cfg.yaml"), "mstar-python", keep_trace=False)
    assert any("deliver" in f for f in checked), checked[:3]
