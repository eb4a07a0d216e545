"""Schedule perturbations and faults: what each one does to a run, and that none of them reads
anything but the scenario's seed."""

from __future__ import annotations

import copy

from simharness.run import simulate
from simharness.scenario import parse_scenario
from tests.helpers import build, checks_failed, run, split_loop


def _digest(raw, runtime="mstar-python"):
    return simulate(parse_scenario(copy.deepcopy(raw)), runtime)[0].recorder.digest()


def test_empty_schedule_and_faults_change_nothing():
    raw = split_loop()
    assert _digest({**raw, "schedule": {}, "faults": []}) == _digest(raw)


def test_jitter_changes_the_trace_but_not_the_verdict_and_replays():
    raw = {**split_loop(count=3, concurrency=2),
           "schedule": {"service_jitter": 0.5, "link_jitter_us": 500, "shuffle_ties": True}}
    assert _digest(raw) != _digest(split_loop(count=3, concurrency=2))
    assert _digest(raw) == _digest(raw)
    assert run(raw, "mstar-python").violations == []
    assert _digest({**raw, "seed": 1}) != _digest(raw)


def test_a_delayed_message_keeps_fifo_and_the_run_passes():
    raw = {**split_loop(), "faults": [{"kind": "delay", "message": "input_signals", "from": 1,
                                       "to": 0, "nth": 1, "delay_ms": 50}]}
    rep = run(raw, "mstar-python")
    assert rep.violations == []
    assert rep.result.sim_time_s > run(split_loop(), "mstar-python").result.sim_time_s + 0.04


def test_a_dropped_signal_hangs_every_runtime():
    raw = {**split_loop(), "faults": [{"kind": "drop", "message": "input_signals", "from": 1,
                                       "to": 0, "nth": 1}]}
    for runtime in ("mstar-python", "mstar-rust"):
        assert "liveness" in checks_failed(run(raw, runtime))


def test_a_duplicated_report_is_noticed_and_a_duplicated_signal_replays():
    report = {**split_loop(), "faults": [{"kind": "duplicate", "message": "worker_graphs_done",
                                          "from": 1, "to": "conductor", "nth": 1}]}
    assert "worker_graphs" in checks_failed(run(report, "mstar-python"))
    # A duplicated loop input lands in the next-iteration slot; mstar clears it at the loop's end.
    signal = {**split_loop(), "faults": [{"kind": "duplicate", "message": "input_signals",
                                         "from": 0, "to": 1, "nth": 1}]}
    assert _digest(signal) != _digest(split_loop()) and _digest(signal) == _digest(signal)


def test_a_crashed_rank_hangs_its_requests_and_a_slow_one_only_slows():
    crash = {**split_loop(), "faults": [{"kind": "crash", "rank": 1, "at_ms": 0.5}]}
    rep = run(crash, "mstar-python")
    assert "liveness" in checks_failed(rep)
    # The dead rank never processed r0's REMOVE: drain reports the state it still holds.
    assert "rank 1 still holds state for r0 at the end of the run" in [
        v.message for v in rep.violations if v.check == "drain"]
    slow = {**split_loop(), "faults": [{"kind": "slow_rank", "rank": 1, "factor": 10}]}
    rep = run(slow, "mstar-python")
    assert rep.violations == []
    assert rep.result.sim_time_s > run(split_loop(), "mstar-python").result.sim_time_s


def test_bad_fault_keys_name_the_key_path():
    import pytest

    from simharness.errors import ScenarioError
    bad = [({"faults": [{"kind": "explode"}]}, "faults[0].kind"),
           ({"faults": [{"kind": "crash", "rank": 9}]}, "faults[0].rank"),
           ({"faults": [{"kind": "drop", "message": "gossip"}]}, "faults[0].message"),
           ({"faults": [{"kind": "delay", "message": "input_signals", "to": 5}]}, "faults[0].to"),
           ({"schedule": {"service_jitter": 1.5}}, "schedule.service_jitter"),
           ({"schedule": {"shuffle": True}}, "schedule.shuffle"),
           ({"corpus": {"signature": "x", "runtime": "r", "status": "maybe"}}, "corpus.status")]
    for extra, path in bad:
        with pytest.raises(ScenarioError) as err:
            build({**split_loop(), **extra})
        assert err.value.path == path, (extra, err.value)
