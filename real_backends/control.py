"""The driver's own messages: start-up, workload, probes, stall queries, events, shutdown.

They travel on the same sockets and in the same wire format as the runtime's messages
(`simharness.runtime.messages`) but never reach a runtime state machine: each process's driver
answers them. Runtime messages are counted for the quiescence probe; these are not.

Endpoints are numbered as in the runtime: ranks ``0..N-1``, the conductor ``CONDUCTOR_ID`` and
the launcher, which also plays the API server, ``CLIENT_ID``.
"""

from __future__ import annotations

from typing import Any


class _Msg:
    __slots__ = ()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"{type(self).__name__}({fields})"


class Hello(_Msg):
    """A process has bound its socket and is ready (mstar's SETUP_DONE)."""

    __slots__ = ("endpoint", "pid", "device")

    def __init__(self, endpoint: int, pid: int, device: str) -> None:
        self.endpoint = endpoint
        self.pid = pid
        self.device = device


class Start(_Msg):
    """Every process is up; the run clock starts at `t0` (the host's monotonic clock)."""

    __slots__ = ("t0",)

    def __init__(self, t0: float) -> None:
        self.t0 = t0


class Submit(_Msg):
    """Launcher to conductor: a client submits request `rid` of kind `kind`."""

    __slots__ = ("rid", "kind")

    def __init__(self, rid: str, kind: str) -> None:
        self.rid = rid
        self.kind = kind


class Ended(_Msg):
    """Conductor to launcher: request `rid` ended (completed, hung, timeout)."""

    __slots__ = ("rid", "outcome")

    def __init__(self, rid: str, outcome: str) -> None:
        self.rid = rid
        self.outcome = outcome


class Abort(_Msg):
    """Launcher to conductor: the API gives up on `rid` (a hang or a deadline)."""

    __slots__ = ("rid", "outcome")

    def __init__(self, rid: str, outcome: str) -> None:
        self.rid = rid
        self.outcome = outcome


class Probe(_Msg):
    """Launcher to every process: are you idle, and how many runtime messages have you sent and
    handled? Two identical rounds with everyone idle and sent == handled mean quiescence."""

    __slots__ = ("round",)

    def __init__(self, round: int) -> None:
        self.round = round


class ProbeReply(_Msg):
    __slots__ = ("round", "endpoint", "idle", "sent", "handled")

    def __init__(self, round: int, endpoint: int, idle: bool, sent: int, handled: int) -> None:
        self.round = round
        self.endpoint = endpoint
        self.idle = idle
        self.sent = sent
        self.handled = handled


class StallQuery(_Msg):
    """Launcher to conductor: which requests are unfinished, and where does each stand?"""

    __slots__ = ("round",)

    def __init__(self, round: int) -> None:
        self.round = round


class StallInfo(_Msg):
    """Per unfinished request, the conductor's `StallPosition` as a list: (rid, walk, step,
    [(wg, ranks) not reported], ranks, current walks); walk "" for a request still waiting for
    admission."""

    __slots__ = ("round", "requests")

    def __init__(self, round: int, requests: list[Any]) -> None:
        self.round = round
        self.requests = requests


class BlockedQuery(_Msg):
    """Launcher to a rank: what does `rid` hold and miss in `walk` on your side?"""

    __slots__ = ("round", "rid", "walk", "pending")

    def __init__(self, round: int, rid: str, walk: str | list[str], pending: list[str]) -> None:
        self.round = round
        self.rid = rid
        self.walk = walk
        self.pending = pending


class BlockedReply(_Msg):
    __slots__ = ("round", "rank", "rid", "blocked")

    def __init__(self, round: int, rank: int, rid: str, blocked: list[Any]) -> None:
        self.round = round
        self.rank = rank
        self.rid = rid
        self.blocked = blocked


class EventBatch(_Msg):
    """Trace events recorded by one process since its last batch, in order."""

    __slots__ = ("endpoint", "events")

    def __init__(self, endpoint: int, events: list[Any]) -> None:
        self.endpoint = endpoint
        self.events = events


class Shutdown(_Msg):
    """Launcher to every process: report your final state and exit."""

    __slots__ = ()


class Final(_Msg):
    """A process's state at the end (the pieces of `RunEnded`), sent just before it exits."""

    __slots__ = ("endpoint", "requests_left", "unprocessed", "busy", "conductor_requests",
                 "conductor_waiting", "stats")

    def __init__(self, endpoint: int, requests_left: list[str], unprocessed: list[Any], busy: bool,
                 conductor_requests: list[str], conductor_waiting: list[str],
                 stats: dict[str, Any] | None = None) -> None:
        self.endpoint = endpoint
        self.requests_left = requests_left
        self.unprocessed = unprocessed
        self.busy = busy
        self.conductor_requests = conductor_requests
        self.conductor_waiting = conductor_waiting
        #: what the process did (its device, how much tensor work), for the run's summary
        self.stats = stats or {}

