"""Messages between the conductor, the ranks and the API server (mstar's IPC messages, reduced
to what routing needs), and `Send`, the one command the pure loops return to their driver.

msgspec Structs (one is built per send, in C; the zmq wire encodes them without a Python call),
built with keywords and compared by identity as the messages they stand for are. Endpoints are
ranks ``0..N-1``, `CONDUCTOR_ID` and `CLIENT_ID` (the API server). Each message class names its
mstar message kind in `kind_name`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec
from msgspec import field

from simharness.placement.layout import Assignment
from simharness.signals import Signal

CONDUCTOR_ID = -1
CLIENT_ID = -2

class Message(msgspec.Struct, eq=False, kw_only=True, gc=False):
    """Base of every message: built with keywords (a positional slip between two ints or two
    strings would otherwise pass silently), compared by identity.

    msgspec applies ``kw_only`` to the fields of the class that declares it, never to those of a
    subclass: every message class says ``kw_only=True`` itself (a unit test walks the subclasses
    and holds each one to it). Keywords cost nothing measurable here: msgspec matches them in C.

    Not tracked by the cyclic collector (``gc=False``, as signals and events): a message holds
    strings, numbers, signals, an assignment and plain containers of them, nothing that refers
    back to it, so it can be part of no reference cycle. Tracking cost every send an entry in
    the collector's lists."""


class Send(msgspec.Struct, eq=False, gc=False):
    """Deliver `msg` to endpoint `dst`; `nbytes` of payload travel with it. Untracked by the
    cyclic collector, as `Message` is, for the same reason.

    `src` is None for an ordinary send (from whoever returned it); a pull names the rank the
    bytes come from (a KV pull travels from the producer's rank to the puller).
    """

    dst: int
    nbytes: int
    msg: Any
    src: int | None = None

    def __repr__(self) -> str:
        return f"Send({self.dst}, {self.nbytes}, {type(self.msg).__name__})"


class NewRequest(Message, kw_only=True):
    """mstar NEW_REQUEST: state for the request on this rank, and its first inputs here.

    `current` gives each partition's first walk (every partition starts at once); `kind` names
    the request kind (its dynamic-loop stop counts are drawn from it); `kv` is the conductor's
    view of where each KV cache label's pages are.
    """

    kind_name: ClassVar[str] = "new_request"
    rid: str
    kind: str
    current: dict[str, tuple[str, int]]
    assignment: Assignment
    signals: list[Signal]
    kv: dict[str, tuple[int, int]] = field(default_factory=dict)


class InputSignals(Message, kw_only=True):
    """mstar INPUT_SIGNALS: edges for one request, stamped with the sender's walk and pass."""

    kind_name: ClassVar[str] = "input_signals"
    rid: str
    walk: str
    pass_no: int
    signals: list[Signal]
    src: int
    #: the conductor's KV view (label -> (rank, tokens)); None from a peer
    kv: dict[str, tuple[int, int]] | None = None
    #: a peer's known loop stop times for the partition (mstar's ``current_fwd_info``
    #: ``loop_stop_times``, which the receiver takes whole); None: none known
    stop_times: dict[str, tuple[int, ...]] | None = None


class RemoveRequest(Message, kw_only=True):
    """mstar REMOVE_REQUEST. A TP follower ignores the conductor's and waits for its leader's."""

    kind_name: ClassVar[str] = "remove_request"
    rid: str
    source: str = "conductor"


class DrainRequest(Message, kw_only=True):
    """mstar 0.2.1's DRAIN_REQUEST, the first phase of an aborted request's teardown
    (conductor.py:1009-1033): the rank stops the request's work and acknowledges; REMOVE follows
    once every rank has. A TP follower honours only its leader's copy, as for REMOVE."""

    kind_name: ClassVar[str] = "drain_request"
    rid: str
    source: str = "conductor"


class DrainDone(Message, kw_only=True):
    """A rank's acknowledgement of a `DrainRequest` (mstar's READS_DONE from a worker,
    worker.py:577-598)."""

    kind_name: ClassVar[str] = "drain_done"
    rid: str
    rank: int


class StopLoops(Message, kw_only=True):
    """mstar STOP_LOOPS: a peer's ``check_stop`` ended these loops of the request's partition."""

    kind_name: ClassVar[str] = "stop_loops"
    rid: str
    partition: str
    loops: list[str]
    src: int
    pass_no: int
    #: every loop stop time the sender knows for the partition (mstar sends its whole
    #: ``loop_stop_times``); None under semantics without stop times
    times: dict[str, tuple[int, ...]] | None = None


class ProducerDone(Message, kw_only=True):
    """The conductor's ``producer_done``: no more items will stream from `partition`."""

    kind_name: ClassVar[str] = "producer_done"
    rid: str
    partition: str


class ScheduleTp(Message, kw_only=True):
    """mstar SCHEDULE_TP: the instance leader's batch, which every follower runs in order."""

    kind_name: ClassVar[str] = "schedule_tp"
    node: str
    walk: str
    rids: list[str]
    number: int
    src: int

    @property
    def rid(self) -> str:
        """The batch's first request: what drivers file the message under."""
        return self.rids[0]


class KvPullDone(Message, kw_only=True):
    """A KV pull finished: `tokens` of `label` are now on the pulling rank."""

    kind_name: ClassVar[str] = "kv_pull_done"
    rid: str
    label: str
    tokens: int
    src: int


class WorkerGraphsDoneMsg(Message, kw_only=True):
    """mstar WORKER_GRAPHS_DONE, carrying what the rank buffered for the request since the last
    one: persist signals, emits, new tokens, and (rank 0 of an instance) KV sequence lengths."""

    kind_name: ClassVar[str] = "worker_graphs_done"
    rid: str
    rank: int
    wgs: list[str]
    persist: list[Signal]
    pass_no: int
    #: emits to the client since the last report (mstar's output_signal_names)
    emits: int
    partition_done: bool = False
    new_tokens: int = 0
    kv: dict[str, int] = field(default_factory=dict)
    tp_rank: int = 0


class ResultTensors(Message, kw_only=True):
    """mstar result_tensors: an emit to the client."""

    kind_name: ClassVar[str] = "result_tensors"
    rid: str
    rank: int
    signal: Signal


class RequestComplete(Message, kw_only=True):
    """mstar request_complete, conductor to API server, with how many emits to expect."""

    kind_name: ClassVar[str] = "request_complete"
    rid: str
    emits: int


class TensorReceived(Message, kw_only=True):
    """mstar TENSOR_RECEIVED: the reader of a rank's tensors (a peer rank, or the API server for
    an emit) acks them so the producer can free its buffers. The model has no buffers; under
    `LoopPolicy.acks` the message still travels, and wakes an idle rank as it does in mstar."""

    kind_name: ClassVar[str] = "tensor_received"
    rid: str


class ReadsDone(Message, kw_only=True):
    """mstar READS_DONE: the API server has read every output; teardown may proceed."""

    kind_name: ClassVar[str] = "reads_done"
    rid: str
