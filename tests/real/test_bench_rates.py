"""The zmq figures of `python -m benchmarks` keep their shape: both message shapes measured on
the backend and on bare pyzmq, each turn's ratio kept beside the best-over-best verdict. No rate
is asserted (speed lives in the benchmark)."""

from __future__ import annotations

import math

import pytest

from benchmarks.__main__ import Table, zmq_rates

pytestmark = pytest.mark.zmq


@pytest.fixture
def resource_tracker_running():
    """multiprocessing's resource tracker, started before `no_orphans` counts this process's
    children: the benchmark's queues start it, and it lives, by design, as long as this process
    does. Every other process the benchmark starts must be gone when it returns."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def test_zmq_rates_report_every_turn_beside_the_verdict(resource_tracker_running, no_orphans):
    table = Table()
    zmq_rates(table, 400)
    assert [r["figure"].split(" (")[0] for r in table.rows] == [
        "zmq signal-only INPUT_SIGNALS", "zmq INPUT_SIGNALS + 512 KiB tensor"]
    for r in table.rows:
        assert r["rate"] > 0 and r["bare"] > 0
        assert math.isclose(r["ratio"], r["bare"] / r["rate"])
        assert r["verdict"] == ("met" if r["ratio"] <= 3 else "MISSED")
        assert len(r["turn_ratios"]) == 3
        assert min(r["turn_ratios"]) <= r["median_ratio"] <= max(r["turn_ratios"])
