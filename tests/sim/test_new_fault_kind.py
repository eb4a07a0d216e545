"""A new fault kind is one module: `lag_fault.py`, added through `simharness.faults.register`,
is read from a scenario, acts on a simulated run, is drawn by the fuzzer, counted by coverage and
renumbered by the reducer, and is refused by the zmq backend with its own reason; taken away
again, it is unknown."""

from __future__ import annotations

import random

import pytest
from hypothesis import find, settings

from real_backends.faults import FaultRefused, RealFaults
from simharness import faults
from simharness.errors import ScenarioError
from simharness.explore.coverage import static_features
from simharness.explore.reduce import _renumber
from simharness.explore.strategies import fault_lists
from simharness.placement.layout import Layout
from tests.helpers import build, run, split_loop
from tests.sim import lag_fault
from tests.sim.lag_fault import LagFault


@pytest.fixture
def lag():
    kind = faults.register(lag_fault.KIND)
    yield kind
    faults.unregister(kind.name)


def _lagged(**fault):
    return {**split_loop(), "faults": [{"kind": "lag", **fault}]}


def test_it_is_read_from_a_scenario(lag):
    sc = build(_lagged(rank=0, extra_ms=5))
    assert sc.faults == (LagFault(rank=0, extra_ms=5.0),) and sc.faults[0].tolerated
    assert faults.names() == ("delay", "slow_rank", "lag", "duplicate", "drop", "crash")
    with pytest.raises(ScenarioError, match=r"expected a number >= 0 \(milliseconds\), got -1") as err:
        build(_lagged(rank=0, extra_ms=-1))
    assert err.value.path == "faults[0].extra_ms"
    with pytest.raises(ScenarioError, match="unknown key; did you mean 'rank'") as err:
        build(_lagged(ranks=0))
    with pytest.raises(ScenarioError, match="expected one of delay, slow_rank, lag, duplicate, drop, "
                                            "crash, got the string 'lagg'; did you mean 'lag'"):
        build({**split_loop(), "faults": [{"kind": "lagg", "rank": 0}]})


def test_it_acts_on_a_simulated_run(lag):
    plain = run(split_loop(), "mstar-python")
    lagged = run(_lagged(rank=0, extra_ms=20), "mstar-python")
    assert lagged.violations == []  # tolerated: every link into rank 0 stays FIFO
    assert lagged.result.sim_time_s > plain.result.sim_time_s + 0.02
    again = run(_lagged(rank=0, extra_ms=20), "mstar-python")
    assert again.result.recorder.digest() == lagged.result.recorder.digest()


def test_the_fuzzer_draws_it_and_coverage_counts_it(lag):
    drawn = find(fault_lists(2), lambda fs: any(f["kind"] == "lag" for f in fs),
                 settings=settings(database=None, max_examples=1000), random=random.Random(0))
    fault = next(f for f in drawn if f["kind"] == "lag")
    assert set(fault) == {"kind", "rank", "extra_ms"}
    sc = build({**split_loop(), "faults": drawn})
    assert "faults.lag" in static_features(sc, Layout.build(sc))
    tolerated = find(fault_lists(2, tolerated_only=True), lambda fs: any(f["kind"] == "lag" for f in fs),
                     settings=settings(database=None, max_examples=1000), random=random.Random(0))
    assert all(faults.kind(f["kind"]).tolerated for f in tolerated)


def test_the_reducer_renumbers_its_rank(lag):
    # rank 1 was removed: a lag on rank 2 follows it to 1, a lag on rank 1 goes with it
    raw = {"placement": {"node_groups": [{"node_names": ["A"], "ranks": [0]},
                                         {"node_names": ["B"], "ranks": [2]}]},
           "faults": [{"kind": "lag", "rank": 2}, {"kind": "lag", "rank": 1}]}
    assert _renumber(raw)["faults"] == [{"kind": "lag", "rank": 1}]


def test_the_zmq_backend_refuses_it_with_its_reason(lag):
    with pytest.raises(FaultRefused, match="does not inject lag faults: real sockets carry each "
                                           "message as it is sent"):
        RealFaults.of(build(_lagged(rank=1)).faults)


def test_unregistered_it_is_unknown_again():
    with pytest.raises(ScenarioError, match="expected one of delay, slow_rank, duplicate, drop, crash, "
                                            "got the string 'lag'"):
        build(_lagged(rank=0))
