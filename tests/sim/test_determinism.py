"""Same scenario and seed, same trace digest; the seed is the only source of randomness."""

import msgspec

from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.helpers import build, node, raw_scenario


def test_same_scenario_same_digest(scenarios_dir):
    sc = load_scenario(scenarios_dir / "bagel_cfg.yaml")
    a = run_scenario(sc, "mstar-rust-prefix")
    b = run_scenario(sc, "mstar-rust-prefix")
    assert a.trace_digest == b.trace_digest
    assert run_scenario(sc, "mstar-python").trace_digest != a.trace_digest


def test_determinism_check_runs_twice_and_passes(scenarios_dir):
    report = run_scenario(load_scenario(scenarios_dir / "bagel_cfg_2gpu.yaml"), "mstar-rust-prefix",
                          check_determinism=True)
    det = report.extra["determinism"]
    assert det["first"] == det["second"]
    assert "determinism" not in {v.check for v in report.violations}


def _replicated():
    walk = node("a", ["x"], [("o", "client")])
    return build(raw_scenario({"w": walk}, [{"node_names": ["a"], "ranks": [0, 1, 2, 3]}],
                              requests={"r": {"walks": ["w"], "inputs": ["x"]}},
                              workload=[{"request": "r", "count": 8, "concurrency": 2}]))


def test_the_seed_drives_replica_choice():
    sc = _replicated()
    placements = {}
    for seed in (0, 1):
        rep = run_scenario(sc, "mstar-python", seed=seed)
        placements[seed] = [e.placement for e in rep.result.events if type(e).__name__ == "Admitted"]
        assert rep.violations == []
        again = run_scenario(sc, "mstar-python", seed=seed)
        assert again.trace_digest == rep.trace_digest
    assert placements[0] != placements[1]


def test_the_first_difference_is_the_first_event_whose_encoding_differs(scenarios_dir):
    # Events carry signals, which compare by identity: two equal runs must still match
    # event for event, and a changed event must be found where it is.
    from simharness.checks.determinism import _first_difference
    from simharness.run import simulate

    sc = load_scenario(scenarios_dir / "bagel_mixed.yaml")
    a, _ = simulate(sc)
    b, _ = simulate(sc)
    assert _first_difference(a.events, b.events) == len(a.events)
    changed = list(b.events)
    changed[40] = msgspec.structs.replace(changed[40], t=changed[40].t + 1.0)
    assert _first_difference(a.events, changed) == 40
    # a field of a signal inside an event that its text (its identity) does not show
    i = next(i for i, e in enumerate(a.events) if type(e).__name__ == "Delivered")
    sig, wg, how = a.events[i].outcomes[0]
    other = msgspec.structs.replace(sig, nbytes=sig.nbytes + 1)
    changed = list(b.events)
    changed[i] = msgspec.structs.replace(changed[i], outcomes=((other, wg, how), *changed[i].outcomes[1:]))
    assert _first_difference(a.events, changed) == i


def test_a_determinism_failure_shows_the_first_events_that_differ(bagel):
    rep = run_scenario(bagel, "tests.quality.broken:UnseededOrder", check_determinism=True)
    v = next(v for v in rep.violations if v.check == "determinism")
    i = v.details["first_difference"]
    assert f"first difference at event {i}: " in v.message and " vs " in v.message
