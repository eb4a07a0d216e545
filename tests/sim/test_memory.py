"""Memory flat in finished requests: a run that keeps no trace digests as it goes, and what the
checks keep of a finished request is frozen and shared with every request that ran alike."""

from __future__ import annotations

import pytest

from simharness import events as ev
from simharness.checks import builtin_checks
from simharness.checks.forwards import ForwardLog
from simharness.run import run_scenario, simulate
from simharness.scenario.loader import load_scenario
from simharness.trace import Recorder
from tests.conftest import SCENARIOS


def _bagel(n: int):
    return load_scenario(SCENARIOS / "bagel_cfg.yaml",
                         [f"workload=[{{request: t2i, count: {n}, concurrency: 4}}]"])


@pytest.mark.parametrize("name, runtime", [
    ("bagel_cfg.yaml", "mstar-python"),
    ("bagel_cfg.yaml", "mstar-rust-prefix"),  # strays after the loop ended, violations
    ("orpheus_tp2.yaml", "mstar-python"),  # streams and a TP instance
    ("corpus/mstar-python__liveness-hang-edge.yaml", "mstar-python"),  # a hang
])
def test_digest_and_verdict_are_the_same_with_and_without_the_trace(name, runtime):
    sc = load_scenario(SCENARIOS / name)
    kept = run_scenario(sc, runtime, keep_trace=True)
    flat = run_scenario(sc, runtime, keep_trace=False)
    assert flat.result.events == [] and kept.result.events
    assert flat.trace_digest == kept.trace_digest
    assert [v.to_json() for v in flat.violations] == [v.to_json() for v in kept.violations]


def test_finished_requests_share_what_the_checks_keep():
    sc = _bagel(12)
    checks = builtin_checks(sc)
    from simharness.engine.simulation import Simulation
    from simharness.run import build_runtime

    guard = next(c for c in checks if c.name == "liveness")
    Simulation(sc, build_runtime(sc), observers=checks, keep_trace=False, guard=guard).run()
    fwd = next(c for c in checks if c.name == "forwards")
    liveness = guard
    assert fwd.log._open == {} and len(fwd.log._closed) == 12
    # twelve requests that ran alike: one frozen forward log between them
    assert len({id(v) for v in fwd.log._closed.values()}) == 1
    assert liveness._counts == {} and liveness._recent == {}
    assert len({id(tally) for tally, _ in liveness._ended.values()}) == 1


def test_a_late_forward_reopens_a_closed_request():
    log = ForwardLog()

    def fwd(counter, pass_no=0):
        return ev.Forward(0.0, 1, "r0", "w", "A", pass_no, counter, "w#0", 0, 0.0, (), (), (), (), ())

    for c in (0, 1):
        log.add(fwd(c))
    log.close("r0")
    log.add(fwd(1))  # a stray after the end
    assert dict(log.counters()) == {("w", "A", 1, "r0"): [0, 1, 1]}
    log.close("r0")
    assert dict(log.counts()) == {("w", "A", 1, "r0"): 3}


def test_the_summary_reads_the_forward_log_when_no_trace_was_kept():
    from simharness.report.summary import build_summary

    sc = _bagel(3)
    kept, flat = run_scenario(sc, keep_trace=True), run_scenario(sc, keep_trace=False)
    a, b = build_summary(kept), build_summary(flat)
    assert a["forwards"] == b["forwards"] and len(a["forwards"]) == 3 * 6


def test_a_run_that_neither_keeps_nor_digests_says_so():
    rec = Recorder(keep=False, digest=False)
    rec.emit(ev.PassDone(0.0, "r0", "w", 0))
    with pytest.raises(RuntimeError, match="neither kept its events nor digested them"):
        rec.digest()
    result, _ = simulate(_bagel(1), keep_trace=False, digest=False)
    assert result.events == []
