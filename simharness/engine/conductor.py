"""The conductor: admission, walk sequencing, pass completion, request teardown.

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
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from simharness.engine import events as ev
from simharness.engine.messages import (
    InputSignals,
    NewRequest,
    ReadsDone,
    RemoveRequest,
    RequestComplete,
    WorkerGraphsDoneMsg,
)
from simharness.engine.network import CLIENT_ID, CONDUCTOR_ID
from simharness.placement.layout import Assignment
from simharness.runtime.signals import ORIGIN_WALK_START, Signal
from simharness.scenario.model import RequestKind

if TYPE_CHECKING:
    from simharness.engine.simulation import Simulation


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
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.env = sim.env
        self.layout = sim.layout
        self.scenario = sim.scenario
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

    def submit(self, rid: str, kind: str, on_end: Callable[[str], None]) -> None:
        now = self.env.now
        req = ConductorRequest(rid, self.scenario.requests[kind], now, on_end)
        self.sim.recorder.emit(ev.Submitted(now, rid, kind))
        self._n += 1
        self._alive.add(rid)
        heapq.heappush(self._deadlines, (now + self.timeout, self._n, rid))
        if self.cap is None or len(self.requests) < self.cap:
            self._admit(req)
        else:
            self.waiting.append(req)

    def _admit(self, req: ConductorRequest) -> None:
        streams = self.sim.streams
        req.assignment = self.layout.assign(lambda n: streams.choice_index("placement", n))
        self.requests[req.rid] = req
        self.sim.recorder.emit(ev.Admitted(
            self.env.now, req.rid, req.kind.name, req.kind.walks,
            tuple(sorted(req.assignment.wg_ranks.items()))))
        self._start_walk(req, first=True)

    def _start_walk(self, req: ConductorRequest, first: bool = False) -> None:
        walk = req.walk
        pass_no = req.step
        assert req.assignment is not None
        wg_ranks = req.assignment.wg_ranks
        req.pending = {wg.id: len(wg_ranks[wg.id]) for wg in self.layout.by_walk[walk]}
        self.sim.recorder.emit(ev.WalkStarted(self.env.now, req.rid, walk, pass_no))
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
        send = self.sim.network.send
        workers = self.sim.workers
        if first:
            for r in req.assignment.ranks:
                sigs = per_rank.get(r, [])
                send(CONDUCTOR_ID, r, sum(s.nbytes for s in sigs), workers[r].deliver,
                     NewRequest(req.rid, walk, pass_no, req.assignment, sigs))
        else:
            for r in sorted(per_rank):
                sigs = per_rank[r]
                send(CONDUCTOR_ID, r, sum(s.nbytes for s in sigs), workers[r].deliver,
                     InputSignals(req.rid, walk, pass_no, sigs, CONDUCTOR_ID))

    # -- reports ------------------------------------------------------------------------------

    def deliver(self, msg: Any) -> None:
        if isinstance(msg, WorkerGraphsDoneMsg):
            self._on_done(msg)
        elif isinstance(msg, ReadsDone) and self.sim.policy.drain_barrier:
            req = self.requests.get(msg.rid)
            if req is not None and req.draining:
                self._end(req, "completed")

    def _on_done(self, msg: WorkerGraphsDoneMsg) -> None:
        now = self.env.now
        emit = self.sim.recorder.emit
        req = self.requests.get(msg.rid)
        if req is None:
            for wg in msg.wgs:
                emit(ev.UnexpectedReport(now, msg.rid, msg.rank, wg,
                                         "report for a request the conductor already ended"))
            return
        for sig in msg.persist:
            req.persisted[sig.name] = sig
        req.emits += msg.emits
        if req.draining:
            for wg in msg.wgs:
                emit(ev.UnexpectedReport(now, msg.rid, msg.rank, wg,
                                         "report after every walk of the request was done"))
            return
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
        if not req.pending:
            emit(ev.PassDone(now, req.rid, req.walk, req.step))
            req.step += 1
            if req.step < len(req.kind.walks):
                self._start_walk(req)
            else:
                req.draining = True
                self.sim.network.send(CONDUCTOR_ID, CLIENT_ID, 0, self.sim.client.deliver,
                                      RequestComplete(req.rid, req.emits))
                if not self.sim.policy.drain_barrier:
                    self._end(req, "completed")

    # -- teardown -----------------------------------------------------------------------------

    def _end(self, req: ConductorRequest, outcome: str) -> None:
        assert req.assignment is not None
        for r in req.assignment.ranks:
            self.sim.network.send(CONDUCTOR_ID, r, 0, self.sim.workers[r].deliver,
                                  RemoveRequest(req.rid))
        del self.requests[req.rid]
        self._alive.discard(req.rid)
        if outcome != "completed" or not self.sim.policy.drain_barrier:
            self.sim.client.forget(req.rid)
        self.sim.recorder.emit(ev.RequestEnded(self.env.now, req.rid, outcome, req.step))
        req.on_end(outcome)
        while self.waiting and (self.cap is None or len(self.requests) < self.cap):
            self._admit(self.waiting.popleft())

    def abort(self, rid: str, outcome: str) -> None:
        """The API gave up on the request (hang or timeout): tear it down like a finished one."""
        req = self.requests.get(rid)
        if req is not None:
            self._end(req, outcome)
            return
        for i, w in enumerate(self.waiting):
            if w.rid == rid:
                del self.waiting[i]
                self._alive.discard(rid)
                self.sim.recorder.emit(ev.RequestEnded(self.env.now, rid, outcome, 0))
                w.on_end(outcome)
                return

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
