"""Runtimes broken on purpose for the rarer violation kinds: what a run leaves behind at the end
(drain), requests the conductor mishandles (drain, liveness) and lockstep instances whose ranks
part (tp_agreement). Each one breaks one thing; `tests/quality/test_teardown_kinds_caught.py`
shows which violation kind catches it.

They are loaded the way any plugin runtime is, by ``tests.quality.broken_teardown:Name``.
"""

from __future__ import annotations

from collections import deque

from simharness.runtime.conductor import Conductor
from simharness.runtime.parts import WorkerParts
from simharness.runtime.profiles import MstarPython
from simharness.runtime.rank import RankRuntime
from simharness.runtime.worker_loop import WorkerLoop
from simharness.runtime.worker_parts import Lockstep, Speculation
from tests.quality.broken import _WithRank

# -- drain: what a rank or the conductor keeps after the end ---------------------------------


class _LeakyRank(RankRuntime):
    def remove(self, rid):
        req = self.requests[rid]
        held = super().remove(rid)
        if self.rank == 1:
            self.requests[rid] = req  # rank 1 reports what it held but keeps the request's state
        return held


class LeaksRequestState(_WithRank):
    """Rank 1 tears a request down but never forgets its state."""

    rank_class = _LeakyRank


class _StaysBusyLoop(WorkerLoop):
    def _finish(self, batch, now):
        sends = super()._finish(batch, now)
        if self.rank == 1:
            self.busy = True  # the finish path forgets to clear the busy flag
        return sends


class StaysBusy(MstarPython):
    """Rank 1's worker loop still calls itself busy after its batches have finished."""

    parts = WorkerParts(worker_loop=_StaysBusyLoop)


class _ForgetsEndedConductor(Conductor):
    def _end(self, req, outcome, now):
        sends = super()._end(req, outcome, now)
        # The request table keeps every ended request. What the API waits for (`_alive`) is
        # right, so the run still ends: the leak shows only in the conductor's final state.
        self.requests[req.rid] = req
        return sends

    def unfinished(self):
        return [rid for rid in super().unfinished() if rid in self._alive]


class ForgetsEndedRequests(MstarPython):
    """The conductor ends requests (REMOVE goes out, the client is told) but never deletes them."""

    parts = WorkerParts(conductor=_ForgetsEndedConductor)


# -- liveness: a request the conductor never admits ------------------------------------------


class _NeverAdmitsQueuedConductor(Conductor):
    def _end(self, req, outcome, now):
        # A slot frees, but the queue is not looked at: queued requests are admitted only by a
        # later submit, which never comes once the workload has issued them all.
        waiting, self.waiting = self.waiting, deque()
        try:
            return super()._end(req, outcome, now)
        finally:
            self.waiting = waiting


class NeverAdmitsQueued(MstarPython):
    """The conductor forgets to admit queued requests when a concurrency slot frees."""

    parts = WorkerParts(conductor=_NeverAdmitsQueuedConductor)


# -- tp_agreement: the ranks of a lockstep instance part ------------------------------------


class _FollowerOwnOrder(Lockstep):
    def take(self):
        batch = super().take()
        if batch is not None:
            # The follower lists the leader's requests in its own (reversed) order: its rows of
            # the batch no longer line up with the leader's in the instance's collectives.
            batch.rids = list(reversed(batch.rids))
        return batch


class FollowerOwnOrder(MstarPython):
    """A TP follower runs the leader's batch with its requests in another order."""

    parts = WorkerParts(lockstep=_FollowerOwnOrder)


class _LeaderSpeculates(Speculation):
    def plan(self, batch, now):
        lockstep = self.loop.lockstep
        if not (batch.instance and batch.instance[0] == lockstep.rank):
            return super().plan(batch, now)
        # mstar never speculates a TP node; this leader does, and tells no follower (a
        # speculative batch sends no SCHEDULE_TP and joins no collective).
        has_tp, lockstep.has_tp = lockstep.has_tp, False
        try:
            return super().plan(batch, now)
        finally:
            lockstep.has_tp = has_tp


class _SpeculationJoinsNoCollective(Lockstep):
    def join(self, batch):
        if not batch.speculative:
            super().join(batch)


class LeaderSpeculates(MstarPython):
    """A TP leader speculates the next step of its TP self-loop without its followers."""

    parts = WorkerParts(speculation=_LeaderSpeculates, lockstep=_SpeculationJoinsNoCollective)


class _LeaderNeverSchedules(Lockstep):
    def lead(self, batch):
        # The leader takes its batch into the instance's collective but tells no follower
        # (mstar's SCHEDULE_TP lost): it waits there for ranks that never choose the batch.
        super().lead(batch)
        return []


class LeaderNeverSchedules(MstarPython):
    """A TP leader runs its batches without sending SCHEDULE_TP to its followers."""

    parts = WorkerParts(lockstep=_LeaderNeverSchedules)
