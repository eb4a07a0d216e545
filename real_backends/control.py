"""The driver's own messages: start-up, workload, probes, stall queries, events, shutdown.

They travel on the same sockets and in the same wire format as the runtime's messages
(`simharness.runtime.messages`) but never reach a runtime state machine: each process's driver
answers them. Runtime messages are counted for the quiescence probe; these are not.

Every message is a frozen dataclass built with keywords, and what it carries is structured too
(`StallPosition`, `RequestPosition`, `BlockedNode`, `RankFinal`, `ConductorFinal`): no
positional tuples to take apart at the other end.

Endpoints are numbered as in the runtime: ranks ``0..N-1``, the conductor ``CONDUCTOR_ID`` and
the launcher, which also plays the API server, ``CLIENT_ID``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar, dataclass_transform

from simharness.drive.core import ConductorFinal, RankFinal, RequestPosition
from simharness.events import BlockedNode
from simharness.runtime.protocol import StallPosition

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, kw_only_default=True)
def _msg(cls: type[_T]) -> type[_T]:
    """A driver message: a frozen, slotted dataclass built with keywords."""
    return dataclass(frozen=True, kw_only=True, slots=True)(cls)


@_msg
class Hello:
    """A process has bound its socket and is ready (mstar's SETUP_DONE)."""

    endpoint: int
    pid: int
    device: str


@_msg
class Start:
    """Every process is up; the run clock starts at `t0` (the host's monotonic clock)."""

    t0: float


@_msg
class Submit:
    """Launcher to conductor: a client submits request `rid` of kind `kind`."""

    rid: str
    kind: str


@_msg
class Ended:
    """Conductor to launcher: request `rid` ended (completed, hung, timeout)."""

    rid: str
    outcome: str


@_msg
class Abort:
    """Launcher to conductor: the API gives up on `rid` (a hang or a deadline)."""

    rid: str
    outcome: str


@_msg
class Probe:
    """Launcher to every process: are you idle, and how many runtime messages have you sent and
    handled? Two identical rounds with everyone idle and sent == handled mean quiescence."""

    round: int


@_msg
class ProbeReply:
    round: int
    endpoint: int
    idle: bool
    sent: int
    handled: int


@_msg
class StallQuery:
    """Launcher to conductor: which requests are unfinished, and where does each stand?"""

    round: int


@_msg
class StallInfo:
    """Every unfinished request and the conductor's `StallPosition` of it (None: still waiting
    for admission), in the conductor's order."""

    round: int
    requests: list[RequestPosition]


@_msg
class BlockedQuery:
    """Launcher to a rank: what does `rid` hold and miss at `position` on your side?"""

    round: int
    rid: str
    position: StallPosition


@_msg
class BlockedReply:
    round: int
    rank: int
    rid: str
    blocked: list[BlockedNode]


@_msg
class EventBatch:
    """Trace events recorded by one process since its last batch, in order."""

    endpoint: int
    events: list[Any]


@_msg
class Lockstep:
    """Rank to the other ranks of a TP instance: `rank` has reached `phase` ("start" or "end")
    of the instance's lockstep batch `number` (the leader's batch number). A rank goes on only
    once every rank of the instance has said so: the collectives inside a TP forward hold its
    ranks together in mstar, so no rank starts a batch before the others do, and none is done
    with it before the others are."""

    instance: list[int]
    number: int
    phase: str
    rank: int


@_msg
class Shutdown:
    """Launcher to every process: report your final state and exit."""


@_msg
class Final:
    """A process's state at the end (its part of `RunEnded`), sent just before it exits."""

    endpoint: int
    state: RankFinal | ConductorFinal
    #: what the process did (its device, how much tensor work), for the run's summary
    stats: dict[str, Any] = field(default_factory=dict)
