"""One worker's main loop as a pure state machine: messages in, batches out, sends out.

Modelled on mstar's worker main loop (reference/mstar_semantics.md section 4.1) without
speculation. A driver (the simpy engine, or a real worker process) calls it in this order:

* `handle(msg, now)` for every message that arrived while the worker was busy;
* `take_batch()` to pick the next batch (round-robin over (node, walk), engine gates applied),
  then `start(batch, now, duration)` when it begins executing;
* `finish(batch, now)` when it has executed: each request's node completes in the runtime, its
  outputs are routed, done worker graphs are reported, removals deferred because the request was
  in flight are applied. It returns the `Send`s the driver must carry out.

Messages for a request this rank does not know yet are kept and replayed when its NEW_REQUEST
arrives; messages for a request it already removed are parked for ever, as mstar's
``_unprocessed_messages`` does (a leak the drain check reports). Nothing here reads a clock:
`now` comes from the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simharness import events as ev
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.graph_state import REJECTED
from simharness.runtime.messages import (
    CLIENT_ID,
    CONDUCTOR_ID,
    InputSignals,
    NewRequest,
    RemoveRequest,
    ResultTensors,
    Send,
    WorkerGraphsDoneMsg,
)
from simharness.runtime.protocol import LoopPolicy
from simharness.runtime.rank import RankRuntime
from simharness.runtime.scheduler import Batch, MicroScheduler
from simharness.runtime.signals import Signal


class WorkerLoop:
    def __init__(
        self,
        rank: int,
        runtime: RankRuntime,
        nodes: FakeNodes,
        policy: LoopPolicy,
        emit: Callable[[Any], None],
    ) -> None:
        self.rank = rank
        self.runtime = runtime
        self.nodes = nodes
        self.emit = emit
        self.scheduler = MicroScheduler(nodes.max_batch, nodes.gate, policy.batching)
        self.busy = False
        self.in_flight: set[str] = set()
        self.pending_removes: set[str] = set()
        self.removed: set[str] = set()
        #: rid -> messages that arrived before the request's NEW_REQUEST
        self.early: dict[str, list[Any]] = {}
        #: rid -> kinds of messages that arrived after the request was removed here
        self.unprocessed: dict[str, list[str]] = {}
        #: rid -> persist signals buffered until the next worker-graphs-done report
        self.persist_buffer: dict[str, list[Signal]] = {}
        #: rid -> client emits made since the last worker-graphs-done report
        self.emit_count: dict[str, int] = {}

    # -- messages -----------------------------------------------------------------------------

    def handle(self, msg: Any, now: float) -> list[Send]:
        rid = msg.rid
        if isinstance(msg, NewRequest):
            self.runtime.admit(rid, msg.walk, msg.pass_no, msg.assignment)
            if msg.signals:
                self._ingest(rid, msg.walk, msg.pass_no, msg.signals, CONDUCTOR_ID, now)
            out: list[Send] = []
            for early in self.early.pop(rid, ()):
                out.extend(self.handle(early, now))
            return out
        if rid not in self.runtime.requests:
            if rid in self.removed:
                self._park_unprocessed(msg, now)
            else:
                self.early.setdefault(rid, []).append(msg)
            return []
        if isinstance(msg, InputSignals):
            self._ingest(rid, msg.walk, msg.pass_no, msg.signals, msg.src, now)
        elif isinstance(msg, RemoveRequest):
            if rid in self.in_flight:
                self.pending_removes.add(rid)
            else:
                self._remove(rid, now)
        return []

    def _park_unprocessed(self, msg: Any, now: float) -> None:
        self.unprocessed.setdefault(msg.rid, []).append(msg.kind)
        self.emit(ev.Dropped(
            now, self.rank, msg.rid, msg.kind,
            "arrived after the request was removed on this rank; parked in unprocessed messages "
            "forever", tuple(getattr(msg, "signals", ()))))

    def _ingest(self, rid: str, walk: str, pass_no: int, signals: list[Signal], src: int, now: float) -> None:
        outcomes = self.runtime.deliver(rid, walk, pass_no, signals)
        self.emit(ev.Delivered(now, self.rank, rid, walk, pass_no, src, tuple(outcomes)))
        lost = tuple(s for s, _, o in outcomes if o is REJECTED)
        if lost:
            self.emit(ev.Dropped(now, self.rank, rid, "input_signals",
                                 f"no worker graph of walk {walk!r} on this rank accepted it "
                                 f"(not a node here, or both slots full); dropped silently", lost))

    def _remove(self, rid: str, now: float) -> None:
        runtime = self.runtime
        if rid not in runtime.requests:
            return
        leftovers = tuple(runtime.leftovers(rid))
        held = runtime.remove(rid)
        self.scheduler.drop(rid)
        self.removed.add(rid)
        self.persist_buffer.pop(rid, None)
        self.emit_count.pop(rid, None)
        self.emit(ev.Removed(now, self.rank, rid,
                             tuple((h.wg, h.node, h.slot, h.signal) for h in held), leftovers))

    # -- batches ------------------------------------------------------------------------------

    def take_batch(self) -> Batch | None:
        return self.scheduler.next_batch(self.runtime, self.pending_removes)

    def start(self, batch: Batch, now: float, duration: float) -> None:
        self.emit(ev.BatchStarted(now, self.rank, batch.node, batch.walk, tuple(batch.rids),
                                  batch.number, duration))
        self.busy = True
        self.in_flight = set(batch.rids)
        batch.start = now

    def finish(self, batch: Batch, now: float) -> list[Send]:
        sends = self._postprocess(batch, now)
        self.busy = False
        self.in_flight = set()
        if self.pending_removes:
            for rid in sorted(self.pending_removes):
                self._remove(rid, now)
            self.pending_removes.clear()
        return sends

    def _postprocess(self, batch: Batch, now: float) -> list[Send]:
        emit = self.emit
        rank = self.rank
        completions = []
        complete = self.runtime.complete
        requests = self.runtime.requests
        node, walk, number, start = batch.node, batch.walk, batch.number, batch.start
        for rid in batch.rids:
            if rid not in requests:
                continue
            c = complete(rid, node, walk)
            completions.append(c)
            emit(ev.Forward(now, rank, rid, walk, node, c.pass_no, c.counter, c.wg, number, start,
                            c.loop_context, tuple(c.routes), tuple(sorted(c.filtered)),
                            tuple(c.finished_loops), tuple(c.completed_wgs)))
        # mstar sends per request: INPUT_SIGNALS to peers, emits, then the worker-graphs-done report.
        sends: list[Send] = []
        for c in completions:
            to_ranks = c.to_ranks
            for r in sorted(to_ranks) if len(to_ranks) > 1 else to_ranks:
                sigs = to_ranks[r]
                nbytes = 0
                for s in sigs:
                    nbytes += s.nbytes
                sends.append(Send(r, nbytes, InputSignals(c.rid, c.walk, c.pass_no, sigs, rank)))
            if c.to_conductor:
                self.persist_buffer.setdefault(c.rid, []).extend(c.to_conductor)
            for s in c.to_client:
                sends.append(Send(CLIENT_ID, s.nbytes, ResultTensors(c.rid, rank, s)))
            if c.to_client:
                self.emit_count[c.rid] = self.emit_count.get(c.rid, 0) + len(c.to_client)
            if c.completed_wgs:
                persist = self.persist_buffer.pop(c.rid, [])
                emits = self.emit_count.pop(c.rid, 0)
                emit(ev.WorkerGraphsDone(now, rank, c.rid, tuple(c.completed_wgs), c.pass_no))
                sends.append(Send(CONDUCTOR_ID, 0, WorkerGraphsDoneMsg(
                    c.rid, rank, list(c.completed_wgs), persist, c.pass_no, emits)))
        return sends
