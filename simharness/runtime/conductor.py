"""The conductor as a pure state machine: admission, walk sequencing per partition, pass
completion, teardown.

Modelled on mstar's conductor (reference/mstar_semantics.md sections 1.5, 6.2):

* admission: at most ``max_concurrent_requests`` requests at once, the rest wait in FIFO order;
* placement per request: one replica per node group, drawn from the ``placement`` stream;
* kick-off: every partition of the request starts at once; NEW_REQUEST goes to every rank
  hosting one of the request's worker graphs, with each partition's first walk and that rank's
  start inputs;
* a partition's pass is done when every worker graph of its current walk has reported done once
  per rank of its instance. The partition then moves to its next walk (start inputs go only to
  the ranks that consume them; a stream-fed walk that repeats until its final chunk gets
  nothing: it triggers itself), or is done: when its walks are over, when the pass that
  consumed its stream's final chunk says so, or when its output tokens reach the request
  kind's ``max_output_tokens``. A partition that finishes sends ``producer_done`` to the ranks
  of the partitions it streams to;
* when every partition is done the API server is told (request_complete) and REMOVE goes to
  every rank of the request (the reference, section 4.8). With ``drain_barrier`` (mstar 0.2.1)
  REMOVE waits until the API server has read every output (READS_DONE). A hung or timed-out
  request is torn down at once (the API's abort); with ``drain_barrier`` every rank drains it
  first (DRAIN_REQUEST, acknowledged with DrainDone) and it stays open here until all have.

Like `WorkerLoop`, it has one door, `handle_stimulus(stimulus, now)`: `Submit`, `Arrived` (a
worker-graphs-done report, READS_DONE) or `Abort` in, `Effects` out (the `Send`s, the trace
events, and the requests that ended with their outcome). It takes `now` from its driver.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simharness import events as ev
from simharness.placement.layout import Assignment, Layout
from simharness.runtime.effects import Abort, Arrived, Effects, Submit
from simharness.runtime.messages import (
    CLIENT_ID,
    CONDUCTOR_ID,
    DrainDone,
    DrainRequest,
    InputSignals,
    NewRequest,
    ProducerDone,
    ReadsDone,
    RemoveRequest,
    RequestComplete,
    Send,
    WorkerGraphsDoneMsg,
)
from simharness.runtime.protocol import LoopPolicy, StallPosition
from simharness.scenario.model import RequestKind, Scenario, Step
from simharness.signals import ORIGIN_WALK_START, Signal


@dataclass
class PartitionState:
    name: str
    steps: tuple[Step, ...]
    step: int = 0
    #: passes run of the current step
    repeat: int = 0
    #: passes started in this partition (mstar's per-partition ``fwd_index``)
    pass_no: int = 0
    #: worker graph -> reports still expected for the current pass
    pending: dict[str, int] = field(default_factory=dict)
    done: bool = False
    #: the report that completed the current pass said it consumed its stream's final chunk
    final_seen: bool = False
    tokens: int = 0

    @property
    def walk(self) -> str:
        return self.steps[min(self.step, len(self.steps) - 1)].walk


@dataclass
class ConductorRequest:
    rid: str
    kind: RequestKind
    assignment: Assignment | None = None
    partitions: dict[str, PartitionState] = field(default_factory=dict)
    #: persisted signals by name, handed to later walks
    persisted: dict[str, Signal] = field(default_factory=dict)
    #: client emits reported so far (what the API server must read before teardown)
    emits: int = 0
    #: every partition is done; waiting for the API server's READS_DONE (or ended)
    draining: bool = False
    #: KV label -> (rank, tokens) as the last report from an instance's rank 0 said
    kv: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: aborted under mstar 0.2.1's teardown: the ranks whose drain is not acknowledged yet
    #: (None: not aborted). The request stays open here until every rank has answered.
    aborting: set[int] | None = None

    @property
    def walk(self) -> str:
        """The first unfinished partition's current walk (for reports)."""
        for p in self.partitions.values():
            if not p.done:
                return p.walk
        return next(iter(self.partitions.values())).walk

    @property
    def step(self) -> int:
        return sum(p.pass_no for p in self.partitions.values())

    @property
    def pending(self) -> dict[str, int]:
        return {wg: n for p in self.partitions.values() if not p.done for wg, n in p.pending.items()}


class Conductor:
    def __init__(
        self,
        scenario: Scenario,
        layout: Layout,
        policy: LoopPolicy,
        choose_replica: Callable[[int], int],
    ) -> None:
        self.scenario = scenario
        self.layout = layout
        self.policy = policy
        self.choose_replica = choose_replica
        self._events: list[Any] = []
        #: events go here until the door hands them out
        self.emit = self._events.append
        #: (rid, outcome) of requests ended since the door last handed them out
        self._ended: list[tuple[str, str]] = []
        self.cap = scenario.placement.max_concurrent_requests
        self.requests: dict[str, ConductorRequest] = {}
        self.waiting: deque[ConductorRequest] = deque()
        self.timeout = scenario.limits.request_timeout_s
        self._deadlines: list[tuple[float, int, str]] = []
        #: requests submitted and not yet ended (admitted or waiting)
        self._alive: set[str] = set()
        self._n = 0
        self._seq = 0

    # -- the door -----------------------------------------------------------------------------

    def handle_stimulus(self, stimulus: Any, now: float) -> Effects:
        t = type(stimulus)
        if t is Arrived:
            sends = self.handle(stimulus.msg, now)
        elif t is Submit:
            sends = self.submit(stimulus.rid, stimulus.kind, now)
        elif t is Abort:
            sends = self.abort(stimulus.rid, stimulus.outcome, now)
        else:
            raise TypeError(f"a conductor takes Submit, Arrived or Abort, not {t.__name__}")
        events = self._events[:]
        self._events.clear()
        ended, self._ended = self._ended, []
        return Effects(sends, events, ended)

    # -- admission ----------------------------------------------------------------------------

    def submit(self, rid: str, kind: str, now: float) -> list[Send]:
        req = ConductorRequest(rid, self.scenario.requests[kind])
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
        per_rank: dict[int, list[Signal]] = {}
        current: dict[str, tuple[str, int]] = {}
        for part, steps in req.kind.partitions.items():
            ps = req.partitions[part] = PartitionState(part, steps)
            current[part] = (ps.walk, 0)
            for r, sigs in self._start_pass(req, ps, now).items():
                per_rank.setdefault(r, []).extend(sigs)
        return [Send(r, sum(s.nbytes for s in per_rank.get(r, ())),
                     NewRequest(rid=req.rid, kind=req.kind.name, current=dict(current),
                                assignment=req.assignment, signals=per_rank.get(r, []),
                                kv=dict(req.kv)))
                for r in req.assignment.ranks]

    def _start_pass(self, req: ConductorRequest, ps: PartitionState, now: float) -> dict[int, list[Signal]]:
        """Open a pass of the partition's current walk; return its start inputs per rank."""
        walk = ps.walk
        assert req.assignment is not None
        wg_ranks = req.assignment.wg_ranks
        ps.pending = {wg.id: len(wg_ranks[wg.id]) for wg in self.layout.by_walk[walk]}
        ps.final_seen = False
        self.emit(ev.WalkStarted(now, req.rid, walk, ps.pass_no))
        per_rank: dict[int, list[Signal]] = {}
        facts = self.scenario.walk_facts[walk]
        start = facts.start_inputs
        extra = [p for p in req.kind.start_pairs if p[1] in facts.nodes and p not in start]
        if extra:
            start = start | frozenset(extra)
        for name, dest in sorted(start):
            if (name, dest) in facts.seeds:
                nbytes = 0  # loop-back seeds are signal-only edges (BAGEL's empty latents)
            elif name in req.persisted:
                nbytes = req.persisted[name].nbytes
            else:
                nbytes = self.scenario.payload_bytes(name)
            self._seq += 1
            sig = Signal(name, dest, False, False, nbytes, "conductor", CONDUCTOR_ID, walk,
                         ps.pass_no, None, ORIGIN_WALK_START, self._seq)
            for r in wg_ranks[self.layout.wg_of[(walk, dest)]]:
                per_rank.setdefault(r, []).append(sig)
        return per_rank

    # -- reports ------------------------------------------------------------------------------

    def handle(self, msg: Any, now: float) -> list[Send]:
        if isinstance(msg, WorkerGraphsDoneMsg):
            if msg.rid in self.requests and self.requests[msg.rid].aborting is not None:
                return []  # the request was given up: its passes no longer count
            return self._on_done(msg, now)
        if isinstance(msg, DrainDone):
            req = self.requests.get(msg.rid)
            if req is not None and req.aborting is not None:
                req.aborting.discard(msg.rank)
                if not req.aborting:
                    return self._teardown(req, now)
            return []
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
        if msg.tp_rank == 0:
            for label, tokens in msg.kv.items():
                req.kv[label] = (msg.rank, tokens)
        if req.draining:
            for wg in msg.wgs:
                emit(ev.UnexpectedReport(now, msg.rid, msg.rank, wg,
                                         "report after every partition of the request was done"))
            return []
        sends: list[Send] = []
        touched: dict[str, PartitionState] = {}  # partition name -> state, in report order
        by_id = self.layout.by_id
        for wg in msg.wgs:
            ps = req.partitions.get(by_id[wg].partition)
            left = None if ps is None or ps.done else ps.pending.get(wg)
            if ps is None or left is None:
                state = ("its partition is done" if ps is not None and ps.done
                         else "not a worker graph of the current walk, or already reported by every rank")
                emit(ev.UnexpectedReport(now, msg.rid, msg.rank, wg,
                                         f"worker graph is not awaited ({state})"))
                continue
            if left <= 1:
                del ps.pending[wg]
            else:
                ps.pending[wg] = left - 1
            if msg.tp_rank == 0 and msg.new_tokens and ps.name not in touched:
                ps.tokens += msg.new_tokens
            touched.setdefault(ps.name, ps)
        for ps in touched.values():
            if not ps.pending:
                # only the report that completes the pass speaks for it (mstar keeps the
                # ``partition_done`` of the WORKER_GRAPHS_DONE whose worker graphs end the pass,
                # conductor.py:1373-1391): a rank that consumed the final chunk in an earlier
                # report does not end the partition
                ps.final_seen = msg.partition_done
                sends.extend(self._pass_done(req, ps, now))
        if req.partitions and all(p.done for p in req.partitions.values()) and not req.draining:
            req.draining = True
            sends.append(Send(CLIENT_ID, 0, RequestComplete(rid=req.rid, emits=req.emits)))
            if not self.policy.drain_barrier:
                sends.extend(self._end(req, "completed", now))
        return sends

    def _pass_done(self, req: ConductorRequest, ps: PartitionState, now: float) -> list[Send]:
        self.emit(ev.PassDone(now, req.rid, ps.walk, ps.pass_no))
        ps.pass_no += 1
        ps.repeat += 1
        step = ps.steps[ps.step]
        reason = None
        if ps.final_seen:
            reason = "final_chunk"
        elif req.kind.max_output_tokens is not None and ps.tokens >= req.kind.max_output_tokens:
            reason = "max_tokens"
        elif not step.until_final and ps.repeat >= step.times:
            ps.step += 1
            ps.repeat = 0
            if ps.step >= len(ps.steps):
                reason = "walks_done"
        if reason is not None:
            return self._partition_done(req, ps, reason, now)
        per_rank = self._start_pass(req, ps, now)
        return [Send(r, sum(s.nbytes for s in sigs),
                     InputSignals(rid=req.rid, walk=ps.walk, pass_no=ps.pass_no, signals=sigs,
                                  src=CONDUCTOR_ID, kv=dict(req.kv)))
                for r, sigs in sorted(per_rank.items())]

    def _partition_done(
        self, req: ConductorRequest, ps: PartitionState, reason: str, now: float
    ) -> list[Send]:
        ps.done = True
        ps.pending = {}
        self.emit(ev.PartitionDone(now, req.rid, ps.name, reason))
        assert req.assignment is not None
        sends: list[Send] = []
        # Once per outgoing connection, to every worker of the consumer partition's worker
        # graphs, not only the consumer's (mstar ``_send_producer_done``); a worker without the
        # stream's buffer takes it as an edgeless INPUT_SIGNALS that changes nothing.
        for conn in self.scenario.connections:
            if conn.src != ps.name:
                continue
            wgs = self.layout.by_partition.get(conn.dst, ())
            ranks = tuple(sorted({r for wg in wgs for r in req.assignment.wg_ranks[wg.id]}))
            self.emit(ev.ProducerDoneSent(now, req.rid, ps.name, ranks))
            sends.extend(Send(r, 0, ProducerDone(rid=req.rid, partition=ps.name)) for r in ranks)
        return sends

    # -- teardown -----------------------------------------------------------------------------

    def _end(self, req: ConductorRequest, outcome: str, now: float) -> list[Send]:
        self._said_ended(req, outcome, now)
        return self._teardown(req, now)

    def _said_ended(self, req: ConductorRequest, outcome: str, now: float) -> None:
        """The request's end as the client sees it."""
        self._alive.discard(req.rid)
        self._prune_deadlines()
        self.emit(ev.RequestEnded(now, req.rid, outcome, req.step))
        self._ended.append((req.rid, outcome))

    def _teardown(self, req: ConductorRequest, now: float) -> list[Send]:
        """REMOVE to every rank of the request; its place goes to the next waiting request."""
        assert req.assignment is not None
        sends = [Send(r, 0, RemoveRequest(rid=req.rid)) for r in req.assignment.ranks]
        del self.requests[req.rid]
        while self.waiting and (self.cap is None or len(self.requests) < self.cap):
            sends.extend(self._admit(self.waiting.popleft(), now))
        return sends

    def abort(self, rid: str, outcome: str, now: float) -> list[Send]:
        """The API gave up on the request (hang or timeout): tear it down like a finished one;
        under mstar 0.2.1 (``drain_barrier``) after every rank has drained it (DRAIN_REQUEST,
        conductor.py:976-1033), the request open here until then."""
        req = self.requests.get(rid)
        if req is not None:
            if req.aborting is not None:
                return []
            if self.policy.drain_barrier and req.assignment is not None:
                self._said_ended(req, outcome, now)
                req.aborting = set(req.assignment.ranks)
                return [Send(r, 0, DrainRequest(rid=rid)) for r in req.assignment.ranks]
            return self._end(req, outcome, now)
        for i, w in enumerate(self.waiting):
            if w.rid == rid:
                del self.waiting[i]
                self._alive.discard(rid)
                self._prune_deadlines()
                self.emit(ev.RequestEnded(now, rid, outcome, 0))
                self._ended.append((rid, outcome))
                break
        return []

    def unfinished(self) -> list[str]:
        """Requests not ended yet (an aborted one waiting for its drain has ended)."""
        return [r for r, q in self.requests.items() if q.aborting is None] + [w.rid for w in self.waiting]

    def open_requests(self) -> tuple[str, ...]:
        """Every request the conductor holds (an aborted one waiting for its drain included)."""
        return tuple(self.requests)

    def waiting_requests(self) -> tuple[str, ...]:
        return tuple(q.rid for q in self.waiting)

    def stall_position(self, rid: str) -> StallPosition | None:
        """Where an unfinished request stands, for a hang report; None before admission."""
        req = self.requests.get(rid)
        if req is None or req.assignment is None:
            return None
        wg_ranks = req.assignment.wg_ranks
        return StallPosition(
            walk=req.walk, step=req.step,
            pending=tuple((wg, wg_ranks[wg]) for wg in req.pending),
            ranks=req.assignment.ranks,
            walks=tuple(p.walk for p in req.partitions.values() if not p.done))

    def next_deadline(self) -> tuple[float, str] | None:
        """The earliest timeout among requests still alive. Deadlines are the submission time
        plus the one timeout, so none comes earlier than one this returned before."""
        self._prune_deadlines()
        if not self._deadlines:
            return None
        t, _, rid = self._deadlines[0]
        return t, rid

    def _prune_deadlines(self) -> None:
        """Drop the heap's head while it is the deadline of a request that ended (as requests
        end, not only when a driver asks: the heap holds no more than the requests submitted
        since the oldest one still alive)."""
        heap = self._deadlines
        alive = self._alive
        while heap and heap[0][2] not in alive:
            heapq.heappop(heap)
