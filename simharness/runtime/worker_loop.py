"""One worker's main loop as a pure state machine: messages in, batches out, sends out.

Modelled on mstar's worker main loop (reference/mstar_semantics.md sections 4.1-4.5, 5.2, 6.1,
6.2). A driver (the simpy engine, or a real worker process) calls it in this order:

* `handle(msg, now)` for every message that arrived while the worker was busy;
* `take_batch(now)` to pick the next batch, then `start(batch, now, duration)` when it begins;
  `take_batch` also polls the StreamBuffers (at most one chunk per stream) and may start KV
  pulls, whose `Send`s wait in `outbox` (`pop_outbox`);
* `finish(batch, now)` when it has executed; it returns the `Send`s to carry out.

What the loop does, as mstar does it:

* **Batches**: round-robin over (node, walk) (`scheduler`), engine gates applied: scripted gates,
  and KV readiness (a KV-cache node on a rank that lacks the request's pages pulls them first).
* **TP instances**: the instance's rank 0 schedules a TP node and sends SCHEDULE_TP to the other
  ranks, which never schedule that node themselves: they run the leader's batches in order, each
  once the node is ready for every request in it, and after one such batch they let their own
  ready work go first. A follower ignores the conductor's REMOVE; its leader forwards it.
* **Speculation**: after a batch of an async single-node self-loop, the next iteration is
  scheduled before the batch is postprocessed (unless other work is waiting after one such
  step). A dynamic stop found in that postprocess comes too late for the speculative batch:
  it runs (the overshoot) and its result is discarded.
* **Dynamic stops**: after a batch, each request's ``check_stop`` (the fake node's stop rule)
  runs before the completion, so the iteration that triggered the stop is the last one; the
  loop's other copies on other ranks get STOP_LOOPS.
* **Teardown**: removal of a request in flight is deferred; messages for a request this rank
  does not know yet are replayed at its NEW_REQUEST; messages for one it removed are parked for
  ever (mstar's ``_unprocessed_messages``, a leak the drain check reports).

Nothing here reads a clock: `now` comes from the driver.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from simharness import events as ev
from simharness.rng import draw_stop
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.graph_state import REJECTED, GraphState
from simharness.runtime.messages import (
    CLIENT_ID,
    CONDUCTOR_ID,
    InputSignals,
    KvPullDone,
    NewRequest,
    ProducerDone,
    RemoveRequest,
    ResultTensors,
    ScheduleTp,
    Send,
    StopLoops,
    WorkerGraphsDoneMsg,
)
from simharness.runtime.protocol import LoopPolicy
from simharness.runtime.rank import Completion, RankRuntime
from simharness.runtime.scheduler import Batch, MicroScheduler
from simharness.runtime.signals import Signal
from simharness.runtime.streams import ChunkSignal


class WorkerLoop:
    def __init__(
        self,
        rank: int,
        runtime: RankRuntime,
        nodes: FakeNodes,
        policy: LoopPolicy,
        emit: Callable[[Any], None],
        seed: int = 0,
    ) -> None:
        self.rank = rank
        self.runtime = runtime
        self.nodes = nodes
        self.emit = emit
        self.seed = seed
        self.scenario = runtime.layout.scenario
        self.scheduler = MicroScheduler(nodes.max_batch, self._gate, policy.batching)
        self.busy = False
        self.in_flight: set[str] = set()
        self.pending_removes: set[str] = set()
        self.removed: set[str] = set()
        #: rid -> request kind (for its stop counts)
        self.kinds: dict[str, str] = {}
        #: rid -> messages that arrived before the request's NEW_REQUEST
        self.early: dict[str, list[Any]] = {}
        #: rid -> kinds of messages that arrived after the request was removed here
        self.unprocessed: dict[str, list[str]] = {}
        #: rid -> persist signals buffered until the next worker-graphs-done report
        self.persist_buffer: dict[str, list[Signal]] = {}
        #: rid -> client emits / new tokens made since the last worker-graphs-done report
        self.emit_count: dict[str, int] = {}
        self.token_count: dict[str, int] = {}
        #: rid -> partitions whose pass consumed a final chunk since the last report
        self.partition_done: dict[str, set[str]] = {}
        #: sends produced outside `handle`/`finish` (KV pulls started by a gate)
        self.outbox: list[Send] = []
        #: called with every `Completion` as the batch finishes (a real rank files its output
        #: tensors by it); None when nobody listens
        self.on_complete: Callable[[Completion], None] | None = None
        # speculation (mstar "async scheduling")
        self._spec: Batch | None = None
        self._spec_steps = 0
        self._exclude: tuple[str, str] | None = None
        #: rids whose dynamic loop stopped in the last postprocess (mstar ``_pending_loop_stops``)
        self.pending_stops: set[str] = set()
        # lockstep instances
        self.follow: deque[ScheduleTp] = deque()
        self._follow_streak = 0
        # KV cache: rid -> label -> tokens held here / (rank, tokens) the conductor last reported
        self.kv_local: dict[str, dict[str, int]] = {}
        self.kv_known: dict[str, dict[str, tuple[int, int]]] = {}
        self.kv_pulling: set[tuple[str, str]] = set()
        self._chunk_seq = 0
        # Fast paths: most layouts have no TP instance, no gated node and no stream here.
        self._has_tp = any(len(inst) > 1 for wg in runtime.layout.worker_graphs for inst in wg.instances)
        self._gated = {n for n, f in self.scenario.nodes.items() if f.script or f.kv_label}
        #: nodes inside a dynamic loop (their check_stop may end it)
        self._dynamic_nodes = {n for wf in self.scenario.walk_facts.values()
                               for n, loops in wf.loops_of.items() if any(lp.stop for lp in loops)}

    # -- messages -----------------------------------------------------------------------------

    def handle(self, msg: Any, now: float) -> list[Send]:
        if isinstance(msg, ScheduleTp):
            self.follow.append(msg)
            return []
        rid = msg.rid
        if isinstance(msg, NewRequest):
            self.kinds[rid] = msg.kind
            first_walk, first_pass = next(iter(msg.current.values()))
            self.runtime.admit(rid, first_walk, first_pass, msg.assignment,
                               partitions=frozenset(msg.current))
            for walk, pass_no in msg.current.values():
                self.runtime.set_walk(rid, walk, pass_no)
            self._learn_kv(rid, msg.kv)
            by_walk: dict[str, list[Signal]] = {}
            for s in msg.signals:
                by_walk.setdefault(s.walk, []).append(s)
            for walk, sigs in by_walk.items():
                self._ingest(rid, walk, msg.current[self.runtime.partition_of[walk]][1], sigs,
                             CONDUCTOR_ID, now)
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
            if msg.kv is not None:
                self._learn_kv(rid, msg.kv)
            self._ingest(rid, msg.walk, msg.pass_no, msg.signals, msg.src, now)
        elif isinstance(msg, StopLoops):
            for loop in self.runtime.peer_stop(rid, msg.partition, msg.loops):
                self.emit(ev.LoopStopped(now, self.rank, rid, msg.partition, loop, "peer", msg.src))
        elif isinstance(msg, ProducerDone):
            for buf in self.runtime.requests[rid].buffers.values():
                if buf.src_partition == msg.partition:
                    buf.producer_done = True
        elif isinstance(msg, KvPullDone):
            local = self.kv_local.setdefault(rid, {})
            local[msg.label] = max(local.get(msg.label, 0), msg.tokens)
            self.kv_pulling.discard((rid, msg.label))
            self.emit(ev.KvPulled(now, self.rank, rid, msg.label, msg.src, msg.tokens))
        elif isinstance(msg, RemoveRequest):
            if msg.source == "conductor" and self._follows(rid):
                return []  # a TP follower waits for its leader's copy
            if rid in self.in_flight:
                self.pending_removes.add(rid)
            else:
                return self._remove(rid, now)
        return []

    def _follows(self, rid: str) -> bool:
        req = self.runtime.requests[rid]
        return any(len(r) > 1 and r[0] != self.rank and self.rank in r
                   for r in req.assignment.wg_ranks.values())

    def _followers(self, rid: str) -> list[int]:
        req = self.runtime.requests[rid]
        return sorted({x for r in req.assignment.wg_ranks.values() if len(r) > 1 and r[0] == self.rank
                       for x in r[1:]})

    def _learn_kv(self, rid: str, kv: dict[str, tuple[int, int]]) -> None:
        if kv:
            self.kv_known.setdefault(rid, {}).update(kv)

    def unprocessed_pairs(self) -> list[tuple[str, str]]:
        """(request, message kind) of every message parked unprocessed, in arrival order."""
        return [(rid, kind) for rid, kinds in self.unprocessed.items() for kind in kinds]

    def _park_unprocessed(self, msg: Any, now: float) -> None:
        self.unprocessed.setdefault(msg.rid, []).append(msg.kind_name)
        self.emit(ev.Dropped(
            now, self.rank, msg.rid, msg.kind_name,
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

    def _remove(self, rid: str, now: float) -> list[Send]:
        runtime = self.runtime
        if rid not in runtime.requests:
            return []
        followers = self._followers(rid)
        leftovers = tuple(runtime.leftovers(rid))
        held = runtime.remove(rid)
        self.scheduler.drop(rid)
        self.removed.add(rid)
        for d in (self.persist_buffer, self.emit_count, self.token_count, self.partition_done,
                  self.kv_local, self.kv_known, self.kinds):
            d.pop(rid, None)
        self.kv_pulling = {k for k in self.kv_pulling if k[0] != rid}
        self.follow = deque(m for m in self.follow if rid not in m.rids)
        self.emit(ev.Removed(now, self.rank, rid,
                             tuple((h.wg, h.node, h.slot, h.signal) for h in held), leftovers))
        return [Send(f, 0, RemoveRequest(rid, "tp_leader")) for f in followers]

    # -- engine gates -------------------------------------------------------------------------

    def gate_detail(self, node: str, walk: str, rid: str, st: GraphState) -> tuple[str, tuple[str, ...]]:
        """For reports: why the engine holds `node` and which inputs it waits for; no side effects."""
        why, waits = self.nodes.gate_detail(node, st)
        if why:
            return why, waits
        return self._gate(node, walk, rid, st, start_pull=False), ()

    def _gate(self, node: str, walk: str, rid: str, st: GraphState, start_pull: bool = True) -> str:
        """Why the engine would not run `node` for `rid` now ("" when it would)."""
        if node not in self._gated:
            return ""
        why = self.nodes.gate(node, st)
        if why:
            return why
        label = self.nodes.kv_label(node)
        if label is None:
            return ""
        known = self.kv_known.get(rid, {}).get(label)
        if known is None:
            return ""
        src, tokens = known
        have = self.kv_local.get(rid, {}).get(label, 0)
        if src == self.rank or have >= tokens:
            return ""
        if start_pull and (rid, label) not in self.kv_pulling:
            # mstar's check_ready starts the pull and reports not ready until it completes.
            self.kv_pulling.add((rid, label))
            nbytes = (tokens - have) * self.scenario.kv.bytes_per_token
            self.outbox.append(Send(self.rank, nbytes, KvPullDone(rid, label, tokens, src), src=src))
        return f"waits for its KV pull of {tokens - have} tokens ({label}) from rank {src}"

    def _follower_here(self, node: str, walk: str, rid: str) -> bool:
        ranks = self.runtime.instance_of(rid, walk, node)
        return len(ranks) > 1 and ranks[0] != self.rank

    # -- batches ------------------------------------------------------------------------------

    def pop_outbox(self) -> list[Send]:
        out, self.outbox = self.outbox, []
        return out

    def take_batch(self, now: float) -> Batch | None:
        self._poll_streams(now)
        if self._spec is not None:
            batch, self._spec = self._spec, None
            return batch
        batch = self._take_follower_batch()
        if batch is not None:
            return batch
        exclude, self._exclude = self._exclude, None
        batch = self.scheduler.next_batch(self.runtime, self.pending_removes,
                                          skip=self._follower_here if self._has_tp else None,
                                          exclude=exclude)
        if batch is not None:
            self._follow_streak = 0
            self._spec_steps = 0
            followers = self._tp_followers_of(batch) if self._has_tp else ()
            if followers:
                msg = ScheduleTp(batch.node, batch.walk, list(batch.rids), batch.number, self.rank)
                self.outbox.extend(Send(f, 0, msg) for f in followers)
                batch.instance = (self.rank, *followers)
                batch.tp_number = batch.number
        return batch

    def _tp_followers_of(self, batch: Batch) -> list[int]:
        ranks = self.runtime.instance_of(batch.rids[0], batch.walk, batch.node)
        return list(ranks[1:]) if len(ranks) > 1 and ranks[0] == self.rank else []

    def _take_follower_batch(self) -> Batch | None:
        if not self.follow:
            return None
        head = self.follow[0]
        if self._follow_streak >= 1 and any(not self._follower_here(n, w, r)
                                            for n, w, r, _ in self.runtime.ready_work()):
            self._follow_streak = 0
            return None  # after one follower batch, own ready work goes first
        states = []
        for rid in head.rids:
            st = self.runtime.state_of(rid, head.walk, head.node)
            if st is None or head.node not in st.ready or self._gate(head.node, head.walk, rid, st):
                return None  # all or none
            states.append(st)
        for st in states:
            st.pop_ready(head.node)
        self.follow.popleft()
        self._follow_streak += 1
        batch = self.scheduler.follower_batch(head.node, head.walk, list(head.rids))
        batch.instance = self.runtime.instance_of(head.rids[0], head.walk, head.node)
        batch.tp_number = head.number
        return batch

    def start(self, batch: Batch, now: float, duration: float) -> None:
        self.emit(ev.BatchStarted(now, self.rank, batch.node, batch.walk, tuple(batch.rids),
                                  batch.number, duration))
        label = self.nodes.kv_label(batch.node) if batch.node in self._gated else None
        for rid in batch.rids if label is not None else ():
            if rid in self.runtime.requests:
                known = self.kv_known.get(rid, {}).get(label)
                if known is None or known[0] == self.rank:
                    continue  # the pages were written here: nothing to pull
                have = self.kv_local.get(rid, {}).get(label, 0)
                self.emit(ev.KvUsed(now, self.rank, rid, batch.node, batch.walk, label, have, known[1]))
        self.busy = True
        self.in_flight = set(batch.rids)
        batch.start = now

    def finish(self, batch: Batch, now: float) -> list[Send]:
        if batch.speculative:
            for rid in batch.rids:
                st = self.runtime.state_of(rid, batch.walk, batch.node)
                if st is not None:
                    st.scheduled.discard(batch.node)
        self._plan_speculation(batch, now)
        sends = self._postprocess(batch, now)
        self.busy = False
        self.in_flight = set()
        if self.pending_removes:
            for rid in sorted(self.pending_removes):
                sends.extend(self._remove(rid, now))
            self.pending_removes.clear()
        sends.extend(self.pop_outbox())
        return sends

    # -- speculation --------------------------------------------------------------------------

    def _plan_speculation(self, batch: Batch, now: float) -> None:
        """Build the next iteration's batch before postprocessing this one (mstar 4.5)."""
        node, walk = batch.node, batch.walk
        runtime = self.runtime
        first = runtime.state_of(batch.rids[0], walk, node) if batch.rids else None
        if first is None or node not in first.spec.spec_nodes:
            return
        if self._has_tp and len(runtime.instance_of(batch.rids[0], walk, node)) > 1:
            return  # TP nodes never speculate
        others = any(not (n == node and w == walk) for n, w, _, _ in runtime.ready_work())
        if self._spec_steps >= 1 and others:
            self._spec_steps = 0
            self._exclude = (node, walk)  # yield away: another batch runs first
            return
        rids = []
        for rid in batch.rids:
            st = runtime.state_of(rid, walk, node)
            if st is None or rid in self.pending_removes or rid in self.pending_stops:
                continue
            lp = st.loops[st.spec.nodes[node].loop.name]
            if lp.finish or lp.curr_iter + 1 >= lp.spec.max_iters:
                continue
            rids.append(rid)
        for n, w, rid, st in list(runtime.ready_work()):
            if n == node and w == walk and rid not in rids and rid not in self.pending_removes \
                    and not self._gate(n, w, rid, st):
                st.pop_ready(n)
                rids.append(rid)
        if not rids:
            return
        for rid in rids:
            st = runtime.state_of(rid, walk, node)
            if st is not None:
                st.scheduled.add(node)
        self._spec = self.scheduler.speculative_batch(node, walk, rids)
        self._spec_steps += 1

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

    def _check_stop(self, rid: str, node: str, walk: str, st: GraphState) -> list[str]:
        """The fake node's ``check_stop``: which dynamic loops this forward ends."""
        out = []
        ns = st.spec.nodes[node]
        lp = ns.loop
        while lp is not None:
            if lp.dynamic and (lp.stop_by is None or node in lp.stop_by):
                n = self._stop_count(rid, walk, lp.name)
                if n is not None and st.loops[lp.name].curr_iter + 1 >= n:
                    out.append(lp.name)
            lp = lp.parent
        return out

    def _stop_count(self, rid: str, walk: str, loop: str) -> int | None:
        kind = self.scenario.requests.get(self.kinds.get(rid, ""))
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
        completions = []
        node, walk, number, start = batch.node, batch.walk, batch.number, batch.start
        stops_before, self.pending_stops = self.pending_stops, set()
        sends: list[Send] = []
        label = self.nodes.kv_label(node) if node in self._gated else None
        dynamic = self._dynamic_nodes
        for rid in batch.rids:
            if rid not in runtime.requests:
                continue
            st = runtime.state_of(rid, walk, node)
            if batch.speculative and rid in stops_before:
                # The loop stopped in the previous batch: this speculative forward overshot.
                st.clear_current(node)
                emit(ev.Overshoot(now, rank, rid, walk, node, st.counter(node)))
                continue
            stops = self._check_stop(rid, node, walk, st) if node in dynamic else None
            if stops:
                req = runtime.requests[rid]
                part = runtime.partition_of[walk]
                peers = runtime.stop_loops(rid, walk, stops)
                self.pending_stops.add(rid)
                for loop in stops:
                    emit(ev.LoopStopped(now, rank, rid, part, loop, "self", rank))
                if peers:
                    msg = StopLoops(rid, part, stops, rank, req.current[part][1])
                    sends.extend(Send(p, 0, msg) for p in peers)
            c = runtime.complete(rid, node, walk)
            completions.append(c)
            if label is not None:
                local = self.kv_local.setdefault(rid, {})
                known = self.kv_known.get(rid, {}).get(label, (rank, 0))[1]
                local[label] = max(local.get(label, 0), known) + self.nodes.tokens(node, walk)
            emit(ev.Forward(now, rank, rid, walk, node, c.pass_no, c.counter, c.wg, number, start,
                            c.loop_context, tuple(c.routes), tuple(sorted(c.filtered)) if c.filtered else (),
                            tuple(c.finished_loops), tuple(c.completed_wgs)))
            if self.on_complete is not None:
                self.on_complete(c)
        # mstar sends per request: INPUT_SIGNALS to peers, emits, streams, then the report.
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
            if c.new_tokens and c.tp_rank == 0:
                self.token_count[c.rid] = self.token_count.get(c.rid, 0) + c.new_tokens
            if c.stream_local:
                runtime.deliver(c.rid, c.walk, c.pass_no, c.stream_local)
            if c.partition_done:
                self.partition_done.setdefault(c.rid, set()).add(c.partition)
            if c.completed_wgs:
                persist = self.persist_buffer.pop(c.rid, [])
                emits = self.emit_count.pop(c.rid, 0)
                tokens = self.token_count.pop(c.rid, 0)
                done_parts = self.partition_done.pop(c.rid, set())
                kv = {}
                if label is not None and c.tp_rank == 0:
                    kv = {label: self.kv_local.get(c.rid, {}).get(label, 0)}
                emit(ev.WorkerGraphsDone(now, rank, c.rid, tuple(c.completed_wgs), c.pass_no))
                sends.append(Send(CONDUCTOR_ID, 0, WorkerGraphsDoneMsg(
                    c.rid, rank, list(c.completed_wgs), persist, c.pass_no, emits,
                    c.partition in done_parts, tokens, kv, c.tp_rank)))
                if done_parts - {c.partition}:
                    self.partition_done[c.rid] = done_parts - {c.partition}
        return sends


__all__ = ["ChunkSignal", "WorkerLoop", "draw_stop"]
