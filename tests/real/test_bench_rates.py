"""The zmq figures of `python -m benchmarks`: both message shapes measured on the backend and on
bare pyzmq, the verdict best over best, each turn's own ratio kept beside it. No rate is asserted
(speed lives in the benchmark)."""

from __future__ import annotations

import math

import pytest

from benchmarks import bench_real
from benchmarks.__main__ import Table, zmq_rates

pytestmark = pytest.mark.zmq


@pytest.fixture
def resource_tracker_running():
    """multiprocessing's resource tracker, started before `no_orphans` counts this process's
    children: the benchmark's queues start it, and it lives, by design, as long as this process
    does. Every other process the benchmark starts must be gone when it returns."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def test_zmq_rates_measure_both_shapes_and_leave_no_process(resource_tracker_running, no_orphans):
    table = Table()
    zmq_rates(table, 400)
    assert [r["figure"].split(" (")[0] for r in table.rows] == [
        "zmq signal-only INPUT_SIGNALS", "zmq INPUT_SIGNALS + 512 KiB tensor"]
    for r in table.rows:
        assert r["rate"] > 0 and r["bare"] > 0
        assert len(r["turn_ratios"]) == 3


def test_the_verdict_is_best_over_best_and_each_turn_keeps_its_own_ratio(monkeypatch):
    # Scripted turns, the same for both shapes: bare 100, 300, 200 and backend 50, 60, 100 give
    # turns of 2x, 5x and 2x; best over best is 300 / 100 = 3x, which meets the target although
    # one turn read 5x.
    bare, ours = iter([100.0, 300.0, 200.0] * 2), iter([50.0, 60.0, 100.0] * 2)
    monkeypatch.setattr(bench_real, "bare_rate", lambda n, pool: next(bare))
    monkeypatch.setattr(bench_real, "backend_rate", lambda n, with_tensor: next(ours))
    table = Table()
    zmq_rates(table, 400)
    assert len(table.rows) == 2
    for r in table.rows:
        assert r["turn_ratios"] == [2.0, 5.0, 2.0]
        assert r["median_ratio"] == 2.0
        assert (r["rate"], r["bare"]) == (100.0, 300.0)
        assert math.isclose(r["ratio"], 3.0) and r["verdict"] == "met"


def _dies_at_once(ready) -> None:
    """A receiver that fails before it reports (as one that cannot bind its socket would)."""
    raise SystemExit(3)


def _reports_late(ready) -> None:
    import time

    time.sleep(30)
    ready.put(True)


def test_a_receiver_that_never_reports_is_an_error_not_a_hang():
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    p = ctx.Process(target=_dies_at_once, args=(ready,))
    p.start()
    with pytest.raises(RuntimeError, match=r"the bare pyzmq receiver process ended \(exit code 3\)"):
        bench_real.from_child(ready, p, "bare pyzmq receiver", timeout_s=60)
    assert not p.is_alive()
    slow = ctx.Process(target=_reports_late, args=(ready,))
    slow.start()
    with pytest.raises(RuntimeError, match="did not report within 1 s"):
        bench_real.from_child(ready, slow, "backend receiver", timeout_s=1)
    assert not slow.is_alive()  # stopped, not left behind
