"""One worker's main loop as a pure state machine with one door: `handle_stimulus`.

Modelled on mstar's worker loop (reference/mstar_semantics.md sections 4.1-4.5, 5.2, 6.1,
6.2). A driver (`simharness.drive.worker.worker_main`) hands it, in this order:

* `Received(msgs)` with the messages that arrived while the worker was busy, in arrival
  order (or `Arrived(msg)`, one message);
* `CHOOSE` to pick the next batch (`Effects.batch`); choosing also polls the StreamBuffers (at
  most one chunk per stream) and may start KV pulls and send SCHEDULE_TP (`Effects.sends`);
* `Started(batch, duration)` when it begins, `Finished(batch)` when it has executed: the sends
  it produced and its `Completion`s come back.

Every answer is an `Effects`: sends, trace events in the order they happened, and per stimulus
the batch or the completions. What the loop does, as mstar does it:

* **Batches**: round-robin over (node, walk) (`scheduler`), engine gates applied: scripted gates,
  and KV readiness (`worker_parts.KvPulls`: a KV-cache node on a rank that lacks the request's
  pages pulls them first). The gate is a pure predicate; the pull starts for the work the
  scheduler held.
* **TP instances** (`worker_parts.Lockstep`): the instance's rank 0 schedules a TP node and
  sends SCHEDULE_TP to the other ranks, which run the leader's batches in order. A follower
  ignores the conductor's REMOVE; its leader forwards it.
* **Speculation** (`worker_parts.Speculation`): an async self-loop's next step is scheduled
  before the batch is postprocessed; a dynamic stop found then comes too late for it.
* **Dynamic stops**: after a batch, each request's ``check_stop`` (the fake node's stop rule)
  runs before the completion, so the iteration that triggered the stop is the last one; the
  loop's other copies on other ranks get STOP_LOOPS.
* **Teardown** (`worker_parts.Teardown`): removal of a request in flight is deferred; messages
  for a request this rank does not know yet are replayed at its NEW_REQUEST; messages for one
  it removed are parked for ever (mstar's ``_unprocessed_messages``, a leak the drain check
  reports).
* **Reports** (`worker_parts.Reports`): client emits, new tokens, persisted signals and
  consumed final chunks are buffered per request (`worker_parts.RequestRecord`) until its next
  worker-graphs-done report.

Nothing here reads a clock: `now` comes from the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from simharness import events as ev
from simharness.rng import draw_stop
from simharness.runtime.effects import Arrived, Choose, Effects, Finished, Poll, Received, Started
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.graph_state import REJECTED
from simharness.runtime.messages import (
    CONDUCTOR_ID,
    DrainDone,
    DrainRequest,
    InputSignals,
    KvPullDone,
    NewRequest,
    ProducerDone,
    RemoveRequest,
    ScheduleTp,
    Send,
    StopLoops,
    TensorReceived,
)
from simharness.runtime.parts import WorkerParts
from simharness.runtime.protocol import LoopPolicy, RankRuntimeProtocol, StallPosition, WorkerGraphState
from simharness.runtime.rank import Completion
from simharness.runtime.scheduler import Batch, MicroScheduler
from simharness.runtime.stall import blocked_nodes
from simharness.runtime.worker_parts import (
    KvPulls,
    Lockstep,
    Reports,
    RequestRecord,
    Speculation,
    Teardown,
)
from simharness.signals import Signal

#: the reference's parts: every collaborator the standard one
STANDARD = WorkerParts()


@lru_cache(maxsize=256)
def in_order(pairs: frozenset[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """A finishing loop's dropped pairs, sorted for the trace. Every copy of a loop drops the
    same set (placement gives each copy the one frozenset of the loop as written), so a set is
    sorted once per run however many copies end: a wide loop drops one pair per branch at each
    of its copies."""
    return tuple(sorted(pairs))


class WorkerLoop:
    """One rank's worker loop (a `protocol.WorkerDoor`). Its collaborators come from `parts`
    (`runtime.parts.WorkerParts`): a runtime whose worker loop differs in one concern swaps one
    class there."""

    def __init__(
        self,
        rank: int,
        runtime: RankRuntimeProtocol,
        nodes: FakeNodes,
        policy: LoopPolicy,
        seed: int = 0,
        *,
        parts: WorkerParts = STANDARD,
        tie_break: Any = None,
    ) -> None:
        self.rank = rank
        self.runtime = runtime
        self.nodes = nodes
        self.policy = policy
        self.seed = seed
        self.scenario = runtime.layout.scenario
        self.scheduler = MicroScheduler(nodes.max_batch, self.gate, policy.batching, self.held,
                                        gated=self.scenario.gated_nodes)
        if tie_break is not None:
            self.scheduler.tie_break = tie_break
        self.busy = False
        self.in_flight: set[str] = set()
        #: rid -> this rank's record of the request
        self.records: dict[str, RequestRecord] = {}
        self._events: list[Any] = []
        #: events go here until the door hands them out
        self.emit = self._events.append
        self._completions: list[Completion] = []
        self._chunk_seq = 0
        self.teardown: Teardown = (parts.teardown or Teardown)(self)
        self.lockstep: Lockstep = (parts.lockstep or Lockstep)(self)
        self.speculation: Speculation = (parts.speculation or Speculation)(self)
        self.kv: KvPulls = (parts.kv or KvPulls)(self)
        self.reports: Reports = (parts.reports or Reports)(self)
        # Fast paths: most layouts have no gated node and no stream here.
        self._gated = self.scenario.gated_nodes
        #: nodes inside a dynamic loop (their check_stop may end it)
        self._dynamic_nodes = self.scenario.dynamic_nodes
        #: a request has a StreamBuffer only where the layout routes a stream
        self._streams = bool(runtime.layout.stream_routes)
        #: STOP_LOOPS by stop times (`Semantics.stop_times`; an adapter without semantics: no)
        self._stop_times = bool(getattr(getattr(runtime, "semantics", None), "stop_times", False))

    # -- the door -----------------------------------------------------------------------------

    def handle_stimulus(self, stimulus: Any, now: float) -> Effects:
        t = type(stimulus)
        batch = None
        if t is Received:
            sends: list[Send] = []
            on_message = self._on_message
            for msg in stimulus.msgs:
                on_message(msg, now, sends)
        elif t is Choose:
            batch = self._choose(now, stimulus.poll)
            sends = self._outbox()
        elif t is Started:
            self._start(stimulus.batch, now, stimulus.duration)
            sends = []
        elif t is Finished:
            sends = self._finish(stimulus.batch, now)
        elif t is Arrived:
            sends = []
            self._on_message(stimulus.msg, now, sends)
        elif t is Poll:
            if self._streams:
                self._poll_streams(now)
            sends = []
        else:
            raise TypeError(f"a worker loop takes Received, Arrived, Choose, Poll, Started or "
                            f"Finished, not {t.__name__}")
        events: Sequence[Any] = self._events
        if events:
            events = events[:]
            self._events.clear()
        else:
            events = ()  # (choosing a batch mostly emits nothing)
        completions: Sequence[Completion] = self._completions
        if completions:
            self._completions = []
        else:
            completions = ()  # not the loop's own (empty) list, which a later batch fills
        return Effects(sends, events, (), batch, completions)

    def unprocessed_pairs(self) -> list[tuple[str, str]]:
        """(request, message kind) of every message parked unprocessed, in arrival order."""
        return self.teardown.unprocessed_pairs()

    def requests_left(self) -> tuple[str, ...]:
        """The requests this rank still holds state for."""
        return tuple(self.runtime.requests)

    def blocked(self, rid: str, position: StallPosition) -> list[ev.BlockedNode]:
        """For a stall report: the nodes of `rid` here that hold, miss or are held."""
        return blocked_nodes(self.rank, self.runtime, self.gate_detail, rid, position)

    def _outbox(self) -> list[Send]:
        out = self.kv.outbox
        if out:
            self.kv.outbox = []
        return out

    # -- messages -----------------------------------------------------------------------------

    def _on_message(self, msg: Any, now: float, sends: list[Send]) -> None:
        """Handle one message; what it sends is appended to `sends`."""
        runtime = self.runtime
        if isinstance(msg, InputSignals):  # most messages: the first question asked
            rid = msg.rid
            if rid not in runtime.requests:  # `_known`'s question, asked here for most messages
                self.teardown.hold(msg, now)
                return
            if msg.kv is not None:
                self.kv.learn(self.records[rid], msg.kv)
            self._ingest(rid, msg.walk, msg.pass_no, msg.signals, msg.src, now)
            if msg.src >= 0 and self._stop_times:
                # the conductor's walk-start inputs are left out: what its forward-pass info
                # says of stop times is not modelled (a new pass starts with none)
                self.runtime.learn_stop_times(rid, msg.walk, msg.signals, msg.stop_times)
            if self.policy.acks and msg.src >= 0 and msg.src != self.rank:
                sends.append(Send(msg.src, 0, TensorReceived(rid=rid)))
            return
        if type(msg) is TensorReceived:
            return  # the producer frees what was read: the model holds no tensors
        if isinstance(msg, ScheduleTp):
            self.lockstep.follow.append(msg)
            return
        rid = msg.rid
        if isinstance(msg, NewRequest):
            rec = self.records[rid] = RequestRecord(msg.kind)
            first_walk, first_pass = next(iter(msg.current.values()))
            runtime.admit(rid, first_walk, first_pass, msg.assignment,
                          partitions=frozenset(msg.current))
            for walk, pass_no in msg.current.values():
                runtime.set_walk(rid, walk, pass_no)
            self.kv.learn(rec, msg.kv)
            by_walk: dict[str, list[Signal]] = {}
            for s in msg.signals:
                by_walk.setdefault(s.walk, []).append(s)
            for walk, sigs in by_walk.items():
                self._ingest(rid, walk, msg.current[runtime.partition_of[walk]][1], sigs,
                             CONDUCTOR_ID, now)
            for early in self.teardown.early.pop(rid, ()):
                self._on_message(early, now, sends)
            return
        if not self._known(msg, now):
            return
        if isinstance(msg, StopLoops):
            for loop in runtime.peer_stop(rid, msg.partition, msg.loops, msg.times):
                self.emit(ev.LoopStopped(now, self.rank, rid, msg.partition, loop, "peer", msg.src))
        elif isinstance(msg, ProducerDone):
            for buf in runtime.requests[rid].buffers.values():
                if buf.src_partition == msg.partition:
                    buf.producer_done = True
        elif isinstance(msg, KvPullDone):
            self.kv.done(self.records[rid], msg)
            self.emit(ev.KvPulled(now, self.rank, rid, msg.label, msg.src, msg.tokens))
        elif isinstance(msg, RemoveRequest):
            if msg.source == "conductor" and self.lockstep.follows(rid):
                return  # a TP follower waits for its leader's copy
            if rid in self.in_flight:
                self.teardown.pending.add(rid)
            else:
                sends.extend(self._remove(rid, now))
        elif isinstance(msg, DrainRequest):
            if msg.source == "conductor" and self.lockstep.follows(rid):
                return  # as for REMOVE: a TP follower honours its leader's copy only
            if rid in self.in_flight:
                self.teardown.drains.add(rid)  # behind the batch, as mstar defers it
            else:
                sends.extend(self._drain(rid))

    def _known(self, msg: Any, now: float) -> bool:
        """The message's request is known here; if not, the message is held (it came before
        the request's NEW_REQUEST) or parked (after its removal)."""
        if msg.rid in self.runtime.requests:
            return True
        self.teardown.hold(msg, now)
        return False

    def _ingest(self, rid: str, walk: str, pass_no: int, signals: list[Signal], src: int, now: float) -> None:
        outcomes = tuple(self.runtime.deliver(rid, walk, pass_no, signals))
        self.emit(ev.Delivered(now, self.rank, rid, walk, pass_no, src, outcomes))
        for _, _, outcome in outcomes:
            if outcome is REJECTED:
                break
        else:
            return
        lost = tuple([s for s, _, o in outcomes if o is REJECTED])
        if lost:
            self.emit(ev.Dropped(now, self.rank, rid, "input_signals",
                                 f"no worker graph of walk {walk!r} on this rank accepted it "
                                 f"(not a node here, or both slots full); dropped silently", lost))

    def _drain(self, rid: str) -> list[Send]:
        """An aborted request's drain here (mstar's ``_begin_drain``, worker.py:552-575): its
        followers are told, no work of it runs again, and the conductor hears it is done."""
        if rid not in self.runtime.requests or rid in self.teardown.drained:
            return []
        self.teardown.drained.add(rid)
        return [*(Send(f, 0, DrainRequest(rid=rid, source="tp_leader"))
                  for f in self.lockstep.followers(rid)),
                Send(CONDUCTOR_ID, 0, DrainDone(rid=rid, rank=self.rank))]

    def _remove(self, rid: str, now: float) -> list[Send]:
        runtime = self.runtime
        if rid not in runtime.requests:
            return []
        followers = self.lockstep.followers(rid)
        leftovers = tuple(runtime.leftovers(rid))
        held = runtime.remove(rid)
        self.scheduler.drop(rid)
        self.teardown.removed.add(rid)
        self.teardown.drained.discard(rid)
        self.records.pop(rid, None)
        self.kv.drop(rid)
        self.lockstep.drop(rid)
        self.emit(ev.Removed(now, self.rank, rid,
                             tuple((h.wg, h.node, h.slot, h.signal) for h in held), leftovers))
        return [Send(f, 0, RemoveRequest(rid=rid, source="tp_leader")) for f in followers]

    # -- engine gates -------------------------------------------------------------------------

    def gate(self, node: str, walk: str, rid: str, st: WorkerGraphState) -> str:
        """Why the engine would not run `node` for `rid` now ("" when it would). Pure. Only the
        scenario's gated nodes (`Scenario.gated_nodes`: a scripted gate or a KV-cache label) can
        be held: the scheduler asks about no other node."""
        if node not in self._gated:
            return ""
        return self.nodes.gate(node, st) or self.kv.wait(node, rid)

    def held(self, node: str, walk: str, rid: str, st: WorkerGraphState) -> None:
        """The gate held `node` for `rid` while choosing work: when it waits for KV pages (and
        not for a scripted input), start their pull, as mstar's ``check_ready`` does."""
        if not self.nodes.gate(node, st):
            self.kv.start(node, rid)

    def gate_detail(self, node: str, walk: str, rid: str,
                    st: WorkerGraphState) -> tuple[str, tuple[str, ...]]:
        """For reports: why the engine holds `node` and which inputs it waits for."""
        why, waits = self.nodes.gate_detail(node, st)
        if why:
            return why, waits
        why = self.gate(node, walk, rid, st)
        if not why and self.lockstep.has_tp:
            why = self.lockstep.holdup(node, walk, rid, node in st.ready)
        return why, ()

    # -- batches ------------------------------------------------------------------------------

    def stream_ready(self) -> bool:
        """A StreamBuffer of this rank holds a chunk its next poll would hand over (or one it
        handed over and had refused): a poll finds work without any message. Pure."""
        if not self._streams:
            return False
        return any(buf.waiting is not None or buf.chunk_ready()
                   for req in self.runtime.requests.values() for buf in req.buffers.values())

    def _choose(self, now: float, poll: bool = True) -> Batch | None:
        batch = self._pick(now, poll)
        if batch is not None and self.lockstep.has_tp:
            self.lockstep.join(batch)
        return batch

    def _pick(self, now: float, poll: bool) -> Batch | None:
        if poll and self._streams:
            self._poll_streams(now)
        batch = self.speculation.take()
        if batch is not None:
            return batch
        lockstep = self.lockstep
        batch = lockstep.take() if lockstep.follow else None
        if batch is not None:
            return batch
        return self.schedule()

    def schedule(self) -> Batch | None:
        """The scheduler's next batch of this rank's own ready work (skipping what a TP follower
        runs only in its leader's batches, and the (node, walk) a speculation yielded away
        from); a TP leader tells its followers (SCHEDULE_TP)."""
        lockstep, spec = self.lockstep, self.speculation
        exclude, spec.exclude = spec.exclude, None
        teardown = self.teardown
        batch = self.scheduler.next_batch(self.runtime,
                                          teardown.pending | teardown.drained if teardown.drained
                                          else teardown.pending,
                                          skip=lockstep.follower_here if lockstep.has_tp else None,
                                          exclude=exclude)
        if batch is not None:
            lockstep.streak = 0
            spec.steps = 0
            if lockstep.has_tp:
                self.kv.outbox.extend(lockstep.lead(batch))
        return batch

    def _start(self, batch: Batch, now: float, duration: float) -> None:
        self.emit(ev.BatchStarted(now, self.rank, batch.node, batch.walk, tuple(batch.rids),
                                  batch.number, duration))
        label = self.nodes.kv_label(batch.node) if batch.node in self._gated else None
        if label is not None:
            for rid in batch.rids:
                if rid in self.runtime.requests:
                    rec = self.records[rid]
                    known = rec.kv_known.get(label)
                    if known is None or known[0] == self.rank:
                        continue  # the pages were written here: nothing to pull
                    have = rec.kv_local.get(label, 0)
                    self.emit(ev.KvUsed(now, self.rank, rid, batch.node, batch.walk, label, have, known[1]))
        self.busy = True
        self.in_flight = set(batch.rids)
        batch.start = now
        if batch.instance and not self.policy.choose_first:
            # every rank of the instance has met (under mstar 0.2.1's loop the batch starts at
            # its submit, before the collective: it is met when it finishes)
            self.lockstep.meeting = None

    def _finish(self, batch: Batch, now: float) -> list[Send]:
        if batch.instance and self.lockstep.meeting is batch:
            self.lockstep.meeting = None  # met, and run (`_start`)
        if batch.speculative:
            for rid in batch.rids:
                st = self.runtime.state_of(rid, batch.walk, batch.node)
                if st is not None:
                    st.unmark_speculative(batch.node)
        self.speculation.plan(batch, now)
        sends = self._postprocess(batch, now)
        self.busy = False
        self.in_flight = set()
        pending = self.teardown.pending
        if pending:
            for rid in sorted(pending):
                sends.extend(self._remove(rid, now))
            pending.clear()
        drains = self.teardown.drains
        if drains:
            for rid in sorted(drains):
                sends.extend(self._drain(rid))
            drains.clear()
        sends.extend(self._outbox())
        return sends

    # -- streams ------------------------------------------------------------------------------

    def _poll_streams(self, now: float) -> None:
        runtime = self.runtime
        for rid, req in runtime.requests.items():
            if not req.buffers:
                continue
            for edge, buf in req.buffers.items():
                chunk = buf.waiting
                if chunk is None:
                    if not buf.chunk_ready():
                        continue
                    self._chunk_seq += 1
                    chunk = buf.pop(self._chunk_seq)
                    self.emit(ev.ChunkPopped(now, self.rank, rid, edge, chunk.index, chunk.start,
                                             tuple(s.seq for s in chunk.items), chunk.final,
                                             buf.policy.spec.kind))
                _, outcome = runtime.offer_chunk(rid, chunk)
                buf.waiting = chunk if outcome is REJECTED else None

    # -- postprocess --------------------------------------------------------------------------

    def _check_stop(self, rid: str, node: str, walk: str, st: WorkerGraphState) -> list[str]:
        """The fake node's ``check_stop``: which dynamic loops this forward ends."""
        out = []
        lp = st.spec.nodes[node].loop
        while lp is not None:
            if lp.dynamic and (lp.stop_by is None or node in lp.stop_by):
                n = self._stop_count(rid, walk, lp.name)
                if n is not None and st.loops[lp.name].curr_iter + 1 >= n:
                    out.append(lp.name)
            lp = lp.parent
        return out

    def _stop_count(self, rid: str, walk: str, loop: str) -> int | None:
        rec = self.records.get(rid)
        kind = self.scenario.requests.get(rec.kind if rec is not None else "")
        dist = kind.stops.get(loop) if kind is not None else None
        if dist is None:
            return None
        req = self.runtime.requests[rid]
        part = self.runtime.partition_of[walk]
        return draw_stop(self.seed, rid, part, req.current[part][1], loop, dist)

    def _postprocess(self, batch: Batch, now: float) -> list[Send]:
        emit = self.emit
        rank = self.rank
        runtime = self.runtime
        requests = runtime.requests
        complete = runtime.complete
        completions = self._completions
        node, walk, number, start = batch.node, batch.walk, batch.number, batch.start
        spec = self.speculation
        stops_before, spec.pending_stops = spec.pending_stops, set()
        sends: list[Send] = []
        label = self.nodes.kv_label(node) if node in self._gated else None
        # Only a speculative batch (its overshoot) and a node that may stop a dynamic loop read
        # the request's state before it completes.
        dynamic = node in self._dynamic_nodes
        reads_state = batch.speculative or dynamic
        for rid in batch.rids:
            if rid not in requests:
                continue
            if reads_state:
                st = runtime.state_of(rid, walk, node)
                if (batch.speculative and batch.new_iter and stops_before
                        and spec.stopped(stops_before, rid, st.spec.nodes[node].loop.name)):
                    # The loop stopped in the previous batch: this speculative forward overshot.
                    st.clear_current(node)
                    emit(ev.Overshoot(now, rank, rid, walk, node, st.counter(node)))
                    continue
                stops = self._check_stop(rid, node, walk, st) if dynamic else None
                if stops:
                    sends.extend(self._stop(rid, walk, node, stops, now))
            c = complete(rid, node, walk)
            completions.append(c)
            if label is not None:
                rec = self.records[rid]
                known = rec.kv_known.get(label, (rank, 0))[1]
                rec.kv_local[label] = max(rec.kv_local.get(label, 0), known) + self.nodes.tokens(node, walk)
            finished, wgs = c.finished_loops, c.completed_wgs
            emit(ev.Forward(now, rank, rid, walk, node, c.pass_no, c.counter, c.wg, number, start,
                            c.loop_context, tuple(c.routes),
                            in_order(c.filtered) if c.filtered else (),
                            tuple(finished) if finished else (), tuple(wgs) if wgs else ()))
        # mstar sends per request: INPUT_SIGNALS to peers, emits, streams, then the report.
        route = self.reports.route
        for c in completions:
            route(c, label, now, sends)
        return sends

    def _stop(self, rid: str, walk: str, node: str, stops: list[str], now: float) -> list[Send]:
        """This forward's ``check_stop`` ended `stops`: register them here, and STOP_LOOPS to
        every peer with a copy of them (with every stop time this rank knows, under
        ``Semantics.stop_times``)."""
        runtime = self.runtime
        req = runtime.requests[rid]
        part = runtime.partition_of[walk]
        peers = runtime.stop_loops(rid, walk, stops, node)
        self.speculation.pending_stops.update((rid, loop) for loop in stops)
        for loop in stops:
            self.emit(ev.LoopStopped(now, self.rank, rid, part, loop, "self", self.rank))
        if not peers:
            return []
        msg = StopLoops(rid=rid, partition=part, loops=stops, src=self.rank,
                        pass_no=req.current[part][1],
                        times=(runtime.stop_times_of(rid, walk) or {}) if self._stop_times else None)
        return [Send(p, 0, msg) for p in peers]


__all__ = ["WorkerLoop"]
