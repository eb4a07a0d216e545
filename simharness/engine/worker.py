"""One rank as a simpy process: its inbox, its micro-scheduler, serial batch execution.

The loop mirrors mstar's worker main loop (reference/mstar_semantics.md section 4.1) without
speculation: process every message that has arrived, pick a batch, run it (the rank is busy for
the batch's service time; messages that arrive meanwhile wait), then postprocess: complete each
request's node in the runtime, send what it routed, report done worker graphs, and apply
removals that were deferred because the request was in flight.

Messages for a request this rank does not know yet are kept and replayed when its NEW_REQUEST
arrives; messages for a request it already removed are parked forever, as mstar's
``_unprocessed_messages`` does (a leak the drain check reports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import simpy

from simharness.engine import events as ev
from simharness.engine.messages import (
    InputSignals,
    NewRequest,
    RemoveRequest,
    ResultTensors,
    WorkerGraphsDoneMsg,
)
from simharness.engine.network import CLIENT_ID, CONDUCTOR_ID
from simharness.engine.scheduler import Batch, MicroScheduler
from simharness.runtime.graph_state import REJECTED
from simharness.runtime.rank import RankRuntime
from simharness.runtime.signals import Signal

if TYPE_CHECKING:
    from simharness.engine.simulation import Simulation


class Worker:
    def __init__(self, sim: Simulation, rank: int, runtime: RankRuntime) -> None:
        self.sim = sim
        self.env: simpy.Environment = sim.env
        self.rank = rank
        self.runtime = runtime
        self.nodes = sim.fake_nodes
        self.scheduler = MicroScheduler(self.nodes.max_batch, self.nodes.gate,
                                        sim.policy.batching)
        self.inbox: list[Any] = []
        self._wake: simpy.Event | None = None
        self.busy = False
        self.in_flight: set[str] = set()
        self.pending_removes: set[str] = set()
        self.removed: set[str] = set()
        #: rid -> messages that arrived before the request's NEW_REQUEST
        self.early: dict[str, list[Any]] = {}
        #: rid -> messages that arrived after the request was removed here (never processed)
        self.unprocessed: dict[str, list[str]] = {}
        #: rid -> persist signals buffered until the next worker-graphs-done report
        self.persist_buffer: dict[str, list[Signal]] = {}
        #: rid -> client emits made since the last worker-graphs-done report
        self.emit_count: dict[str, int] = {}

    # -- inbox --------------------------------------------------------------------------------

    def deliver(self, msg: Any) -> None:
        self.inbox.append(msg)
        wake = self._wake
        if wake is not None and not wake.triggered:
            wake.succeed()

    def run(self):
        env = self.env
        emit = self.sim.recorder.emit
        while True:
            if self.inbox:
                self._process_inbox()
            batch = self.scheduler.next_batch(self.runtime, self.pending_removes)
            if batch is None:
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            duration = self.nodes.duration(batch.node, batch.walk, len(batch.rids))
            start = env.now
            emit(ev.BatchStarted(start, self.rank, batch.node, batch.walk, tuple(batch.rids),
                                 batch.number, duration))
            self.busy = True
            self.in_flight = set(batch.rids)
            yield env.timeout(duration)
            self._postprocess(batch, start)
            self.busy = False
            self.in_flight = set()
            if self.pending_removes:
                for rid in sorted(self.pending_removes):
                    self._remove(rid)
                self.pending_removes.clear()

    def _process_inbox(self) -> None:
        msgs, self.inbox = self.inbox, []
        for msg in msgs:
            self._handle(msg)

    def _handle(self, msg: Any) -> None:
        rid = msg.rid
        known = rid in self.runtime.requests
        if isinstance(msg, NewRequest):
            self.runtime.admit(rid, msg.walk, msg.pass_no, msg.assignment)
            if msg.signals:
                self._ingest(rid, msg.walk, msg.pass_no, msg.signals, CONDUCTOR_ID)
            for early in self.early.pop(rid, ()):
                self._handle(early)
            return
        if not known:
            if rid in self.removed:
                self._park_unprocessed(msg)
            else:
                self.early.setdefault(rid, []).append(msg)
            return
        if isinstance(msg, InputSignals):
            self._ingest(rid, msg.walk, msg.pass_no, msg.signals, msg.src)
        elif isinstance(msg, RemoveRequest):
            if rid in self.in_flight:
                self.pending_removes.add(rid)
            else:
                self._remove(rid)

    def _park_unprocessed(self, msg: Any) -> None:
        self.unprocessed.setdefault(msg.rid, []).append(msg.kind)
        sigs = tuple(getattr(msg, "signals", ()))
        self.sim.recorder.emit(ev.Dropped(
            self.env.now, self.rank, msg.rid, msg.kind,
            "arrived after the request was removed on this rank; parked in unprocessed messages "
            "forever", sigs))

    def _ingest(self, rid: str, walk: str, pass_no: int, signals: list[Signal], src: int) -> None:
        outcomes = self.runtime.deliver(rid, walk, pass_no, signals)
        emit = self.sim.recorder.emit
        emit(ev.Delivered(self.env.now, self.rank, rid, walk, pass_no, src, tuple(outcomes)))
        lost = tuple(s for s, _, o in outcomes if o is REJECTED)
        if lost:
            emit(ev.Dropped(self.env.now, self.rank, rid, "input_signals",
                            f"no worker graph of walk {walk!r} on this rank accepted it "
                            f"(not a node here, or both slots full); dropped silently", lost))

    def _remove(self, rid: str) -> None:
        runtime = self.runtime
        if rid not in runtime.requests:
            return
        leftovers = tuple(runtime.leftovers(rid))
        held = runtime.remove(rid)
        self.scheduler.drop(rid)
        self.removed.add(rid)
        self.persist_buffer.pop(rid, None)
        self.emit_count.pop(rid, None)
        self.sim.recorder.emit(ev.Removed(
            self.env.now, self.rank, rid,
            tuple((h.wg, h.node, h.slot, h.signal) for h in held), leftovers))

    # -- postprocess --------------------------------------------------------------------------

    def _postprocess(self, batch: Batch, start: float) -> None:
        sim = self.sim
        emit = sim.recorder.emit
        now = self.env.now
        rank = self.rank
        completions = []
        complete = self.runtime.complete
        requests = self.runtime.requests
        node, walk, number = batch.node, batch.walk, batch.number
        for rid in batch.rids:
            if rid not in requests:
                continue
            c = complete(rid, node, walk)
            completions.append(c)
            emit(ev.Forward(now, rank, rid, walk, node, c.pass_no, c.counter, c.wg, number, start,
                            c.loop_context, tuple(c.routes), tuple(c.filtered),
                            tuple(c.finished_loops), tuple(c.completed_wgs)))
        send = sim.network.send
        workers = sim.workers
        for c in completions:
            to_ranks = c.to_ranks
            for r in sorted(to_ranks) if len(to_ranks) > 1 else to_ranks:
                sigs = to_ranks[r]
                nbytes = 0
                for s in sigs:
                    nbytes += s.nbytes
                send(rank, r, nbytes, workers[r].deliver,
                     InputSignals(c.rid, c.walk, c.pass_no, sigs, rank))
            if c.to_conductor:
                self.persist_buffer.setdefault(c.rid, []).extend(c.to_conductor)
            for s in c.to_client:
                send(rank, CLIENT_ID, s.nbytes, sim.client.deliver, ResultTensors(c.rid, rank, s))
            if c.to_client:
                self.emit_count[c.rid] = self.emit_count.get(c.rid, 0) + len(c.to_client)
            if c.completed_wgs:
                persist = self.persist_buffer.pop(c.rid, [])
                emits = self.emit_count.pop(c.rid, 0)
                emit(ev.WorkerGraphsDone(now, rank, c.rid, tuple(c.completed_wgs), c.pass_no))
                send(rank, CONDUCTOR_ID, 0, sim.conductor.deliver,
                     WorkerGraphsDoneMsg(c.rid, rank, list(c.completed_wgs), persist, c.pass_no,
                                         emits))
