"""Messages between the conductor, the ranks and the API server (mstar's IPC messages, reduced
to what routing needs), and `Send`, the one command the pure loops return to their driver.

Slotted classes rather than dataclasses: one is built per send. Endpoints are ranks ``0..N-1``,
`CONDUCTOR_ID` and `CLIENT_ID` (the API server).
"""

from __future__ import annotations

from typing import Any

from simharness.placement.layout import Assignment
from simharness.runtime.signals import Signal

CONDUCTOR_ID = -1
CLIENT_ID = -2


class Send:
    """Deliver `msg` to endpoint `dst`; `nbytes` of payload travel with it.

    `src` is None for an ordinary send (from whoever returned it); a pull names the rank the
    bytes come from (a KV pull travels from the producer's rank to the puller).
    """

    __slots__ = ("dst", "nbytes", "msg", "src")

    def __init__(self, dst: int, nbytes: int, msg: Any, src: int | None = None) -> None:
        self.dst = dst
        self.nbytes = nbytes
        self.msg = msg
        self.src = src

    def __repr__(self) -> str:
        return f"Send({self.dst}, {self.nbytes}, {type(self.msg).__name__})"


class NewRequest:
    """mstar NEW_REQUEST: state for the request on this rank, and its first inputs here.

    `current` gives each partition's first walk (every partition starts at once); `kind` names
    the request kind (its dynamic-loop stop counts are drawn from it); `kv` is the conductor's
    view of where each KV cache label's pages are.
    """

    __slots__ = ("rid", "kind", "current", "assignment", "signals", "kv")
    kind_name = "new_request"

    def __init__(self, rid: str, kind: str, current: dict[str, tuple[str, int]], assignment: Assignment,
                 signals: list[Signal], kv: dict[str, tuple[int, int]] | None = None) -> None:
        self.rid = rid
        self.kind = kind
        self.current = current
        self.assignment = assignment
        self.signals = signals
        self.kv = kv or {}


class InputSignals:
    """mstar INPUT_SIGNALS: edges for one request, stamped with the sender's walk and pass."""

    __slots__ = ("rid", "walk", "pass_no", "signals", "src", "kv")
    kind_name = "input_signals"

    def __init__(self, rid: str, walk: str, pass_no: int, signals: list[Signal], src: int,
                 kv: dict[str, tuple[int, int]] | None = None) -> None:
        self.rid = rid
        self.walk = walk
        self.pass_no = pass_no
        self.signals = signals
        self.src = src
        #: the conductor's KV view (label -> (rank, tokens)); None from a peer
        self.kv = kv


class RemoveRequest:
    """mstar REMOVE_REQUEST. A TP follower ignores the conductor's and waits for its leader's."""

    __slots__ = ("rid", "source")
    kind_name = "remove_request"

    def __init__(self, rid: str, source: str = "conductor") -> None:
        self.rid = rid
        self.source = source


class StopLoops:
    """mstar STOP_LOOPS: a peer's ``check_stop`` ended these loops of the request's partition."""

    __slots__ = ("rid", "partition", "loops", "src", "pass_no")
    kind_name = "stop_loops"

    def __init__(self, rid: str, partition: str, loops: list[str], src: int, pass_no: int) -> None:
        self.rid = rid
        self.partition = partition
        self.loops = loops
        self.src = src
        self.pass_no = pass_no


class ProducerDone:
    """The conductor's ``producer_done``: no more items will stream from `partition`."""

    __slots__ = ("rid", "partition")
    kind_name = "producer_done"

    def __init__(self, rid: str, partition: str) -> None:
        self.rid = rid
        self.partition = partition


class ScheduleTp:
    """mstar SCHEDULE_TP: the instance leader's batch, which every follower runs in order."""

    __slots__ = ("rid", "node", "walk", "rids", "number", "src")
    kind_name = "schedule_tp"

    def __init__(self, node: str, walk: str, rids: list[str], number: int, src: int) -> None:
        self.rid = rids[0]
        self.node = node
        self.walk = walk
        self.rids = rids
        self.number = number
        self.src = src


class KvPullDone:
    """A KV pull finished: `tokens` of `label` are now on the pulling rank."""

    __slots__ = ("rid", "label", "tokens", "src")
    kind_name = "kv_pull_done"

    def __init__(self, rid: str, label: str, tokens: int, src: int) -> None:
        self.rid = rid
        self.label = label
        self.tokens = tokens
        self.src = src


class WorkerGraphsDoneMsg:
    """mstar WORKER_GRAPHS_DONE, carrying what the rank buffered for the request since the last
    one: persist signals, emits, new tokens, and (rank 0 of an instance) KV sequence lengths."""

    __slots__ = ("rid", "rank", "wgs", "persist", "pass_no", "emits", "partition_done",
                 "new_tokens", "kv", "tp_rank")
    kind_name = "worker_graphs_done"

    def __init__(self, rid: str, rank: int, wgs: list[str], persist: list[Signal], pass_no: int,
                 emits: int, partition_done: bool = False, new_tokens: int = 0,
                 kv: dict[str, int] | None = None, tp_rank: int = 0) -> None:
        self.rid = rid
        self.rank = rank
        self.wgs = wgs
        self.persist = persist
        self.pass_no = pass_no
        #: emits to the client since the last report (mstar's output_signal_names)
        self.emits = emits
        self.partition_done = partition_done
        self.new_tokens = new_tokens
        self.kv = kv or {}
        self.tp_rank = tp_rank


class ResultTensors:
    """mstar result_tensors: an emit to the client."""

    __slots__ = ("rid", "rank", "signal")
    kind_name = "result_tensors"

    def __init__(self, rid: str, rank: int, signal: Signal) -> None:
        self.rid = rid
        self.rank = rank
        self.signal = signal


class RequestComplete:
    """mstar request_complete, conductor to API server, with how many emits to expect."""

    __slots__ = ("rid", "emits")
    kind_name = "request_complete"

    def __init__(self, rid: str, emits: int) -> None:
        self.rid = rid
        self.emits = emits


class ReadsDone:
    """mstar READS_DONE: the API server has read every output; teardown may proceed."""

    __slots__ = ("rid",)
    kind_name = "reads_done"

    def __init__(self, rid: str) -> None:
        self.rid = rid
