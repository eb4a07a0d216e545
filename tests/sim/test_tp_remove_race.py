"""A TP follower's two REMOVEs in either order, and a slow follower, in the simulation.

The conductor sends REMOVE to every rank of the request; a TP leader forwards its copy to its
followers, and a follower acts only on that one. mstar parks a REMOVE for a request id it does
not know before its follower guard runs, so when the leader's copy arrives first the conductor's
copy stays parked for ever (docs/fidelity.md, finding 11). The simulation's conductor copy, one
hop, always wins; a delay on it produces the other order, which real processes often do.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simharness.run import run_scenario
from simharness.scenario.loader import load_scenario

SCENARIO = Path(__file__).parent.parent / "scenarios" / "tp_follower_behind_loop_back.yaml"
LATE_REMOVE = ("faults=[{kind: delay, message: remove_request, from: conductor, to: 1, nth: 1, "
               "delay_ms: 5}]")


def test_the_conductor_remove_arriving_first_leaves_nothing():
    report = run_scenario(load_scenario(SCENARIO), "mstar-python")
    assert report.violations == []


@pytest.mark.parametrize("runtime", ["mstar-python", "mstar-rust"])
def test_the_leader_copy_arriving_first_parks_the_conductor_copy(runtime):
    report = run_scenario(load_scenario(SCENARIO, [LATE_REMOVE]), runtime)
    drains = [v for v in report.violations if v.check == "drain"]
    assert {v.rank for v in report.violations} == {1}
    assert [v.check for v in report.violations] == ["drain"] * len(report.violations)
    assert any("1 remove_request message for r0" in v.message for v in drains)
    assert all(o == "completed" for o in report.result.outcomes.values())


def test_a_slow_follower_holds_its_leader_in_the_simulation_too():
    """The lockstep rendezvous keeps a follower at most one batch behind: the loop completes."""
    report = run_scenario(load_scenario(SCENARIO, ["faults=[{kind: slow_rank, rank: 1, factor: 6}]"]),
                          "mstar-python")
    assert report.violations == []
