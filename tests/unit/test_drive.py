"""The driver core on its own: the closed-loop workload in both its forms, the hang rule, the
stall flow over a fake port, and the end state. No engine, no processes."""

from __future__ import annotations

from types import SimpleNamespace

from simharness import events as ev
from simharness.drive.core import (
    QUIESCENCE,
    TIMEOUT,
    ConductorFinal,
    RankFinal,
    RequestPosition,
    Stalls,
    Workload,
    hung,
    run_ended,
)
from simharness.runtime.protocol import StallPosition
from simharness.scenario.model import Phase


def _workload(*phases: tuple[tuple[str, ...], int, int]) -> Workload:
    return Workload(SimpleNamespace(workload=tuple(
        Phase(kinds=k, count=n, concurrency=c) for k, n, c in phases)))


def _position(*ranks: int) -> StallPosition:
    return StallPosition(walk="w", step=3, pending=(("w/0", ranks),), ranks=ranks, walks=("w",))


def test_the_callback_form_runs_the_closed_loop_of_each_phase_in_turn():
    wl = _workload((("a", "b"), 3, 2), (("c",), 1, 4))
    first = wl.start()
    assert [(s.rid, s.kind) for s in first] == [("r0", "a"), ("r1", "b")]
    # The client whose request ended submits the phase's next one.
    assert [(s.rid, s.kind) for s in wl.ended("r1", "completed")] == [("r2", "a")]
    assert wl.ended("r0", "completed") == []  # phase 0 has issued all three
    assert wl.ended("r0", "completed") == []  # a duplicate end changes nothing
    nxt = wl.ended("r2", "hung")
    assert [(s.rid, s.kind) for s in nxt] == [("r3", "c")] and not wl.done
    assert wl.ended("r3", "completed") == [] and wl.done
    assert wl.final_outcomes() == {"r0": "completed", "r1": "completed", "r2": "hung",
                                   "r3": "completed"}


def test_the_process_form_issues_the_same_requests():
    wl = _workload((("a", "b"), 3, 2))
    assert wl.clients(0) == 2
    got = [wl.issue(0) for _ in range(4)]
    assert [(s.rid, s.kind) for s in got[:3]] == [("r0", "a"), ("r1", "b"), ("r2", "a")]
    assert got[3] is None


def test_a_stopped_workload_submits_nothing_more_and_unended_requests_fail():
    wl = _workload((("a",), 5, 1))
    wl.start()
    wl.stopped = True
    assert wl.ended("r0", "timeout") == []
    wl.issue(0)
    assert wl.final_outcomes() == {"r0": "timeout"}
    wl2 = _workload((("a",), 2, 2))
    wl2.start()
    assert wl2.unfinished() == ["r0", "r1"]
    assert wl2.final_outcomes() == {"r0": "failed", "r1": "failed"}


def test_only_admitted_requests_hang_unless_none_is_admitted():
    queued = RequestPosition(rid="r2", position=None)
    running = RequestPosition(rid="r1", position=_position(0))
    assert hung([running, queued]) == [running]
    assert hung([queued]) == [queued]
    assert hung([]) == []


class _Port:
    def __init__(self) -> None:
        self.aborted: list[tuple[str, str]] = []
        self.asked: list[str] = []

    def now(self) -> float:
        return 7.0

    def blocked(self, asks):
        self.asked = [p.rid for p in asks]
        return {p.rid: [ev.BlockedNode(r, "w/0", "n", 0, (), (), ("x",), "", (), False)
                        for r in p.position.ranks] for p in asks}

    def abort(self, rid: str, outcome: str) -> None:
        self.aborted.append((rid, outcome))


def test_a_stall_reports_asks_the_ranks_and_aborts_in_order():
    port, events, forgotten = _Port(), [], []

    class _Client:
        def handle_stimulus(self, stimulus, now):
            forgotten.append(stimulus.rid)

    stalls = Stalls(port, _Client(), events.append)
    queued = RequestPosition(rid="r2", position=None)
    stalls.stall(QUIESCENCE, [RequestPosition(rid="r1", position=_position(0, 1)), queued])
    assert port.asked == ["r1"] and port.aborted == [("r1", "hung")] and forgotten == ["r1"]
    (s,) = events
    assert (s.t, s.rid, s.reason, s.walk, s.pass_no) == (7.0, "r1", "quiescence", "w", 3)
    assert [b.rank for b in s.blocked] == [0, 1] and s.pending == (("w/0", (0, 1)),)
    # At a timeout every request given is reported, admitted or not.
    stalls.stall(TIMEOUT, [queued])
    assert port.aborted[-1] == ("r2", "timeout") and events[-1].walk == ""


def test_run_ended_leaves_out_what_is_empty_and_what_did_not_report():
    ranks = [RankFinal(rank=0, requests_left=(), unprocessed=(), busy=False), None,
             RankFinal(rank=2, requests_left=("r1",), unprocessed=(("r0", "remove"),), busy=True)]
    e = run_ended(1.5, ranks, ConductorFinal(requests=("r1",), waiting=()))
    assert e == ev.RunEnded(1.5, ((2, ("r1",)),), ((2, (("r0", "remove"),)),), ("r1",), (), (2,))
    assert run_ended(0.0, [], None).conductor_requests == ()
