"""Messages between the conductor and the ranks (mstar's IPC messages, reduced to what routing
needs). Slotted classes rather than dataclasses: one is built per send."""

from __future__ import annotations

from simharness.placement.layout import Assignment
from simharness.runtime.signals import Signal


class NewRequest:
    """mstar NEW_REQUEST: state for the request on this rank, and its first inputs here."""

    __slots__ = ("rid", "walk", "pass_no", "assignment", "signals")
    kind = "new_request"

    def __init__(
        self, rid: str, walk: str, pass_no: int, assignment: Assignment, signals: list[Signal]
    ) -> None:
        self.rid = rid
        self.walk = walk
        self.pass_no = pass_no
        self.assignment = assignment
        self.signals = signals


class InputSignals:
    """mstar INPUT_SIGNALS: edges for one request, stamped with the sender's walk and pass."""

    __slots__ = ("rid", "walk", "pass_no", "signals", "src")
    kind = "input_signals"

    def __init__(self, rid: str, walk: str, pass_no: int, signals: list[Signal], src: int) -> None:
        self.rid = rid
        self.walk = walk
        self.pass_no = pass_no
        self.signals = signals
        self.src = src


class RemoveRequest:
    __slots__ = ("rid",)
    kind = "remove_request"

    def __init__(self, rid: str) -> None:
        self.rid = rid


class WorkerGraphsDoneMsg:
    """mstar WORKER_GRAPHS_DONE, carrying the persist signals buffered since the last one."""

    __slots__ = ("rid", "rank", "wgs", "persist", "pass_no", "emits")
    kind = "worker_graphs_done"

    def __init__(self, rid: str, rank: int, wgs: list[str], persist: list[Signal], pass_no: int,
                 emits: int) -> None:
        self.rid = rid
        self.rank = rank
        self.wgs = wgs
        self.persist = persist
        self.pass_no = pass_no
        #: emits to the client since the last report (mstar's output_signal_names)
        self.emits = emits


class ResultTensors:
    """mstar result_tensors: an emit to the client."""

    __slots__ = ("rid", "rank", "signal")
    kind = "result_tensors"

    def __init__(self, rid: str, rank: int, signal: Signal) -> None:
        self.rid = rid
        self.rank = rank
        self.signal = signal


class RequestComplete:
    """mstar request_complete, conductor to API server, with how many emits to expect."""

    __slots__ = ("rid", "emits")
    kind = "request_complete"

    def __init__(self, rid: str, emits: int) -> None:
        self.rid = rid
        self.emits = emits


class ReadsDone:
    """mstar READS_DONE: the API server has read every output; teardown may proceed."""

    __slots__ = ("rid",)
    kind = "reads_done"

    def __init__(self, rid: str) -> None:
        self.rid = rid
