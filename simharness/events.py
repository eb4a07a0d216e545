"""Trace events: what happened, when, where. Plain immutable records, named in the past tense.

Every driver emits these (the simpy engine now; the real-process backend later) and every check
and report reads them. Fields are primitives and tuples of primitives, so a trace serialises to
JSON lines and hashes to a stable digest. Time `t` is simulated seconds.

Signals inside events are the `Signal` objects the runtime routed. A signal is never changed
after it is produced, so an event can hold it; the digest hashes every field of it (see
`simharness.trace`), and its repr is a compact identity (name, destination, producing rank,
sequence number) for people.
"""

from __future__ import annotations

from typing import get_args

import msgspec

from simharness.signals import Signal

#: kept for readability in annotations: a signal as recorded in an event
SignalRef = Signal


class _Event(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Base of every event and of the records inside one (`BlockedNode`): an immutable msgspec
    Struct, built in C (several per forward), encoded as the array of its fields (which is what
    the trace digest hashes), compared by value, and not tracked by the cyclic garbage collector
    (a kept trace holds hundreds of thousands; an event only holds values and tuples of them, so
    it is never part of a cycle).

    Events are built by position, unlike messages and stimuli: they are the array of their
    fields, made several times per forward. Each subclass restates ``frozen=True``, which msgspec
    inherits but a type checker reads per class."""


class Submitted(_Event, frozen=True):
    t: float
    rid: str
    request_kind: str


class Admitted(_Event, frozen=True):
    t: float
    rid: str
    request_kind: str
    walks: tuple[str, ...]
    #: (worker graph id, ranks) for every worker graph of the request
    placement: tuple[tuple[str, tuple[int, ...]], ...]


class WalkStarted(_Event, frozen=True):
    t: float
    rid: str
    walk: str
    pass_no: int


class BatchStarted(_Event, frozen=True):
    t: float
    rank: int
    node: str
    walk: str
    rids: tuple[str, ...]
    batch: int
    duration: float


class Forward(_Event, frozen=True):
    """One node forward for one request, recorded when its batch completes, with what the
    completion routed where (``local:<wg>``, ``rank:<r>``, client, conductor)."""

    t: float
    rank: int
    rid: str
    walk: str
    node: str
    pass_no: int
    counter: int | None
    wg: str
    batch: int
    start: float
    #: (loop, curr_iter, max_iters, last) before the completion, innermost first
    loop_context: tuple[tuple[str, int, int, bool], ...]
    routes: tuple[tuple[SignalRef, str], ...]
    filtered: tuple[tuple[str, str], ...]
    finished_loops: tuple[str, ...]
    completed_wgs: tuple[str, ...]


class Delivered(_Event, frozen=True):
    """A message's signals arrived at a rank: (signal, worker graph or None, outcome) each (the
    worker graph is ``stream`` for a buffered stream item)."""

    t: float
    rank: int
    rid: str
    walk: str
    pass_no: int
    src: int
    outcomes: tuple[tuple[SignalRef, str | None, str], ...]


class Dropped(_Event, frozen=True):
    """A signal or message that went nowhere, and why."""

    t: float
    rank: int
    rid: str
    what: str
    reason: str
    signals: tuple[SignalRef, ...]


class WorkerGraphsDone(_Event, frozen=True):
    t: float
    rank: int
    rid: str
    wgs: tuple[str, ...]
    pass_no: int


class PassDone(_Event, frozen=True):
    t: float
    rid: str
    walk: str
    pass_no: int


class UnexpectedReport(_Event, frozen=True):
    """A worker-graph-done report the conductor did not wait for."""

    t: float
    rid: str
    rank: int
    wg: str
    reason: str


class RequestEnded(_Event, frozen=True):
    t: float
    rid: str
    outcome: str  # completed | hung | timeout
    walks_done: int


class Removed(_Event, frozen=True):
    """A rank tore a request down; what it still held (a clean run holds nothing)."""

    t: float
    rank: int
    rid: str
    #: (worker graph, node, slot, signal)
    held: tuple[tuple[str, str, str, SignalRef], ...]
    leftovers: tuple[str, ...]


class Emitted(_Event, frozen=True):
    t: float
    rank: int
    rid: str
    signal: SignalRef


class Stalled(_Event, frozen=True):
    """A request stopped making progress: at quiescence, or at its timeout."""

    t: float
    rid: str
    reason: str  # quiescence | timeout
    walk: str
    pass_no: int
    #: (worker graph, ranks that have not reported) for the current pass
    pending: tuple[tuple[str, tuple[int, ...]], ...]
    #: per node that holds something or is queued: see `BlockedNode`
    blocked: tuple[BlockedNode, ...]


#: how `BlockedNode.gate` starts when a TP follower holds a ready node because it runs only its
#: leader's batches: reports word it as a wait for the leader, and the fuzzer files such a hang
#: under a signature of its own (``liveness:hang-lockstep``)
LOCKSTEP_HOLD = "lockstep: "


class BlockedNode(_Event, frozen=True):
    rank: int
    wg: str
    node: str
    counter: int | None
    held: tuple[SignalRef, ...]
    held_next: tuple[SignalRef, ...]
    missing: tuple[str, ...]
    #: why the engine holds a node whose inputs are all present ("" if it does not): its gate
    #: (a scripted gate, KV pages), or, starting with `LOCKSTEP_HOLD`, the TP leader it follows
    gate: str
    #: the inputs the gate waits for (walk-start copies)
    gate_waits: tuple[str, ...]
    queued: bool


class LoopStopped(_Event, frozen=True):
    """A dynamic stop registered on a rank: by its own check_stop, or by a peer's STOP_LOOPS."""

    t: float
    rank: int
    rid: str
    partition: str
    loop: str
    by: str  # self | peer
    src: int


class Overshoot(_Event, frozen=True):
    """A speculative forward whose loop stopped just before: executed, output discarded."""

    t: float
    rank: int
    rid: str
    walk: str
    node: str
    counter: int | None


class ChunkPopped(_Event, frozen=True):
    """A StreamBuffer released a chunk: which items (producer sequence numbers), final or not."""

    t: float
    rank: int
    rid: str
    edge: str
    index: int
    start: int
    items: tuple[int, ...]
    final: bool
    policy: str


class PartitionDone(_Event, frozen=True):
    t: float
    rid: str
    partition: str
    reason: str  # final_chunk | walks_done | max_tokens


class ProducerDoneSent(_Event, frozen=True):
    t: float
    rid: str
    partition: str
    ranks: tuple[int, ...]


class KvPulled(_Event, frozen=True):
    t: float
    rank: int
    rid: str
    label: str
    src: int
    tokens: int


class KvUsed(_Event, frozen=True):
    """A KV-cache node started on a rank: tokens held there, and tokens it needed from elsewhere."""

    t: float
    rank: int
    rid: str
    node: str
    walk: str
    label: str
    have: int
    need: int


class RunEnded(_Event, frozen=True):
    """The final state of every rank and of the conductor."""

    t: float
    #: rank -> request ids still known there
    requests_left: tuple[tuple[int, tuple[str, ...]], ...]
    #: rank -> (rid, message kind) parked for requests the rank no longer knows
    unprocessed: tuple[tuple[int, tuple[tuple[str, str], ...]], ...]
    conductor_requests: tuple[str, ...]
    conductor_waiting: tuple[str, ...]
    busy_ranks: tuple[int, ...]


Event = (
    Submitted | Admitted | WalkStarted | BatchStarted | Forward | Delivered | Dropped
    | WorkerGraphsDone | PassDone | UnexpectedReport | RequestEnded | Removed | Emitted | Stalled
    | LoopStopped | Overshoot | ChunkPopped | PartitionDone | ProducerDoneSent | KvPulled | KvUsed
    | RunEnded
)

#: every event type, as `Event` lists them: what an observer may have an ``on_<Name>`` hook for
EVENT_TYPES: tuple[type, ...] = get_args(Event)
