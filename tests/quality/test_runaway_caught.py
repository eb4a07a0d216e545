"""The runaway guard (run policy; the liveness check reports it): work the graph cannot
explain is cut short and named.

A runaway is a request whose work keeps growing (a loop that never ends, stray loop-backs that
keep a branch cycling). Without the guard such a run goes on to the request timeout, seconds of
wall time and thousands of symptoms later; with it the driver stops the request after a bounded
number of forwards and `liveness` reports a ``runaway`` naming the request, node, rank and cycle.
Costs are asserted in events and simulated time, never in wall time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simharness.drive.runaway import RUNAWAY_FACTOR, RUNAWAY_SLACK
from simharness.events import Forward
from simharness.explore.campaign import CampaignConfig, run_campaign
from simharness.explore.execute import signature
from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS
from tests.helpers import BROKEN as B
from tests.helpers import build, split_loop

RUNAWAY_CASE = Path(__file__).resolve().parent.parent / "scenarios" / "runaway_stray_loop_back.yaml"


def _runaways(report):
    return [v for v in report.violations if v.check == "liveness" and v.details.get("reason") == "runaway"]


def test_a_loop_that_never_ends_is_cut_short_as_a_runaway():
    sc = build(split_loop(max_iters=3, count=3))
    rep = run_scenario(sc, B + "EndlessLoop")
    found = _runaways(rep)
    assert [v.request for v in found] == ["r0", "r1", "r2"]
    v = found[0]
    assert (v.walk, v.node, v.rank) == ("w", "A", 0)
    assert v.details["explained"] == 3 and v.details["forwards"] > RUNAWAY_FACTOR * 3
    assert v.details["cycle"] == ["A@0", "B@1", "A@0"]
    assert "r0 ran away in walk w" in v.message and "A@0 -> B@1 -> A@0" in v.message
    # Cut short: a bounded number of forwards, far from the 600 s request timeout.
    forwards = sum(1 for e in rep.result.events if type(e) is Forward)
    assert forwards <= 3 * 2 * (RUNAWAY_FACTOR * 3 + RUNAWAY_SLACK + 2)
    assert rep.result.sim_time_s < 1.0
    assert signature(rep.violations, sc) == ("liveness", "runaway")
    # The same layout under a correct runtime runs its loops and ends.
    assert run_scenario(sc, "mstar-python").violations == []


def test_the_stray_loop_back_layout_is_reported_under_run(capsys):
    from simharness.cli import main

    assert main(["run", str(RUNAWAY_CASE), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    found = [v for v in out["violations"] if v["check"] == "liveness"]
    assert len(found) == 1
    v = found[0]
    assert (v["reason"], v["request"], v["node"], v["rank"]) == ("runaway", "r0", "b", 1)
    assert v["cycle"][0] == v["cycle"][-1] == "b@1" and len(v["cycle"]) > 2
    assert " -> ".join(v["cycle"]) in v["message"]
    rep = run_scenario(load_scenario(RUNAWAY_CASE))
    assert rep.result.sim_time_s < 1.0  # not the 60 s timeout
    assert len(rep.result.events) < 2000


def test_a_fuzz_campaign_finds_the_runaway():
    r = run_campaign(CampaignConfig(B + "EndlessLoop", seed=0, examples=50, chunk_size=50,
                                    shrink=False, tolerated_only=True))
    assert "liveness:runaway" in r.findings, sorted(r.findings)


@pytest.mark.parametrize("runtime", ["mstar-python", "mstar-rust", "mstar-rust-prefix"])
def test_a_correct_long_run_never_trips_the_guard(runtime):
    sc = load_scenario(SCENARIOS / "bagel_cfg.yaml",
                       ["workload[0].count=20", "workload[1].count=40", "workload[1].concurrency=8"])
    rep = run_scenario(sc, runtime)
    assert not _runaways(rep)
    assert len(rep.result.outcomes) == 60
    if runtime != "mstar-rust-prefix":  # the pre-fix runtime has its loop-exit drift here
        assert rep.violations == []
        assert all(o == "completed" for o in rep.result.outcomes.values())


@pytest.mark.parametrize("name", ["orpheus", "bagel_pd", "qwen3omni_2gpu", "cosmos3_tp2"])
def test_streams_dynamic_stops_and_repeated_walks_never_trip_the_guard(name):
    rep = run_scenario(load_scenario(SCENARIOS / f"{name}.yaml"))
    assert not _runaways(rep)
