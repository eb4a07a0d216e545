"""`StackConductor` and `StackClient`: the real mstar ``Conductor`` and our API server around it.

The conductor endpoint hosts the real ``Conductor`` and the API's preprocess worker
(``api_server_preprocess_worker``, ours: it stores a request's input tensors, sends NEW_REQUEST,
answers the teardown messages as mstar's data worker does, data_worker.py:322-351, 524-549);
messages between those two stay in the endpoint. The client endpoint hosts the API server
(``api_server``, ours): it reads each output (acking it to its producer through mstar's tensor
manager), and once ``request_complete`` has come and every final output is in (the test of
data_worker.py:173-187) it sends READS_DONE, which lets the conductor send the hard REMOVE
(conductor.py:1070-1084, 879-907).

``Conductor.run()`` (conductor.py:1334-1408) cannot be called; `StackConductor._iteration`
restates its loop body (1345-1406) once, run whenever a message arrives for the endpoint, and
`startup` restates ``_wait_for_workers_ready`` (1314-1332) at time zero. The loop's 1 ms poll
is not waited (messages are handled as they arrive), nor are the expiry sweeps of its teardown
bookkeeping timed (``_sweep_expiry`` runs each iteration, on the virtual clock).

What the conductor does becomes our trace events through wrappers on its own instance: a
request admitted (``_do_ingest_request``), each pass done and the next started
(``_process_worker_graphs_done``, ``_process_done_forward``), producer_done sent, a request torn
down (``_finalize_draining``).
"""

from __future__ import annotations

import heapq
from typing import Any

import torch
from mstar.api_server.request_types import APIServerMessage
from mstar.utils.ipc_format import (
    AbortRequest,
    ConductorMessage,
    ConductorMessageType,
    NewRequestConductor,
    ReadsDone,
    SetupDone,
    WorkerMessageType,
)

from simharness import events as ev
from simharness.mstar.convert import CARRIES
from simharness.mstar.stack.build import API_PREPROCESS, API_SERVER, CONDUCTOR, Stack, worker_id
from simharness.runtime.effects import Abort, Alarm, Arrived, Effects, Submit
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID, Send
from simharness.runtime.protocol import StallPosition
from simharness.signals import Signal


class StackConductor:
    """A `protocol.ConductorDoor` over the real ``Conductor`` and our API preprocess worker."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.c = stack.conductor
        self._events: list[Any] = []
        self.emit = self._events.append
        self._ended: list[tuple[str, str]] = []
        self.timeout = stack.scenario.limits.request_timeout_s
        #: rid -> its request kind, for every request submitted and not ended, in order
        self._alive: dict[str, str] = {}
        self._deadlines: list[tuple[float, int, str]] = []
        self._n = 0
        #: rids the API gave up on: their teardown is the conductor's business, their end is said
        self._aborted: set[str] = set()
        #: rids a worker failed
        self._failed: set[str] = set()
        self.pre = stack.mailbox(API_PREPROCESS)
        self.pre_tm = stack.tensor_manager(API_PREPROCESS, self.pre)
        self._hook()

    # -- start-up: _wait_for_workers_ready (1314-1332), then setup_done (1339-1342) -------------

    def startup(self) -> None:
        """Every worker has reported SETUP_DONE (the stack's build ran their start); tell the
        API server, as the conductor does once it has heard from all of them."""
        c = self.c
        waiting = set(c.worker_ids)
        for message in c.communicator.get_all_new_messages():
            if message.message_type == ConductorMessageType.SETUP_DONE:
                waiting.discard(message.body.worker_id)
            else:
                c._startup_message_backlog.append(message)
        if waiting:
            raise RuntimeError(f"mstar workers never reported SETUP_DONE: {sorted(waiting)}")
        c.communicator.send(API_SERVER, APIServerMessage(message_type="setup_done"))
        # The API server waits for it before it takes requests; the workload here starts once
        # the stack is built, at time zero, so it is not sent on.
        self.stack.take_sends(CONDUCTOR_ID)

    # -- the door -------------------------------------------------------------------------------

    def handle_stimulus(self, stimulus: Any, now: float) -> Effects:
        self.stack.enter(now)
        t = type(stimulus)
        if t is Arrived:
            self.stack.deliver(stimulus.msg)
        elif t is Submit:
            self._submit(stimulus.rid, stimulus.kind, now)
        elif t is Abort:
            self._abort(stimulus.rid, stimulus.outcome, now)
        else:
            raise TypeError(f"a conductor takes Submit, Arrived or Abort, not {t.__name__}")
        sends = self._run()
        events = self._events[:]
        self._events.clear()
        ended, self._ended = self._ended, []
        return Effects(sends, events, ended)

    def _run(self) -> list[Send]:
        """Run the endpoint until nothing is left for it: the conductor's loop body and the
        preprocess worker's, each message between the two delivered at once."""
        out: list[Send] = []
        while True:
            self._iteration()
            self._preprocess()
            local: list[Send] = []
            for s in self.stack.take_sends(CONDUCTOR_ID):
                (local if s.dst == CONDUCTOR_ID else out).append(s)
            if not local:
                return out
            for s in local:
                self.stack.deliver(s.msg)

    def _iteration(self) -> None:
        """One pass of ``Conductor.run()``'s loop body (conductor.py:1345-1406)."""
        c = self.c
        try:
            done_partition_forwards: list[tuple[str, str, bool]] = []
            backlog = c._startup_message_backlog
            c._startup_message_backlog = []
            for message in backlog + c.communicator.get_all_new_messages():
                mt = message.message_type
                if mt == ConductorMessageType.NEW_REQUEST:
                    c._ingest_request(message.body)
                elif mt == ConductorMessageType.ABORT_REQUEST:
                    c._abort_request(message.body.request_id)
                elif mt == ConductorMessageType.FAIL_REQUESTS:
                    self._failed.update(message.body.errors)
                    c._fail_requests(message.body)
                elif mt == ConductorMessageType.READS_DONE:
                    c._handle_reads_done(message.body)
                elif mt == ConductorMessageType.WORKER_GRAPHS_DONE:
                    rid = message.body.request_id
                    if rid not in c.requests or rid in c.draining:
                        self._unexpected(message.body, "a report for a request the conductor has "
                                         "ended or is tearing down: dropped")
                        continue
                    self._note_unawaited(message.body)
                    for pname in c._process_worker_graphs_done(message.body):
                        done_partition_forwards.append((rid, pname, message.body.partition_done))
                else:
                    raise ValueError(f"Unknown message type: {mt}")
            completed_requests = []
            for rid, pname, p_done in done_partition_forwards:
                if rid not in c.requests or rid in c.draining:
                    continue
                if c._process_done_forward(rid, pname, partition_done_from_worker=p_done):
                    completed_requests.append(rid)
            for rid in dict.fromkeys(completed_requests):
                if rid in c.requests and rid not in c.draining:
                    c._process_request_done(rid)
            c._sweep_expiry()
        except Exception as exc:  # 1402-1403: logged, and the loop goes on
            self.emit(ev.Dropped(self.stack.now, CONDUCTOR_ID, "", "conductor_error",
                                 f"the conductor's main loop raised {type(exc).__name__}: {exc}", ()))

    def _note_unawaited(self, body: Any) -> None:
        """A report of a worker graph the partition's pass does not wait for (another walk's, or
        one every rank already reported: an extra pass). mstar counts it and goes on
        (conductor.py:1151-1157); our check names it, as the model's conductor does."""
        pstate = self.c.requests[body.request_id].partition_states.get(body.partition_name)
        if pstate is None:
            return
        extra = [wg for wg in body.worker_graph_ids
                 if wg not in pstate.current_worker_graph_ids or wg in pstate.completed_worker_graph_ids]
        if extra:
            self._unexpected(body, "worker graph is not awaited (not a worker graph of the current "
                             "walk, or already reported by every rank)", extra)

    def _unexpected(self, body: Any, reason: str, wgs: list[str] | None = None) -> None:
        ours = self.stack.wg_ours
        rank = _rank_of(body)
        for wg in body.worker_graph_ids if wgs is None else wgs:
            self.emit(ev.UnexpectedReport(self.stack.now, body.request_id, rank, ours.get(wg, wg),
                                          reason))

    # -- the API's preprocess worker (ours) ------------------------------------------------------

    def _submit(self, rid: str, kind_name: str, now: float) -> None:
        """A client's request: its input tensors stored and persisted, then NEW_REQUEST."""
        self.emit(ev.Submitted(now, rid, kind_name))
        self._n += 1
        self._alive[rid] = kind_name
        heapq.heappush(self._deadlines, (now + self.timeout, self._n, rid))
        kind = self.stack.scenario.requests[kind_name]
        tensors = {name: [torch.zeros(1, dtype=torch.int64)] for name in
                   dict.fromkeys([*kind.inputs, *(n for n, _ in kind.start_pairs)])}
        infos = self.pre_tm.store_and_return_tensor_info(rid, tensors) if tensors else {}
        for lst in infos.values():
            self.pre_tm.register_for_send(rid, lst)
            for info in lst:
                self.pre_tm.set_persist(rid, info.uuid, persist=True)
        self.pre.send(CONDUCTOR, ConductorMessage(
            message_type=ConductorMessageType.NEW_REQUEST,
            body=NewRequestConductor(request_id=rid, initial_signals=infos,
                                     initial_input_modalities=["text"],
                                     initial_output_modalities=["text"], input_metadata={},
                                     model_kwargs={"kind": kind_name})))

    def _preprocess(self) -> None:
        """The preprocess worker's handling of what reached it (data_worker.py:524-549)."""
        tm = self.pre_tm
        for msg in self.pre.get_all_new_messages():
            mt = msg.message_type
            body = msg.body
            if mt == WorkerMessageType.TENSOR_RECEIVED:
                for uuid, n in body.successful_tensors.items():
                    tm.dereference(body.request_id, uuid, n=n)
            elif mt == WorkerMessageType.UNPERSIST_TENSORS:
                for uuid, n in body.uuid_to_ref_count.items():
                    tm.increment_ref(body.request_id, uuid, n=n)
                    tm.set_persist(body.request_id, uuid, persist=False)
            elif mt == WorkerMessageType.DRAIN_REQUEST:
                self.pre.send(CONDUCTOR, ConductorMessage(
                    message_type=ConductorMessageType.READS_DONE,
                    body=ReadsDone(request_id=body.request_id, entity_id=API_PREPROCESS)))
            elif mt == WorkerMessageType.REMOVE_REQUEST:
                tm.force_cleanup_request(body.request_id)

    def _abort(self, rid: str, outcome: str, now: float) -> None:
        """The API gave up on a request (hung, timed out, ran away): its end is said now, as our
        model says it; the teardown is the conductor's (ABORT_REQUEST, then drain and REMOVE)."""
        if rid not in self._alive:
            return
        self._aborted.add(rid)
        self._end(rid, outcome, now)
        self.pre.send(CONDUCTOR, ConductorMessage(
            message_type=ConductorMessageType.ABORT_REQUEST,
            body=AbortRequest(request_id=rid)))

    def _end(self, rid: str, outcome: str, now: float) -> None:
        self._alive.pop(rid, None)
        req = self.c.requests.get(rid)
        step = 0
        if req is not None:
            step = sum(int(ps.metadata.kwargs.get("pass", 0)) for ps in req.partition_states.values())
        self.emit(ev.RequestEnded(now, rid, outcome, step))
        self._ended.append((rid, outcome))

    # -- the ConductorDoor questions ---------------------------------------------------------------

    def unfinished(self) -> list[str]:
        admitted = [r for r in self._alive if r in self.c.requests]
        return admitted + [r for r in self._alive if r not in self.c.requests]

    def open_requests(self) -> tuple[str, ...]:
        return tuple(self.c.requests)

    def waiting_requests(self) -> tuple[str, ...]:
        return tuple(b.request_id for b in self.c.waiting_queue)

    def stall_position(self, rid: str) -> StallPosition | None:
        req = self.c.requests.get(rid)
        if req is None:
            return None
        ours = self.stack.wg_ours
        endpoint = self.stack.endpoint
        wg_ranks = {wg: tuple(endpoint(w) for w in workers)
                    for wg, workers in req.worker_graph_to_workers.items()}
        walk = ""
        step = 0
        pending = []
        walks = []
        for ps in req.partition_states.values():
            step += int(ps.metadata.kwargs.get("pass", 0))
            if ps.is_done:
                continue
            walk = walk or ps.metadata.graph_walk
            walks.append(ps.metadata.graph_walk)
            for wg in sorted(ps.current_worker_graph_ids - ps.completed_worker_graph_ids):
                pending.append((ours[wg], wg_ranks.get(wg, ())))
        ranks = tuple(sorted({r for rs in wg_ranks.values() for r in rs}))
        return StallPosition(walk=walk, step=step, pending=tuple(pending), ranks=ranks,
                             walks=tuple(walks))

    def next_deadline(self) -> tuple[float, str] | None:
        while self._deadlines and self._deadlines[0][2] not in self._alive:
            heapq.heappop(self._deadlines)
        if not self._deadlines:
            return None
        t, _, rid = self._deadlines[0]
        return t, rid

    # -- what the conductor did, as trace events ----------------------------------------------------

    def _hook(self) -> None:
        c = self.c
        for name in ("_do_ingest_request", "_process_worker_graphs_done", "_process_done_forward",
                     "_send_producer_done", "_finalize_draining"):
            original = getattr(c, name)
            setattr(c, name, getattr(self, f"_on{name}")(original))

    def _on_do_ingest_request(self, original: Any) -> Any:
        def ingest(body: Any) -> Any:
            out = original(body)
            c = self.c
            req = c.requests.get(body.request_id)
            if req is None:
                return out
            stack = self.stack
            kind = (body.model_kwargs or {}).get("kind", "")
            placement = tuple(sorted(
                (stack.wg_ours[wg], tuple(sorted(stack.endpoint(w) for w in workers)))
                for wg, workers in req.worker_graph_to_workers.items()))
            walks = stack.scenario.requests[kind].walks if kind in stack.scenario.requests else ()
            self.emit(ev.Admitted(stack.now, body.request_id, kind, tuple(walks), placement))
            for ps in req.partition_states.values():
                if not ps.is_done:
                    self.emit(ev.WalkStarted(stack.now, body.request_id, ps.metadata.graph_walk,
                                             int(ps.metadata.kwargs.get("pass", 0))))
            return out

        return ingest

    def _on_process_worker_graphs_done(self, original: Any) -> Any:
        def done(body: Any) -> Any:
            passes = original(body)
            req = self.c.requests.get(body.request_id)
            for pname in passes:
                if req is None:
                    continue
                ps = req.partition_states[pname]
                self.emit(ev.PassDone(self.stack.now, body.request_id, ps.metadata.graph_walk,
                                      int(ps.metadata.kwargs.get("pass", 0))))
            return passes

        return done

    def _on_process_done_forward(self, original: Any) -> Any:
        def done_forward(request_id: str, partition_name: str,
                         partition_done_from_worker: bool = False) -> Any:
            req = self.c.requests[request_id]
            ps = req.partition_states[partition_name]
            was_done = ps.is_done
            all_done = original(request_id, partition_name,
                                partition_done_from_worker=partition_done_from_worker)
            ps = req.partition_states[partition_name]
            now = self.stack.now
            if ps.is_done and not was_done:
                if partition_done_from_worker:
                    reason = "final_chunk"
                elif ps.num_output_tokens >= req.max_output_tokens:
                    reason = "max_tokens"
                else:
                    reason = "walks_done"
                self.emit(ev.PartitionDone(now, request_id, partition_name, reason))
            elif not ps.is_done:
                self.emit(ev.WalkStarted(now, request_id, ps.metadata.graph_walk,
                                         int(ps.metadata.kwargs.get("pass", 0))))
            return all_done

        return done_forward

    def _on_send_producer_done(self, original: Any) -> Any:
        def producer_done(request_id: str, from_partition: str, to_partition: str) -> Any:
            before = len(self.stack._outbox.get(CONDUCTOR_ID, ()))
            out = original(request_id, from_partition, to_partition)
            sent = self.stack._outbox.get(CONDUCTOR_ID, [])[before:]
            ranks = tuple(sorted({s.dst for s in sent if s.dst >= 0}))
            self.emit(ev.ProducerDoneSent(self.stack.now, request_id, from_partition, ranks))
            return out

        return producer_done

    def _on_finalize_draining(self, original: Any) -> Any:
        def finalize(request_id: str) -> Any:
            known = request_id in self.c.draining
            out = original(request_id)
            if known and request_id not in self._aborted and request_id in self._alive:
                outcome = "failed" if request_id in self._failed else "completed"
                self._end(request_id, outcome, self.stack.now)
            return out

        return finalize


def _rank_of(body: Any) -> int:
    """The rank a worker-graphs-done report came from (its worker graphs' worker is not in the
    body: the report names only the request; -1 when unknown)."""
    return int(getattr(body, "worker_rank", -1))


#: how long the API server keeps a completed request waiting for its final outputs
#: (``_recently_completed_ttl``, api_server/entrypoint.py:206)
RECENTLY_COMPLETED_TTL_S = 15.0


class StackClient:
    """A `protocol.ClientDoor`: our API server over mstar's messages (see the module docstring)."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.box = stack.mailbox(API_SERVER)
        self.tm = stack.tensor_manager(API_SERVER, self.box)
        self._events: list[Any] = []
        #: rid -> output name -> the highest loop indices received
        self._max: dict[str, dict[str, Any]] = {}
        self._complete: dict[str, Any] = {}
        self._done: set[str] = set()
        self._given_up: set[str] = set()
        #: (when, rid) of the TTL timers set by this stimulus
        self._alarms: list[tuple[float, str]] = []

    def handle_stimulus(self, stimulus: Any, now: float) -> Effects:
        self.stack.enter(now)
        t = type(stimulus)
        if t is Arrived:
            self.stack.deliver(stimulus.msg)
            self._poll(now)
        elif t is Alarm:
            self._expire(stimulus.rid)
        elif t is Abort:
            self._given_up.add(stimulus.rid)
            self._complete.pop(stimulus.rid, None)
        else:
            raise TypeError(f"the API client takes Arrived, Alarm or Abort, not {t.__name__}")
        events = self._events[:]
        self._events.clear()
        alarms, self._alarms = self._alarms, []
        return Effects(self.stack.take_sends(CLIENT_ID), events, alarms=alarms)

    def _poll(self, now: float) -> None:
        for msg in self.box.get_all_new_messages():
            kind = msg.message_type
            body = msg.body
            if kind == "result_tensors":
                rid = body.request_id
                edge = body.graph_edge
                sig = getattr(edge, CARRIES, None)
                if isinstance(sig, Signal):
                    self._events.append(ev.Emitted(now, sig.src_rank, rid, sig))
                if rid in self._done or rid in self._given_up:
                    self.tm.ack_unread_tensors(rid, [edge])  # late: acked and dropped (145-149)
                    continue
                seen = self._max.setdefault(rid, {})
                seen[edge.name] = body.loop_indices.max(seen.get(edge.name))
                if edge.tensor_info:
                    self.tm.start_read_tensors(rid, [edge])
                    self.tm.get_ready_tensors()  # a synchronous read: acks TENSOR_RECEIVED now
                self._maybe_complete(rid)
            elif kind == "request_complete":
                self._complete[body.request_id] = body
                self._maybe_complete(body.request_id)
                if body.request_id in self._complete:
                    # entrypoint.py:314-320: a request still waiting for a final output is
                    # closed anyway once it has been complete for the TTL (15 s)
                    self._alarms.append((now + RECENTLY_COMPLETED_TTL_S, body.request_id))

    def _expire(self, rid: str) -> None:
        """The TTL ran out on a completed request whose final outputs never all came (or
        seemed not to: the per-name comparison across walks, data_worker.py:173-187): the API
        server gives up waiting and acknowledges anyway (finished_reading, drained=False)."""
        if rid not in self._complete or rid in self._done:
            return
        self._finish(rid)

    def _maybe_complete(self, rid: str) -> None:
        body = self._complete.get(rid)
        if body is None or rid in self._done:
            return
        got = self._max.get(rid, {})
        if not all(not idx.label_context_gt(got.get(name)) for name, idx in body.final_outputs.items()):
            return  # an output is still on its way (the real API server waits, then times out)
        self._finish(rid)

    def _finish(self, rid: str) -> None:
        self._done.add(rid)
        del self._complete[rid]
        self._max.pop(rid, None)
        self.box.send(CONDUCTOR, ConductorMessage(
            message_type=ConductorMessageType.READS_DONE,
            body=ReadsDone(request_id=rid, entity_id=API_PREPROCESS)))


def start_workers(stack: Stack) -> None:
    """Each worker's start (worker.py:2640, 2668-2676): warm its engine up, report SETUP_DONE."""
    for rank, w in sorted(stack.workers.items()):
        w.engine_manager.warmup_all()
        w.communicator.send(CONDUCTOR, ConductorMessage(
            message_type=ConductorMessageType.SETUP_DONE, body=SetupDone(worker_id=worker_id(rank))))
    for s in [s for rank in stack.workers for s in stack.take_sends(rank)]:
        stack.deliver(s.msg)


__all__ = ["StackClient", "StackConductor", "start_workers"]
