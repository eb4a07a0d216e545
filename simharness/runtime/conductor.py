"""The conductor as a pure state machine: admission, walk sequencing, pass completion, teardown.

Modelled on mstar's conductor (reference/mstar_semantics.md section 1.5):

* admission: at most ``max_concurrent_requests`` requests at once, the rest wait in FIFO order;
* placement per request: one replica per node group, drawn from the ``placement`` stream;
* kick-off: NEW_REQUEST to every rank hosting one of the request's worker graphs, carrying the
  first walk's start inputs for that rank;
* a pass of a walk is done when every worker graph of that walk has reported done once per rank
  of its instance; the next walk then starts with its own start inputs (external inputs from the
  client or from persisted signals, plus the loop-back seeds), sent only to the ranks that
  consume them;
* when the last walk is done the API server is told (request_complete) and REMOVE goes to every
  rank of the request, and the next waiting request is admitted (the reference, section 4.8).
  With ``drain_barrier`` (mstar 0.2.1) REMOVE waits until the API server has read every output
  (READS_DONE); until then the request keeps its slot. A hung or timed-out request is torn down
  at once (the API's abort).

Like `WorkerLoop`, it returns `Send`s for its driver to carry out and takes `now` from it.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simharness import events as ev
from simharness.placement.layout import Assignment, Layout
from simharness.runtime.messages import (
    CLIENT_ID,
    CONDUCTOR_ID,
    InputSignals,
    NewRequest,
    ReadsDone,
    RemoveRequest,
    RequestComplete,
    Send,
    WorkerGraphsDoneMsg,
)
from simharness.runtime.protocol import LoopPolicy
from simharness.runtime.signals import ORIGIN_WALK_START, Signal
from simharness.scenario.model import RequestKind, Scenario


@dataclass
class ConductorRequest:
    rid: str
    kind: RequestKind
    submitted: float
    on_end: Callable[[str], None]
    assignment: Assignment | None = None
    step: int = 0
    #: worker graph -> reports still expected for the current pass
    pending: dict[str, int] = field(default_factory=dict)
    #: persisted signals by name, handed to later walks
    persisted: dict[str, Signal] = field(default_factory=dict)
    #: client emits reported so far (what the API server must read before teardown)
    emits: int = 0
    #: every walk is done; waiting for the API server's READS_DONE
    draining: bool = False

    @property
    def walk(self) -> str:
        return self.kind.walks[min(self.step, len(self.kind.walks) - 1)]


class Conductor:
    def __init__(
        self,
        scenario: Scenario,
        layout: Layout,
        policy: LoopPolicy,
        choose_replica: Callable[[int], int],
        emit: Callable[[Any], None],
    ) -> None:
        self.scenario = scenario
        self.layout = layout
        self.policy = policy
        self.choose_replica = choose_replica
        self.emit = emit
        self.cap = self.scenario.placement.max_concurrent_requests
        self.requests: dict[str, ConductorRequest] = {}
        self.waiting: deque[ConductorRequest] = deque()
        self.timeout = self.scenario.limits.request_timeout_s
        self._deadlines: list[tuple[float, int, str]] = []
        #: requests submitted and not yet ended (admitted or waiting)
        self._alive: set[str] = set()
        self._n = 0
        self._seq = 0

    # -- admission ----------------------------------------------------------------------------

    def submit(self, rid: str, kind: str, now: float, on_end: Callable[[str], None]) -> list[Send]:
        req = ConductorRequest(rid, self.scenario.requests[kind], now, on_end)
        self.emit(ev.Submitted(now, rid, kind))
        self._n += 1
        self._alive.add(rid)
        heapq.heappush(self._deadlines, (now + self.timeout, self._n, rid))
        if self.cap is None or len(self.requests) < self.cap:
            return self._admit(req, now)
        self.waiting.append(req)
        return []

    def _admit(self, req: ConductorRequest, now: float) -> list[Send]:
        req.assignment = self.layout.assign(self.choose_replica)
        self.requests[req.rid] = req
        self.emit(ev.Admitted(now, req.rid, req.kind.name, req.kind.walks,
                              tuple(sorted(req.assignment.wg_ranks.items()))))
        return self._start_walk(req, now, first=True)

    def _start_walk(self, req: ConductorRequest, now: float, first: bool = False) -> list[Send]:
        walk = req.walk
        pass_no = req.step
        assert req.assignment is not None
        wg_ranks = req.assignment.wg_ranks
        req.pending = {wg.id: len(wg_ranks[wg.id]) for wg in self.layout.by_walk[walk]}
        self.emit(ev.WalkStarted(now, req.rid, walk, pass_no))
        per_rank: dict[int, list[Signal]] = {}
        facts = self.scenario.walk_facts[walk]
        for name, dest in sorted(facts.start_inputs):
            if (name, dest) in facts.seeds:
                nbytes = 0  # loop-back seeds are signal-only edges (BAGEL's empty latents)
            elif name in req.persisted:
                nbytes = req.persisted[name].nbytes
            else:
                nbytes = self.scenario.payload_bytes(name)
            self._seq += 1
            sig = Signal(name, dest, False, False, nbytes, "conductor", CONDUCTOR_ID, walk,
                         pass_no, None, ORIGIN_WALK_START, self._seq)
            for r in wg_ranks[self.layout.wg_of[(walk, dest)]]:
                per_rank.setdefault(r, []).append(sig)
        sends = []
        if first:
            for r in req.assignment.ranks:
                sigs = per_rank.get(r, [])
                sends.append(Send(r, sum(s.nbytes for s in sigs),
                                  NewRequest(req.rid, walk, pass_no, req.assignment, sigs)))
        else:
            for r in sorted(per_rank):
                sigs = per_rank[r]
                sends.append(Send(r, sum(s.nbytes for s in sigs),
                                  InputSignals(req.rid, walk, pass_no, sigs, CONDUCTOR_ID)))
        return sends

    # -- reports ------------------------------------------------------------------------------

    def handle(self, msg: Any, now: float) -> list[Send]:
        if isinstance(msg, WorkerGraphsDoneMsg):
            return self._on_done(msg, now)
        if isinstance(msg, ReadsDone) and self.policy.drain_barrier:
            req = self.requests.get(msg.rid)
            if req is not None and req.draining:
                return self._end(req, "completed", now)
        return []

    def _on_done(self, msg: WorkerGraphsDoneMsg, now: float) -> list[Send]:
        emit = self.emit
        req = self.requests.get(msg.rid)
        if req is None:
            for wg in msg.wgs:
                emit(ev.UnexpectedReport(now, msg.rid, msg.rank, wg,
                                         "report for a request the conductor already ended"))
            return []
        for sig in msg.persist:
            req.persisted[sig.name] = sig
        req.emits += msg.emits
        if req.draining:
            for wg in msg.wgs:
                emit(ev.UnexpectedReport(now, msg.rid, msg.rank, wg,
                                         "report after every walk of the request was done"))
            return []
        for wg in msg.wgs:
            left = req.pending.get(wg)
            if left is None:
                emit(ev.UnexpectedReport(now, msg.rid, msg.rank, wg,
                                         f"worker graph is not awaited in pass {req.step} "
                                         f"(walk {req.walk!r}): not of this walk, or already "
                                         f"reported by every rank"))
                continue
            if left <= 1:
                del req.pending[wg]
            else:
                req.pending[wg] = left - 1
        if req.pending:
            return []
        emit(ev.PassDone(now, req.rid, req.walk, req.step))
        req.step += 1
        if req.step < len(req.kind.walks):
            return self._start_walk(req, now)
        req.draining = True
        sends = [Send(CLIENT_ID, 0, RequestComplete(req.rid, req.emits))]
        if not self.policy.drain_barrier:
            sends.extend(self._end(req, "completed", now))
        return sends

    # -- teardown -----------------------------------------------------------------------------

    def _end(self, req: ConductorRequest, outcome: str, now: float) -> list[Send]:
        assert req.assignment is not None
        sends = [Send(r, 0, RemoveRequest(req.rid)) for r in req.assignment.ranks]
        del self.requests[req.rid]
        self._alive.discard(req.rid)
        self.emit(ev.RequestEnded(now, req.rid, outcome, req.step))
        req.on_end(outcome)
        while self.waiting and (self.cap is None or len(self.requests) < self.cap):
            sends.extend(self._admit(self.waiting.popleft(), now))
        return sends

    def abort(self, rid: str, outcome: str, now: float) -> list[Send]:
        """The API gave up on the request (hang or timeout): tear it down like a finished one."""
        req = self.requests.get(rid)
        if req is not None:
            return self._end(req, outcome, now)
        for i, w in enumerate(self.waiting):
            if w.rid == rid:
                del self.waiting[i]
                self._alive.discard(rid)
                self.emit(ev.RequestEnded(now, rid, outcome, 0))
                w.on_end(outcome)
                break
        return []

    def unfinished(self) -> list[str]:
        return list(self.requests) + [w.rid for w in self.waiting]

    def next_deadline(self) -> tuple[float, str] | None:
        """The earliest timeout among requests still alive (stale heap entries are discarded)."""
        heap = self._deadlines
        while heap:
            t, _, rid = heap[0]
            if rid in self._alive:
                return t, rid
            heapq.heappop(heap)
        return None
