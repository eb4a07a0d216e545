"""Recording what mstar's Worker does around its graph objects, under the real stack.

`simharness.mstar.record` logs the calls into mstar's graph objects under ``mstar-graph``; a
finding whose mechanism lies in the Worker needs what the Worker itself did, so this module runs
a case under ``--runtime mstar`` (mstar-ai's own Conductor, Workers and StreamBuffers) and logs,
in the order the run made them:

* each StreamBuffer's life on each rank: made for a request (with its policy), an item registered
  in arrival order (``pre_read_register``), an item's tensor put, ``signal_done``, and every chunk
  popped (its index, offset, items by their producer's sequence number, and whether final: read
  off the ``ChunkPopped`` the stack records of it);
* each list of messages a Worker handled (``_process_message_list``): every message's type,
  request and source, whether the request was known there, and the requests of the GPU step in
  flight; and each ``_apply_pending_removes_safe_to_drop`` that applied a deferred REMOVE.

Patches are class attributes of mstar's ``StreamBuffer`` and ``Worker``, set for the run and put
back after it; nothing else changes, so the run's trace is the stack's own.
`simharness.mstar.worker_export` turns a recording into a standalone pytest module.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from simharness import events as ev
from simharness.checks import Violation
from simharness.checks.streams import streamed
from simharness.placement.layout import Layout
from simharness.scenario.model import Scenario

#: (rank, request, edge): one StreamBuffer
BufferKey = tuple[int, str, str]


@dataclass
class BufferCall:
    """One call into a StreamBuffer: `op` is ``make``, ``register``, ``put``, ``done`` or
    ``pop`` (``args`` of a pop: ``index``, ``start``, ``items``, ``final``)."""

    key: BufferKey
    op: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Message:
    """One message a Worker handled."""

    kind: str
    rid: str | None
    #: a REMOVE's or DRAIN's ``MessageSource`` (0 conductor, 1 TP rank 0, 2 self), else None
    source: int | None
    #: the request was in the Worker's ``per_request_info`` when the message was handled
    known: bool


@dataclass
class MessageCall:
    """One ``_process_message_list`` (``op`` ``messages``) or an applied deferred REMOVE
    (``op`` ``apply_pending``), on one rank."""

    rank: int
    op: str
    t: float
    in_flight: tuple[str, ...]
    messages: list[Message] = field(default_factory=list)


@dataclass
class StackRecording:
    """What one stack run did around the graph objects, and what its checks found."""

    scenario: Scenario
    layout: Layout
    buffers: list[BufferCall]
    messages: list[MessageCall]
    #: rank -> whether mstar made it a TP follower (``Worker.is_tp_follower``)
    followers: dict[int, bool]
    #: (rank, request) -> the request's sharding groups there: (tp_size, tp rank, workers)
    groups: dict[tuple[int, str], list[tuple[int, int | None, list[str]]]]
    #: (rank, request, edge) -> how many items the producer sent that rank's buffer
    sent: dict[BufferKey, int]
    #: rank -> the (request, message kind) it ends the run with parked for a removed request
    parked: dict[int, list[tuple[str, str]]]
    #: rank -> the requests it still holds state for at the end of the run
    left: dict[int, list[str]]
    violations: list[Violation]


class _Recorder:
    """The patches of one recording, and what they log."""

    def __init__(self) -> None:
        self.buffers: list[BufferCall] = []
        self.messages: list[MessageCall] = []
        self.followers: dict[int, bool] = {}
        self.groups: dict[tuple[int, str], list[tuple[int, int | None, list[str]]]] = {}
        #: id(StreamBuffer) -> its key, once the Worker that made it is known
        self.owner: dict[int, BufferKey] = {}
        self._depth = 0

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        from mstar.streaming.stream_buffer import StreamBuffer
        from mstar.worker.worker import Worker

        saved = [(StreamBuffer, n, StreamBuffer.__dict__[n]) for n in
                 ("pre_read_register", "put", "signal_done", "pop_chunk")]
        saved += [(Worker, n, Worker.__dict__[n]) for n in
                  ("_add_new_request", "_process_message_list", "_apply_pending_removes_safe_to_drop")]
        try:
            for cls, name, original in saved:
                setattr(cls, name, getattr(self, f"_{name.strip('_')}")(original))
            yield
        finally:
            for cls, name, original in saved:
                setattr(cls, name, original)

    def _log_buffer(self, sbuf: Any, op: str, **args: Any) -> None:
        key = self.owner.get(id(sbuf))
        if key is not None:
            self.buffers.append(BufferCall(key, op, args))

    # -- StreamBuffer ------------------------------------------------------------------------

    def _pre_read_register(self, original: Any) -> Any:
        def pre_read_register(sbuf: Any, tensor_id: str) -> Any:
            self._log_buffer(sbuf, "register", id=tensor_id, item=_item_of(tensor_id))
            return original(sbuf, tensor_id)
        return pre_read_register

    def _put(self, original: Any) -> Any:
        def put(sbuf: Any, tensor_id: str, item: Any) -> Any:
            self._log_buffer(sbuf, "put", id=tensor_id, item=_item_of(tensor_id))
            return original(sbuf, tensor_id, item)
        return put

    def _signal_done(self, original: Any) -> Any:
        def signal_done(sbuf: Any) -> Any:
            self._log_buffer(sbuf, "done")
            return original(sbuf)
        return signal_done

    def _pop_chunk(self, original: Any) -> Any:
        def pop_chunk(sbuf: Any) -> Any:
            chunk = original(sbuf)
            self._log_buffer(sbuf, "pop")  # what it held: `_fill_pops`, after the run
            return chunk
        return pop_chunk

    # -- Worker ------------------------------------------------------------------------------

    def _add_new_request(self, original: Any) -> Any:
        rec = self

        def _add_new_request(w: Any, body: Any) -> Any:
            rank = _rank(w)
            rec.followers[rank] = bool(w.is_tp_follower)
            # each buffer is logged as mstar's code makes it, before its replay of parked
            # messages can put anything in it
            known = set(w.worker_graphs_manager.per_request_info)
            with rec._making(w, body.request_id, rank, known):
                return original(w, body)

        return _add_new_request

    @contextlib.contextmanager
    def _making(self, w: Any, rid: str, rank: int, known: set[str]) -> Iterator[None]:
        """Log each StreamBuffer made inside (as its rank's), and a request new to the rank's
        sharding groups once it is added."""
        from mstar.streaming import stream_buffer as sb

        cls_init = sb.StreamBuffer.__init__

        def init(sbuf: Any, *args: Any, **kwargs: Any) -> None:
            cls_init(sbuf, *args, **kwargs)
            self.owner[id(sbuf)] = (rank, sbuf.request_id, sbuf.edge_name)
            self.buffers.append(BufferCall((rank, sbuf.request_id, sbuf.edge_name), "make",
                                           {"from": sbuf.from_partition}))

        sb.StreamBuffer.__init__ = init
        try:
            yield
        finally:
            sb.StreamBuffer.__init__ = cls_init
            info = w.worker_graphs_manager.per_request_info.get(rid)
            if info is not None and rid not in known:
                self.groups[(rank, rid)] = [
                    (g.tp_size, g._tp_rank, list(getattr(g, "_workers", ())))
                    for g in info.sharding_config.groups]

    def _process_message_list(self, original: Any) -> Any:
        rec = self

        def _process_message_list(w: Any, messages: list[Any]) -> Any:
            top = rec._depth == 0
            if top:
                known = w.worker_graphs_manager.per_request_info
                call = MessageCall(_rank(w), "messages", _now(), tuple(sorted(w._in_flight_rids)))
                for m in messages:
                    rid = getattr(m.body, "request_id", None)
                    source = getattr(m.body, "source", None)
                    call.messages.append(Message(m.message_type.name, rid,
                                                 None if source is None else int(source),
                                                 rid in known))
                rec.messages.append(call)
            rec._depth += 1
            try:
                return original(w, messages)
            finally:
                rec._depth -= 1

        return _process_message_list

    def _apply_pending_removes_safe_to_drop(self, original: Any) -> Any:
        rec = self

        def _apply_pending_removes_safe_to_drop(w: Any, in_flight_rids: set[str]) -> Any:
            if any(r not in in_flight_rids for r in w._pending_removes):
                rec.messages.append(MessageCall(_rank(w), "apply_pending", _now(),
                                                tuple(sorted(in_flight_rids))))
            return original(w, in_flight_rids)

        return _apply_pending_removes_safe_to_drop


def _rank(w: Any) -> int:
    return int(w.worker_id.split("_")[1])


def _now() -> float:
    from simharness.mstar.stack import seams

    stack = seams.active()
    return float(stack.now) if stack is not None else 0.0


def _item_of(tensor_id: str) -> int:
    """A streamed item's sequence number at its producer (-1 where the stack did not note it)."""
    from simharness.mstar.stack import seams

    stack = seams.active()
    return int(stack.stream_items.get(tensor_id, -1)) if stack is not None else -1


def _sent(events: list[Any]) -> dict[BufferKey, int]:
    """(rank, request, edge) -> the items a producer routed to that rank's stream buffer."""
    out: dict[BufferKey, int] = {}
    for e in events:
        if type(e) is ev.Forward:
            for sig, rank in streamed(e):
                out[(rank, e.rid, sig.name)] = out.get((rank, e.rid, sig.name), 0) + 1
    return out


def _fill_pops(buffers: list[BufferCall], events: list[Any]) -> None:
    """Each pop's chunk, from the stack's own record of it: the k-th ``ChunkPopped`` of a
    (rank, request, edge) is its k-th pop (the stack emits it inside the same call)."""
    popped: dict[BufferKey, list[Any]] = {}
    for e in events:
        if type(e) is ev.ChunkPopped:
            popped.setdefault((e.rank, e.rid, e.edge), []).append(e)
    taken: Counter[BufferKey] = Counter()
    for call in buffers:
        if call.op == "pop":
            e = popped[call.key][taken[call.key]]
            taken[call.key] += 1
            call.args = {"index": e.index, "start": e.start, "items": list(e.items),
                         "final": e.final}


def record_stack(scenario: Scenario) -> StackRecording:
    """Run `scenario` under the real stack and record what its Workers did (module docstring)."""
    from simharness.run import simulate

    rec = _Recorder()
    with rec.patched():
        result, violations = simulate(scenario, "mstar", keep_trace=True, digest=False)
    parked: dict[int, list[tuple[str, str]]] = {}
    left: dict[int, list[str]] = {}
    for e in result.events:
        if type(e).__name__ == "RunEnded":
            parked = {rank: [(rid, kind) for rid, kind in items] for rank, items in e.unprocessed}
            left = {rank: list(rids) for rank, rids in e.requests_left}
    _fill_pops(rec.buffers, result.events)
    return StackRecording(scenario, Layout.build(scenario), rec.buffers, rec.messages,
                          rec.followers, rec.groups, _sent(result.events), parked, left,
                          violations)


__all__ = ["BufferCall", "BufferKey", "Message", "MessageCall", "StackRecording", "record_stack"]
