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
    """Deliver `msg` to endpoint `dst`; `nbytes` of payload travel with it."""

    __slots__ = ("dst", "nbytes", "msg")

    def __init__(self, dst: int, nbytes: int, msg: Any) -> None:
        self.dst = dst
        self.nbytes = nbytes
        self.msg = msg

    def __repr__(self) -> str:
        return f"Send({self.dst}, {self.nbytes}, {type(self.msg).__name__})"


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
