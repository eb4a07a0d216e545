"""`StackWorker`: one rank's real mstar ``Worker``, stepped by a restatement of its main loop.

``Worker.run()`` (worker.py:2608-3139) cannot be called: it starts executor threads, blocks on
the GPU future and polls ZMQ. `StackWorker.main` restates its loop body once, calling the same
real methods in the same order, over the driver's `drive.worker.WorkerPort`; each block names
the lines it restates (mstar-ai 0.2.1), and `pins` holds a hash of those lines so an upgrade that
changes them fails a test. The blocking points become waits in the driver's time:

* ``pending.future.result()`` (2922): the batch's forward takes the scenario's service time
  (`port.duration`), after the collective of its TP instance when it has one (`port.collective`:
  every rank of the instance starts it together, as NCCL holds them);
* ``gpu_executor.submit(self._execute_on_gpu_thread, ...)`` (3013, 3114): the real
  ``_execute_on_gpu_thread`` runs at submit, without a thread; its outputs are handed over when
  the forward's time is up;
* ``wait_for_work(10)`` (3089): the rank idles until a message arrives (`port.idle`).

Left out, and why: the start-up barrier and the TP-async agreement check (collectives over
``torch.distributed``; one process here), ``gc.freeze`` (it would freeze the harness's objects),
the plan executor (``MSTAR_PRE_PLAN_SPEC``: the fake engine cannot pre-plan, so its answer is
the same), TP async scheduling (``MSTAR_TP_ASYNC_SCHED``, off by default: refused if on).

What the real objects do is turned into our trace events (`simharness.events`) by wrappers set
on the worker's own instances (a method looked up on the instance first): a forward and what
its completion routed where (``mark_node_complete`` and ``process_node_outputs``), what an
ingest refused, the loops stopped, a request's removal and what it left in its slots, messages
parked for a request already removed. Every routed edge is tagged with the `Signal` that names
it in the trace, and the tag travels with the edge's pickle to the ranks it goes to, so a slot's
content is named by where it came from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

from mstar.worker.worker import PendingBatch, Speculation

from simharness import events as ev
from simharness.drive.worker import IdleWait
from simharness.mstar.convert import CARRIES, EMIT_TO_CLIENT, EMPTY_DESTINATION
from simharness.mstar.stack.build import Stack
from simharness.mstar.stack.mechanisms import FREED_TENSOR, NO_STREAM_BUFFER, SHIFTED_TP_RANK
from simharness.runtime.effects import Effects
from simharness.runtime.protocol import MSTAR_0_2_1, StallPosition
from simharness.runtime.scheduler import Batch
from simharness.signals import ORIGIN_LOOP_OUTPUT, ORIGIN_NODE, Signal

#: how long after the first message of a burst an idle worker reads its socket
#: (`LoopPolicy.wake_us`): long enough for the rest of the burst to arrive on our links, short
#: beside any forward
WAKE_S = MSTAR_0_2_1.wake_us * 1e-6
#: ``wait_for_work(10)`` (worker.py:3089): an idle worker looks again after 10 ms
IDLE_POLL_S = MSTAR_0_2_1.idle_poll_ms * 1e-3
#: what a rank does with the messages parked for a request it already removed (mstar's
#: ``_unprocessed_messages``, never replayed): the drain check reports them
PARKED_FOR_EVER = ("arrived after the request was removed on this rank; parked in unprocessed "
                   "messages forever")


class StackWorker:
    """A `protocol.WorkerDoor` and `drive.worker.OwnMainLoop` over one real mstar ``Worker``
    (None for a rank the placement gives no worker graph: mstar starts no worker there)."""

    def __init__(self, stack: Stack, rank: int, worker: Any) -> None:
        self.stack = stack
        self.rank = rank
        self.w = worker
        self.busy = False
        #: wait_for_work(10), as the model's worker main waits it
        self._idle = IdleWait(IDLE_POLL_S, WAKE_S)
        self._events: list[Any] = []
        self.emit = self._events.append
        self.port: Any = None
        # run()'s locals (worker.py:2723-2731, 2771-2774)
        self.pending: PendingBatch | None = None
        self.max_consecutive_spec = int(os.environ.get("MSTAR_MAX_CONSECUTIVE_SPEC_STEPS", "1024"))
        self.spec_peek_for_fairness = os.environ.get("MSTAR_SPEC_PEEK_FOR_FAIRNESS", "1") == "1"
        self.consecutive_spec_steps = 0
        self.yield_away_from_target: tuple[str, str] | None = None
        #: our record of each batch in flight, and its duration, by its future's id: for the
        #: port (its collective and forward time) and the trace
        self._batches = 0
        self._tp_counts: dict[tuple[str, tuple[int, ...]], int] = {}
        self._running: dict[int, tuple[Batch, float]] = {}
        #: the batch being postprocessed (its number and start go into each Forward)
        self._post: Batch | None = None
        #: (rid, node) -> what its completion said, until its outputs are routed
        self._completion: dict[tuple[str, str], tuple[Any, ...]] = {}
        #: (rid, node) completed in the batch being postprocessed
        self._completed: set[tuple[str, str]] = set()
        self._seq = 0
        #: requests removed on this rank (a later message for one is parked for ever)
        self._removed: set[str] = set()
        self._parked_seen: dict[str, int] = {}
        self._watched_loops: set[int] = set()
        #: loops that finished on the completion being recorded
        self._finished: list[str] = []
        if worker is not None:
            if worker.tp_async_sched:
                raise RuntimeError("the mstar stack does not restate TP async scheduling "
                                   "(MSTAR_TP_ASYNC_SCHED); unset it")
            self._hook()

    # -- the WorkerDoor questions ---------------------------------------------------------------

    def handle_stimulus(self, stimulus: Any, now: float) -> Effects:
        raise TypeError("the mstar stack's worker runs its own main loop (main), not the door")

    def requests_left(self) -> tuple[str, ...]:
        if self.w is None:
            return ()
        return tuple(self.w.worker_graphs_manager.per_request_info)

    def unprocessed_pairs(self) -> list[tuple[str, str]]:
        if self.w is None:
            return []
        return [(rid, m.message_type.value) for rid, msgs in self.w._unprocessed_messages.items()
                for m in msgs if rid in self._removed]

    def blocked(self, rid: str, position: StallPosition) -> list[ev.BlockedNode]:
        if self.w is None:
            return []
        wgm = self.w.worker_graphs_manager
        if rid not in wgm.per_request_info:
            return []
        current = set(position.walks)
        pending = {wg for wg, _ in position.pending}
        ours = self.stack.wg_ours
        out: list[ev.BlockedNode] = []
        for wg_id, queue in wgm.queues.items():
            io = queue.per_request_queues.get(rid)
            if io is None or not (queue.graph_walks & current):
                continue
            ready = io.wg_state_registry.ready_names
            rows = []
            for name, node in io.nodes.items():
                cur = node.ready_signals.ready_inputs
                nxt = node.ready_next_iter.ready_inputs
                missing = tuple(sorted(i for i in node.input_names if i not in cur))
                rows.append(ev.BlockedNode(
                    self.rank, ours[wg_id], name, _counter(io, name),
                    tuple(self._signal_of(e, name) for e in cur.values()),
                    tuple(self._signal_of(e, name) for e in nxt.values()),
                    missing, "", (), name in ready))
            interesting = [b for b in rows if b.held or b.held_next or b.queued]
            if not interesting and ours[wg_id] in pending:
                interesting = rows
            out.extend(interesting)
        return out

    # -- the main loop: Worker.run() restated (worker.py:2608-3139) --------------------------------

    def main(self, port: Any) -> Iterator[Any]:
        self.port = port
        w = self.w
        if w is None:  # no worker here: nothing ever arrives for it
            while not port.stopped:
                port.receive(lambda msgs: None)
                yield port.idle()
            return
        while not port.stopped:
            port.receive(self._arrived)
            self._enter()
            ctx = self._first_half()
            self._flush()
            pending = self.pending
            if pending is not None:
                # 2898-2925: the TP-async follower wait (2906-2915) is not restated (TP async is
                # refused); outputs = pending.future.result() (2922) waits for the forward.
                batch, duration = self._running[id(pending.future)]
                if batch.instance:
                    yield port.collective(batch)
                yield port.execute(batch, duration)
                if port.stopped:
                    return
                self._enter()
                _deliver_result(pending)
            idle = self._after_await(ctx)
            self._flush()
            if idle and not self._arrivals(port):
                # wait_for_work(10) (3089) returns at once for what already arrived (messages
                # that came while the forward ran); only with none does the rank wait. Woken by
                # a message, it reads its socket a moment later: messages sent in one burst (the
                # conductor's NEW_REQUEST per partition) are read together, not the first alone
                # with the rest left until after the forward it then starts.
                # Its 10 ms bound where a StreamBuffer holds a chunk: `IdleWait`.
                yield from self._idle.wait(port, self._stream_ready)

    def _stream_ready(self) -> bool:
        """A StreamBuffer of this worker would hand a chunk (or a held edge) to the next poll."""
        for info in self.w.worker_graphs_manager.per_request_info.values():
            for buf in info.stream_buffers.values():
                if buf.has_chunk_ready() or buf._waiting_graph_edges:
                    return True
        return False

    def _arrived(self, msgs: list[Any]) -> None:
        self._idle.heard()
        for m in msgs:
            self.stack.deliver(m)

    def _arrivals(self, port: Any) -> bool:
        """Take what arrived; whether anything waits in the worker's inbox now."""
        port.receive(self._arrived)
        return bool(self.w.communicator.inbox)

    def _enter(self) -> None:
        self.stack.enter(self.port.now())

    def _flush(self) -> None:
        events = self._events[:]
        self._events.clear()
        sends = self.stack.take_sends(self.rank)
        if events or sends:
            self.port.apply(Effects(sends, events))

    def _first_half(self) -> dict[str, Any]:
        """One iteration of run()'s while-loop up to the GPU wait: 2778-2896."""
        w = self.w
        ctx: dict[str, Any] = {"batch": None, "spec_pending": None, "speculation": None}
        try:
            # 2778-2809: the preamble
            w._apply_pending_removes_safe_to_drop(w._in_flight_rids)
            w._fail_requests(w.scheduler.take_admit_errors())
            w._apply_pending_drains(w._in_flight_rids)
            w._process_messages()
            self._note_parked()
            w._check_ready_tensors()
            w._poll_stream_buffers()
            # 2811-2883: speculate N+1 while N runs, or yield away to other ready work
            speculation = None
            self.yield_away_from_target = None
            pending = self.pending
            if pending is not None and w._can_speculate(pending.batch):
                must_yield_for_fairness = (
                    self.spec_peek_for_fairness and self.consecutive_spec_steps >= 1
                    and w.scheduler.has_ready_excluding(
                        w.worker_graphs_manager, (pending.node_name, pending.graph_walk)))
                must_yield_away = (self.consecutive_spec_steps >= self.max_consecutive_spec
                                   or must_yield_for_fairness)
                if not must_yield_away:
                    speculation = w._try_speculate_next(pending)
                    if speculation is not None:
                        speculation.tp_seq = w.maybe_send_zmq_to_tp_followers(
                            speculation.node_batch, speculative=True, spec_from_seq=pending.tp_seq)
                if w._tp_lead_needs_marker(pending, speculation):
                    w._broadcast_tp_nospec(pending)
                if speculation is None:
                    self.yield_away_from_target = (
                        (pending.node_name, pending.graph_walk) if must_yield_away else None)
                    batch = w.scheduler.get_next_batch(
                        w.worker_graphs_manager, exclude_target=self.yield_away_from_target)
                    ctx["batch"] = batch
                    if batch is not None:
                        node_batch = w._build_executing_batch(batch)
                        part = w.worker_graphs_manager.get_partition_for_node(batch.node_name)
                        speculation = Speculation(
                            scheduled_batch=batch, node_batch=node_batch, consumed_edges=set(),
                            continuing_rids=set(), partition=part, is_new_iter=False,
                            is_same_node=False, is_yield_away=True)
                        ya_seq = w.maybe_send_zmq_to_tp_followers(node_batch)
                        speculation.tp_seq = ya_seq if ya_seq >= 0 else batch.tp_seq
            # 2885-2896 _arm_speculation only hands the batch to the plan executor, which is
            # not run (the fake engine cannot pre-plan: plan_future stays None).
            ctx["speculation"] = speculation
        except Exception as exc:  # 3128-3139
            self._main_loop_error(exc, ctx)
        return ctx

    def _after_await(self, ctx: dict[str, Any]) -> bool:
        """The rest of the iteration: 2926-3127. True when the rank then waits for work."""
        w = self.w
        speculation = ctx["speculation"]
        try:
            pending = self.pending
            spec_pending = None
            if pending is not None:
                outputs = pending.future.result()  # 2922 (done: the forward's time is up)
                for node in pending.batch.node_objects.values():  # 2930-2931
                    node._speculatively_scheduled = False

                def maybe_clear_spec() -> None:  # 2933-2963 (plan_future is always None here)
                    nonlocal speculation
                    if speculation is None:
                        return
                    if not speculation.is_yield_away:
                        for rid, edges in speculation.consumed_streaming_edges.items():
                            for edge in edges:
                                w._return_speculative_streaming_edge(rid, edge)
                        sb = speculation.scheduled_batch
                        for rid, node in sb.node_objects.items():
                            if rid in speculation.continuing_rids:
                                continue
                            wg_id = sb.request_to_worker_graph.get(rid)
                            if wg_id is not None:
                                w.worker_graphs_manager.queues[wg_id].push_back_node(rid, node)
                    speculation = None

                if pending.node_batch.admit_error is not None:  # 2965-2977
                    w._handle_admit_failure(pending.batch, pending.node_batch)
                    for node in pending.batch.node_objects.values():
                        node._speculatively_scheduled = False
                    maybe_clear_spec()
                if pending.node_batch.failed_requests:  # 2979-2989
                    maybe_clear_spec()
                    failed = dict(pending.node_batch.failed_requests)
                    w._drop_failed_rids(pending, outputs, failed)
                    w._fail_requests(failed)
                if speculation is not None:  # 2991-3047
                    spec_batch = speculation.scheduled_batch
                    spec_node_batch = speculation.node_batch
                    if not speculation.is_yield_away:
                        w._thread_outputs_to_speculative(speculation, outputs)
                    for node in spec_batch.node_objects.values():
                        node._speculatively_scheduled = True
                    if spec_batch.node_objects:
                        spec_future = self._submit(spec_batch, spec_node_batch, speculative=True)
                        spec_pending = PendingBatch(
                            batch=spec_batch, node_batch=spec_node_batch,
                            node_name=spec_batch.node_name, partition=speculation.partition,
                            graph_walk=spec_batch.graph_walk, future=spec_future,
                            speculative_new_iter=speculation.is_new_iter,
                            loop_name=speculation.loop_name, tp_seq=speculation.tp_seq)
                    ctx["spec_pending"] = spec_pending
                if pending.node_batch.admit_error is None:  # 3049-3055
                    self._postprocess(pending, outputs)
                in_flight = set(spec_pending.batch.node_objects.keys()) if spec_pending else set()
                w._apply_pending_removes_safe_to_drop(in_flight)  # 3057-3062
                w._apply_pending_drains(in_flight)
                self._set_pending(None)
            if spec_pending is not None:  # 3064-3074: continue with the speculation in flight
                if speculation.is_yield_away:
                    self.consecutive_spec_steps = 0
                else:
                    self.consecutive_spec_steps += 1
                self._set_pending(spec_pending)
                return False
            self.consecutive_spec_steps = 0  # 3075
            # 3077-3090: the non-speculative path
            batch = None
            if self.yield_away_from_target is not None:
                batch = w.scheduler.get_next_batch(
                    w.worker_graphs_manager, exclude_target=self.yield_away_from_target)
            if batch is None:
                batch = w.scheduler.get_next_batch(w.worker_graphs_manager)
            ctx["batch"] = batch
            if batch is None:
                return True  # wait_for_work(10)
            # 3092-3126
            node_batch = w._build_executing_batch(batch)
            part = w.worker_graphs_manager.get_partition_for_node(batch.node_name)
            for request_id, req_info in node_batch.per_request_info.items():
                req_info.dynamic_loop_iter_counts.update(
                    w.worker_graphs_manager.get_dynamic_loop_iters(request_id, partition=part))
            broadcast_seq = w.maybe_send_zmq_to_tp_followers(node_batch)
            fallthrough_tp_seq = broadcast_seq if broadcast_seq >= 0 else batch.tp_seq
            future = self._submit(batch, node_batch, speculative=False)
            pending = PendingBatch(
                batch=batch, node_batch=node_batch, node_name=batch.node_name, partition=part,
                graph_walk=batch.graph_walk, future=future, tp_seq=fallthrough_tp_seq)
            self._set_pending(pending)
            return False
        except Exception as exc:
            self._main_loop_error(exc, ctx)
            return False

    def _set_pending(self, p: PendingBatch | None) -> None:
        """run()'s nested ``_set_pending`` (2733-2736)."""
        if self.pending is not None and p is not self.pending:
            self._running.pop(id(self.pending.future), None)
        self.pending = p
        self.busy = p is not None
        if p is not None:
            self._idle.heard()
        self.w._in_flight_rids = set(p.batch.node_objects.keys()) if p else set()

    def _main_loop_error(self, exc: Exception, ctx: dict[str, Any]) -> None:
        """3128-3139 (the 10 ms back-off sleep is not waited: the loop goes on at once)."""
        w = self.w
        self.emit(ev.Dropped(self.stack.now, self.rank, "", "main_loop_error",
                             f"the worker's main loop raised {type(exc).__name__}: {exc}"
                             f"{_what_failed(exc)}", ()))
        # mstar's handler waits for the GPU step in flight to finish (2560-2568): here its result
        # is handed over at once, as it would be once the step is done
        for stale in (self.pending, ctx.get("spec_pending")):
            if stale is not None and not stale.future.done():
                _deliver_result(stale)
        w._handle_main_loop_error(exc, (self.pending, ctx.get("spec_pending")), ctx.get("batch"))
        if self.pending is not None and w._is_tp_follow_pending(self.pending):
            w._close_tp_follow_step(self.pending)
        self._set_pending(None)
        self.consecutive_spec_steps = 0

    # -- the GPU: gpu_executor.submit(self._execute_on_gpu_thread, ...) ----------------------------

    def _submit(self, batch: Any, node_batch: Any, speculative: bool) -> Future:
        """Run the real GPU step now; its outputs come out when the forward's time is up."""
        w = self.w
        now = self.stack.now
        self._batches += 1
        rids = list(node_batch.request_ids)
        instance: tuple[int, ...] = ()
        number = 0
        if batch.node_name in w.parallel_nodes:
            # the node's whole lockstep instance, the TP x SP block (``JointGroups``): its TP
            # all-reduce and its SP all-to-all hold every rank of it together
            groups = w.parallel_groups
            tp = [_rank_of(m) for m in groups.get_tp_config_for_node(batch.node_name).group_members]
            sp = [_rank_of(m) for m in groups.get_sp_config_for_node(batch.node_name).group_members]
            instance = tuple(sorted({s + t - self.rank for s in sp or [self.rank]
                                     for t in tp or [self.rank]}))
            key = (batch.node_name, instance)
            number = self._tp_counts.get(key, 0)
            self._tp_counts[key] = number + 1
        rec = Batch(batch.node_name, batch.graph_walk, rids, self._batches, start=now,
                    speculative=speculative, instance=instance, tp_number=number)
        duration = self.port.duration(rec)
        self.emit(ev.BatchStarted(now, self.rank, rec.node, rec.walk, tuple(rids), rec.number,
                                  duration))
        fut: Future = Future()
        try:
            fut.outputs = w._execute_on_gpu_thread(batch, node_batch, None)  # type: ignore[attr-defined]
        except Exception as exc:  # the future would hold it; .result() raises it (2922)
            fut.error = exc  # type: ignore[attr-defined]
        self._running[id(fut)] = (rec, duration)
        return fut

    # -- postprocess, and what it did ---------------------------------------------------------------

    def _postprocess(self, pending: PendingBatch, outputs: Any) -> None:
        got = self._running.get(id(pending.future))
        rec = got[0] if got is not None else None
        self._post = rec
        self._completed = set()
        try:
            self.w._postprocess_batch(pending, outputs)
        finally:
            self._post = None
        if rec is None:
            return
        io_of = self._io_of
        for rid in rec.rids:
            if (rid, rec.node) not in self._completed:
                # its request's loop had stopped: the speculative forward overshot, discarded
                io = io_of(rid, rec.node)
                self.emit(ev.Overshoot(self.stack.now, self.rank, rid, rec.walk, rec.node,
                                       _counter(io, rec.node) if io is not None else None))

    def _io_of(self, rid: str, node: str) -> Any:
        wgm = self.w.worker_graphs_manager
        for queue in wgm.queues.values():
            io = queue.per_request_queues.get(rid)
            if io is not None and node in io.nodes:
                return io
        return None

    def _hook(self) -> None:
        w = self.w
        wgm = w.worker_graphs_manager
        for name in ("mark_node_complete", "process_node_outputs", "process_new_inputs",
                     "stop_loops", "remove_request"):
            original = getattr(wgm, name)
            setattr(wgm, name, getattr(self, f"_on_{name}")(original))
        w._add_new_request = self._on_add_new_request(w._add_new_request)
        self._bufferless = self._streams_without_a_buffer()
        if self._bufferless:
            w._process_new_inputs = self._on_worker_new_inputs(w._process_new_inputs)

    def _streams_without_a_buffer(self) -> frozenset[tuple[str, str]]:
        """(producer partition, consumer partition) of each stream a node on this rank reads
        that mstar made no StreamBuffer for: it finds a partition's consumers by its walks'
        section names (worker.py:377-389, 406-418), which for a walk made of a loop is the
        loop's name, not a node's."""
        w = self.w
        topology = w.partition_topology
        if topology is None:
            return frozenset()
        wgm = w.worker_graphs_manager
        here = {n for wg in wgm.queues for n in wgm.all_worker_graph_ids_to_nodes.get(wg, ())}
        model = self.stack.model
        walks = model.get_graph_walk_graphs()
        partitions = {p.name: p for p in model.get_partitions()}
        out = set()
        for conn in topology.connections:
            if any(c is conn for c in w._my_consumer_connections):
                continue
            readers = (node for walk in sorted(partitions[conn.to_partition].graph_walks)
                       for node in walks[walk].get_nodes().values())
            if any(n.name in here and conn.edge_name in n.input_names for n in readers):
                out.add((conn.from_partition, conn.to_partition))
        return frozenset(out)

    def _on_worker_new_inputs(self, original: Any) -> Any:
        def process_new_inputs(body: Any) -> Any:
            # mstar marks only the request's StreamBuffers done (worker.py:629-636): with none
            # for this stream the end of it is lost, and its consumer waits for good
            for producer in sorted(body.producer_done or ()):
                if (producer, body.partition_name) in self._bufferless:
                    self.emit(ev.Dropped(
                        self.stack.now, self.rank, body.request_id, "producer_done",
                        f"the end of the stream from partition {producer} went nowhere: "
                        f"{NO_STREAM_BUFFER}", ()))
            return original(body)

        return process_new_inputs

    def _on_add_new_request(self, original: Any) -> Any:
        wgm = self.w.worker_graphs_manager

        def add_new_request(body: Any) -> Any:
            out = original(body)
            # the request's StreamBuffers exist now, before any item can reach them
            info = wgm.per_request_info.get(body.request_id)
            for edge, sbuf in (info.stream_buffers.items() if info is not None else ()):
                if "_sh_ids" not in vars(sbuf):
                    self._watch_buffer(sbuf, edge, body.request_id)
            return out

        return add_new_request

    def _watch_buffer(self, sbuf: Any, edge: str, rid: str) -> None:
        """Follow one StreamBuffer: the order its items were registered in (its positions), and
        each chunk it pops (`ChunkPopped`, with the items by their producer's sequence number)."""
        ids: list[str] = []
        sbuf._sh_ids = ids
        register, pop = sbuf.pre_read_register, sbuf.pop_chunk
        stack = self.stack
        policy = next((c.policy.kind for c in stack.scenario.connections if c.edge == edge), "")

        def pre_read_register(tensor_id: str) -> Any:
            ids.append(tensor_id)
            return register(tensor_id)

        def pop_chunk() -> Any:
            chunk = pop()
            data = chunk.data.get("data")
            n = 0 if data is None else (int(data.shape[0]) if data.dim() > 1 else 1)
            items = tuple(stack.stream_items.get(ids[p], -1) if p < len(ids) else -1
                          for p in range(chunk.start_offset, chunk.start_offset + n))
            self.emit(ev.ChunkPopped(stack.now, self.rank, rid, edge, chunk.chunk_index,
                                     chunk.start_offset, items, bool(chunk.is_final), policy))
            return chunk

        sbuf.pre_read_register = pre_read_register
        sbuf.pop_chunk = pop_chunk

    def _watch_loops(self, io: Any) -> None:
        """Record when a loop's ``complete_iter`` finishes it rather than advancing it (an
        advance adds one; a finish keeps ``curr_iter``, or an enclosing finish resets it)."""
        for lp in io.loops.values():
            if id(lp) in self._watched_loops:
                continue
            self._watched_loops.add(id(lp))
            real = lp.complete_iter
            finished = self._finished

            def complete_iter(lp: Any = lp, real: Any = real, finished: list[str] = finished) -> Any:
                before = lp.curr_iter
                out = real()
                if lp.curr_iter != before + 1:
                    finished.append(lp.name)
                return out

            lp.complete_iter = complete_iter

    def _on_mark_node_complete(self, original: Any) -> Any:
        wgm = self.w.worker_graphs_manager

        def mark_node_complete(request_id: str, worker_graph_id: str, node_name: str) -> Any:
            io = wgm.queues[worker_graph_id].per_request_queues[request_id]
            self._watch_loops(io)
            ctx = _loop_context(io, node_name)
            self._finished.clear()
            out = original(request_id, worker_graph_id, node_name)
            filtered = frozenset((n, d) for n, d in out.filtered_signals)
            self._completion[(request_id, node_name)] = (worker_graph_id, ctx, filtered,
                                                         tuple(self._finished))
            return out

        return mark_node_complete

    def _on_process_node_outputs(self, original: Any) -> Any:
        def process_node_outputs(request_id: str, node_name: str, outputs: list[Any],
                                 graph_walk: str) -> Any:
            routing = original(request_id, node_name=node_name, outputs=outputs,
                               graph_walk=graph_walk)
            done = self._completion.pop((request_id, node_name), None)
            if done is not None:
                self._forward(request_id, node_name, graph_walk, outputs, routing, done)
            return routing

        return process_node_outputs

    def _forward(self, rid: str, node: str, walk: str, outputs: list[Any], routing: Any,
                 done: tuple[Any, ...]) -> None:
        """The `Forward` event of one completion: what mstar routed where."""
        stack = self.stack
        wg_id, ctx, filtered, finished = done
        ours = stack.wg_ours
        part = self.w.worker_graphs_manager.get_partition_for_node(node) or ""
        pass_no = self._pass_of(rid, part)
        counter = ctx[0][1] if ctx else None
        declared = {e.name for e in outputs}
        loop_outputs = _loop_output_names(stack, walk, node)
        signals: dict[tuple[str, str], Signal] = {}
        routes: list[tuple[Signal, str]] = []

        def route(edge: Any, label: str) -> None:
            if edge.is_streaming and not edge.tensor_info:
                # an empty streaming edge (the request does not run the consumer's partition):
                # a no-op at the receiver, which our model does not count as routed
                return
            key = (edge.name, edge.next_node)
            sig = signals.get(key)
            if sig is None:
                self._seq += 1
                dest = _our_dest(edge.next_node)
                origin = ORIGIN_LOOP_OUTPUT if edge.name in loop_outputs else ORIGIN_NODE
                sig = signals[key] = Signal(
                    edge.name, dest, bool(edge.persist), bool(edge.conductor_new_token),
                    stack.scenario.payload_bytes(edge.name), node, self.rank, walk, pass_no,
                    counter, origin, self._seq, bool(edge.is_streaming))
            # the tag rides along with the edge's pickle to wherever it goes
            setattr(edge, CARRIES, sig)
            routes.append((sig, label))
            if edge.is_streaming:
                # a streamed item is known in its consumer's StreamBuffer by its tensor's id
                for info in edge.tensor_info or ():
                    stack.stream_items[info.uuid] = sig.seq

        layout_wg = stack.layout.wg_of
        for edge in routing.routed_to_this_worker_graph:
            route(edge, f"local:{layout_wg.get((walk, edge.next_node), '?')}")
        for edge in routing.persist:
            route(edge, "conductor")
        if routing.is_first_tp_rank:
            for edge in routing.emit_to_client:
                route(edge, "client")
        for worker, edges in sorted(routing.to_workers.items()):
            for edge in edges:
                route(edge, f"rank:{stack.endpoint(worker)}")
        # Every rank of a TP instance routes its streamed items, as `_send_outputs` does: mstar's
        # replicated fan-out (`ShardingConfig.compute_fanout`) has each rank keep its own copy
        # when it also consumes, and rank 0 send to the consumer ranks outside the instance.
        for edge in routing.streaming_local:
            route(edge, f"stream:{self.rank}")
        for worker, edges in sorted(routing.streaming_to_workers.items()):
            for edge in edges:
                route(edge, f"stream:{stack.endpoint(worker)}")
        del declared
        batch = self._post
        completed = tuple(ours[w] for w in routing.completed_worker_graph_ids)
        self._completed.add((rid, node))
        self.emit(ev.Forward(stack.now, self.rank, rid, walk, node, pass_no, counter, ours[wg_id],
                             batch.number if batch else 0, batch.start if batch else stack.now,
                             ctx, tuple(routes), tuple(sorted(filtered)), finished, completed))
        if completed:
            self.emit(ev.WorkerGraphsDone(stack.now, self.rank, rid, completed, pass_no))

    def _pass_of(self, rid: str, partition: str) -> int:
        """The partition's pass as this rank last heard of it (the step metadata the conductor
        stamps each pass with; mstar's own ``fwd_index`` lags a conductor-driven pass by one)."""
        wgm = self.w.worker_graphs_manager
        try:
            info = wgm.get_fwd_info(rid, partition)
        except (KeyError, AttributeError):
            return 0
        return int(info.step_metadata.get("pass", 0)) if info is not None else 0

    def _on_process_new_inputs(self, original: Any) -> Any:
        wgm = self.w.worker_graphs_manager

        def process_new_inputs(request_id: str, inputs: list[Any], can_buffer: bool = True) -> Any:
            left = original(request_id=request_id, inputs=inputs, can_buffer=can_buffer)
            if left:
                # mstar's callers drop what no worker graph took (worker.py 457-466, 679-684,
                # 881-887): said here, as our model says it
                info = wgm.per_request_info.get(request_id)
                walk = info.request_info.graph_walk if info is not None and hasattr(
                    info, "request_info") else ""
                self.emit(ev.Dropped(self.stack.now, self.rank, request_id, "input_signals",
                                     f"no worker graph of walk {walk!r} on this rank accepted it "
                                     f"(not a node here, or both slots full); dropped silently",
                                     tuple(self._signal_of(e, e.next_node) for e in left)))
            return left

        return process_new_inputs

    def _on_stop_loops(self, original: Any) -> Any:
        def stop_loops(request_id: str, partition: str, loop_names: Any, req_info: Any = None,
                       last_node_run: Any = None) -> Any:
            by = "self" if last_node_run is not None else "peer"
            for loop in sorted(loop_names):
                self.emit(ev.LoopStopped(self.stack.now, self.rank, request_id, partition, loop, by,
                                         self.rank if by == "self" else -1))
            return original(request_id, partition=partition, loop_names=loop_names,
                            req_info=req_info, last_node_run=last_node_run)

        return stop_loops

    def _on_remove_request(self, original: Any) -> Any:
        wgm = self.w.worker_graphs_manager

        def remove_request(request_id: str) -> Any:
            held = []
            leftovers: list[str] = []
            ours = self.stack.wg_ours
            for wg_id, queue in wgm.queues.items():
                io = queue.per_request_queues.get(request_id)
                if io is None:
                    continue
                for name, node in io.nodes.items():
                    for slot, table in (("current", node.ready_signals.ready_inputs),
                                        ("next", node.ready_next_iter.ready_inputs)):
                        for e in table.values():
                            held.append((ours[wg_id], name, slot, self._signal_of(e, name)))
                leftovers.extend(_leftovers(io, ours[wg_id]))
            info = wgm.per_request_info.get(request_id)
            for edge, buf in sorted((info.stream_buffers if info is not None else {}).items()):
                left = max(0, len(buf._buffer) - buf._consumed) + len(buf._tensor_ids_in_order)
                idle_tail = (getattr(buf.policy, "_continue_after_done", False) and buf.producer_done
                             and not left)
                if (left or buf._waiting_graph_edges) and not idle_tail:
                    # the words of the model's report (`RankRuntime.leftovers`)
                    leftovers.append(f"stream {edge!r} left {left} items "
                                     f"{'and a refused chunk ' if buf._waiting_graph_edges else ''}"
                                     f"in its buffer")
            out = original(request_id)
            self._removed.add(request_id)
            self.emit(ev.Removed(self.stack.now, self.rank, request_id, tuple(held),
                                 tuple(leftovers)))
            return out

        return remove_request

    def _note_parked(self) -> None:
        """A message for a request this rank already removed is parked for ever (mstar's
        ``_unprocessed_messages``); one for a request it does not know yet is replayed at its
        NEW_REQUEST and is no loss."""
        parked = self.w._unprocessed_messages
        for rid, msgs in parked.items():
            seen = self._parked_seen.get(rid, 0)
            if len(msgs) > seen and rid in self._removed:
                for m in msgs[seen:]:
                    edges = getattr(m.body, "inputs", None) or ()
                    self.emit(ev.Dropped(self.stack.now, self.rank, rid, m.message_type.value,
                                         PARKED_FOR_EVER,
                                         tuple(self._signal_of(e, e.next_node) for e in edges)))
        self._parked_seen = {rid: len(msgs) for rid, msgs in parked.items()}

    def _signal_of(self, edge: Any, dest: str) -> Signal:
        """The `Signal` an edge was tagged with where it was routed, or one made up from the
        edge (a walk-start input the conductor sent)."""
        sig = getattr(edge, CARRIES, None)
        if isinstance(sig, Signal):
            return sig
        return Signal(edge.name, _our_dest(dest), bool(edge.persist), False, 0, "conductor", -1, "",
                      0, None, "walk_start", 0)


# ---------------------------------------------------------------------------------------------
# reading mstar's per-request state


def _leftovers(io: Any, wg: str) -> list[str]:
    """What one worker graph of a request still holds besides signals when it is removed:
    loops not at rest and nodes still queued as ready, in the model's words."""
    out = []
    for name, lp in io.loops.items():
        if lp.curr_iter != 0 or lp.is_done or lp._finish_signal:
            state = "done" if lp.is_done else f"at counter {lp.curr_iter}"
            out.append(f"loop {name!r} in {wg} left {state}")
    for node in io.wg_state_registry.ready_names:
        out.append(f"{node} in {wg} still queued as ready")
    return out


def _rank_of(member: Any) -> int:
    """A comm group member as a global rank (``worker_3`` or 3)."""
    return int(member.split("_")[1]) if isinstance(member, str) else int(member)


def _what_failed(exc: BaseException) -> str:
    """What an error in mstar's code means, where we know: a ``KeyError`` out of
    ``TensorStore.get_tensor`` is a tensor read after mstar freed it; one in ``_send_outputs``
    or ``_process_new_inputs`` looking up ``stream_buffers`` is a stream item for a buffer the
    rank never created; an ``AssertionError`` out of ``ShardingConfig.compute_fanout`` saying a
    group has no TP rank is a worker whose Conductor gave it none."""
    if isinstance(exc, AssertionError) and "has no _tp_rank set" in str(exc):
        return f": {SHIFTED_TP_RANK}"
    if not isinstance(exc, KeyError):
        return ""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame
        tb = tb.tb_next
    if last is None:
        return ""
    if last.f_code.co_name == "get_tensor":
        return f": {FREED_TENSOR}"
    if "stream_buffers" in last.f_locals or last.f_code.co_name in (
            "_send_outputs", "_process_new_inputs", "_route_streaming_tensor"):
        return f": {NO_STREAM_BUFFER}"
    return ""


def _deliver_result(pending: PendingBatch) -> None:
    """The forward's time is up: what ``_execute_on_gpu_thread`` returned (or raised) becomes the
    future's result."""
    fut = pending.future
    error = getattr(fut, "error", None)
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(getattr(fut, "outputs", None))


def _loop_context(io: Any, node: str) -> tuple[tuple[str, int, int, bool], ...]:
    """(loop, curr_iter, max_iters, last) for each loop enclosing `node`, innermost first."""
    from simharness.mstar.package import graph_module

    g = graph_module()
    out = []
    reg = io.nodes[node]._managing_registry
    while isinstance(reg, g.LoopStateRegistry):
        lp = reg.loop
        out.append((lp.name, lp.curr_iter, lp.max_iters,
                    bool(lp._finish_signal) or lp.max_iters == lp.curr_iter + 1))
        reg = lp._managing_registry
    return tuple(out)


def _counter(io: Any, node: str) -> int | None:
    ctx = _loop_context(io, node)
    return ctx[0][1] if ctx else None


def _our_dest(dest: str) -> str:
    if dest == EMIT_TO_CLIENT:
        return "client"
    if dest == EMPTY_DESTINATION:
        return "conductor"
    return dest


def _loop_output_names(stack: Stack, walk: str, node: str) -> frozenset[str]:
    """Names a loop enclosing `node` declares as its outputs (routed when the loop ends)."""
    cache = stack.__dict__.setdefault("_loop_outputs", {})
    key = (walk, node)
    got = cache.get(key)
    if got is None:
        facts = stack.scenario.walk_facts[walk]
        got = cache[key] = frozenset(e.name for lp in facts.loops_of.get(node, ())
                                     for e in lp.outputs + lp.accumulated_outputs)
    return got


__all__ = ["StackWorker"]
