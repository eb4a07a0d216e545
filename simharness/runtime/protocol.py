"""The declared interfaces of the runtime under test.

A `Runtime` is what the registry finds by name and what both drivers (the simulation and the
real processes) assemble a run from: one worker per rank (`WorkerDoor`), the conductor
(`ConductorDoor`) and the API server's side (`ClientDoor`), each a pure state machine with one
door, ``handle_stimulus(stimulus, now) -> Effects``, plus the few questions a driver asks of it
for stall reports and the end state. It also states the policies of mstar's worker loop and
conductor that differ between mstar versions (`LoopPolicy`).

Most runtimes are our model of mstar, assembled from our state machines by
`simharness.runtime.assembly.ModelRuntime`: a rank's routing (`RankRuntimeProtocol`, from
``build_rank``) over per-request, per-worker-graph state (`WorkerGraphState`), and a worker loop
and conductor built from `simharness.runtime.parts.WorkerParts`, where a runtime that differs in
one concern swaps one class. A runtime that brings mstar's own worker loop (the real mstar
stack) builds its workers and conductor itself; a worker that runs its own main loop instead of
the drivers' one says so by being a `drive.worker.OwnMainLoop`.

Conformance suites for these interfaces ship in `simharness.testing`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from msgspec import Struct

from simharness import events as ev
from simharness.placement.layout import Layout
from simharness.runtime.effects import Effects
from simharness.signals import Signal
from simharness.wording import hint

BATCHING_MODES = ("minibatch", "backlog")


class LoopPolicy(Struct, frozen=True):
    """Worker-loop and teardown behaviour.

    ``batching``: ``minibatch`` is the reference (mstar at 6666c623): a batch takes every ready
    request of its (node, walk) and the engine splits it into minibatches of ``max_batch``
    inside one execution. ``backlog`` is mstar 0.2.1: the scheduler caps a batch at
    ``max_batch`` and serves the remainder first on the next steps.

    ``drain_barrier``: mstar 0.2.1 sends REMOVE only after the API server has read every output
    (READS_DONE); the reference sends it as soon as the request is done. An aborted request
    (hung, timed out) is drained on every rank first (DRAIN_REQUEST, each rank acknowledging) and
    stays open in the conductor until all have; the reference removes it at once.

    ``choose_first``: mstar 0.2.1's loop (worker.py:3070-3080) chooses the next batch right after
    postprocessing one, and reads the messages that came in while it ran only after that (at
    the top of the next iteration, while the new batch runs). The reference reads them first.
    A TP batch is in flight from its submit: its collective runs inside the forward, on the
    GPU, so the rank reads its inbox before the other ranks of the instance have joined (the
    reference starts the batch, and reads, once they all have).

    ``wake_us``: how long an idle rank takes, once a message wakes it, before it reads its
    socket: 0 (the reference) reads the first message alone, at the instant it arrives; a
    positive value reads what arrived together with it (a burst the conductor sent in one go
    is read in one go, as a real socket poll does).

    ``idle_poll_ms``: an idle rank waits for a message or this long, whichever comes first, when
    a poll of its StreamBuffers would already find a chunk (mstar's ``wait_for_work(10)``,
    worker.py:3089: a stream item routed on the rank itself wakes nothing). 0: it polls at once.
    Under ``choose_first`` the choice right after a batch does not poll (step 4 of mstar's loop).

    ``acks``: a rank that reads another rank's tensors, and the API server that reads an emit,
    send the producer a TENSOR_RECEIVED (mstar's ``_collect_and_send_acks``, tensors.py:602-624).
    It changes nothing on the producer here but wakes it when idle, and a woken rank polls its
    StreamBuffers (so a chunk can go out before the message that would otherwise wake it).

    ``successors``: mstar 0.2.1's speculation step (`worker_parts.Speculation`). After a batch
    of an async node it speculates the next batch onto the first node of the same worker graph
    that the batch's outputs make ready (``_try_speculate_next``, worker.py:1726-1900), which
    then runs right after it, ahead of whatever else is ready; it continues only the requests
    that fit once that node's backlog is served, and adds others up to the cap; with nothing to
    speculate it chooses the next batch while the batch runs (the yield-away path); and a
    speculative batch is an overshoot only for the very loop a stop ended. Off (the
    reference): only an async single-node loop's next iteration is speculated, and a stop of
    any loop of the request makes that an overshoot.
    """

    batching: str = "minibatch"
    drain_barrier: bool = False
    choose_first: bool = False
    wake_us: float = 0.0
    idle_poll_ms: float = 0.0
    acks: bool = False
    successors: bool = False

    def __post_init__(self) -> None:
        if self.batching not in BATCHING_MODES:
            raise ValueError(f"batching must be one of {', '.join(BATCHING_MODES)}, "
                             f"got {self.batching!r}{hint(str(self.batching), BATCHING_MODES)}")
        if not isinstance(self.drain_barrier, bool):
            raise ValueError(f"drain_barrier must be true or false, got {self.drain_barrier!r}")
        for flag in ("choose_first", "acks", "successors"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        for name, top in (("wake_us", 1e6), ("idle_poll_ms", 1e3)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= top:
                raise ValueError(f"{name} must be a number from 0 to {top:g}, got {value!r}")


#: mstar-ai 0.2.1's worker loop and teardown, as the real stack (`--runtime mstar`) runs them;
#: a profile run with these options is what the fidelity suite holds against the stack
MSTAR_0_2_1 = LoopPolicy(batching="backlog", drain_barrier=True, choose_first=True, wake_us=1.0,
                         idle_poll_ms=10.0, acks=True, successors=True)


class LoopBound(Protocol):
    """What is read of a loop's compiled spec through its status: its iteration limit."""

    @property
    def max_iters(self) -> int: ...


class LoopStatus(Protocol):
    """One loop of one request in one worker graph, as the worker loop and reports read it."""

    @property
    def spec(self) -> LoopBound: ...

    @property
    def curr_iter(self) -> int: ...

    @property
    def done(self) -> bool: ...

    @property
    def finish(self) -> bool: ...


@runtime_checkable
class WorkerGraphState(Protocol):
    """One request's state in one worker graph (mstar's ``WorkerGraphIO`` with its registries).

    `GraphState` is our model of it; `MstarGraphState` wraps the real mstar object. Both pass
    one conformance suite (`simharness.testing.check_worker_graph_state`). `RankRuntime`, the worker
    loop, the scheduler, the fake nodes' gate and the stall report use nothing else.
    """

    #: the compiled worker graph: ``id``, ``walk``, ``nodes[name]`` (inputs, outputs, loop)
    spec: Any

    @property
    def loops(self) -> Mapping[str, LoopStatus]:
        """Loop name -> its status."""
        ...

    def ingest(self, sig: Signal, can_buffer: bool = True) -> str:
        """CURRENT, NEXT, PARKED or REJECTED."""
        ...

    def ingest_chunk(self, sig: Signal) -> str: ...

    def streaming_ready(self, node: str) -> bool: ...

    @property
    def ready(self) -> Collection[str]:
        """The ready node names in a deterministic order (iteration and ``in``; our model
        keeps an insertion-ordered dict, the mstar adapter a list)."""
        ...

    def pop_ready(self, node: str) -> bool: ...

    def inputs(self, node: str) -> Mapping[str, Signal]:
        """The node's current-iteration slot: input name -> signal."""
        ...

    def next_inputs(self, node: str) -> Mapping[str, Signal]:
        """The node's next-iteration slot."""
        ...

    def mark_speculative(self, node: str) -> None:
        """The node's next iteration was scheduled before its batch was postprocessed."""
        ...

    def unmark_speculative(self, node: str) -> None: ...

    def counter(self, node: str) -> int | None: ...

    def loop_context(self, node: str) -> tuple[tuple[str, int, int, bool], ...]: ...

    def register_finish(self, loop: str) -> bool: ...

    def clear_current(self, node: str) -> None: ...

    def complete(self, node: str) -> tuple[Sequence[Any], frozenset[tuple[str, str]], list[str]]:
        """(routed items: declared `Edge`s or re-injected `Signal`s, filtered loop-back pairs,
        loops that finished). The items are read, never changed, by the caller."""
        ...

    @property
    def done(self) -> bool: ...

    @property
    def times_run(self) -> int: ...

    def reset(self) -> None: ...

    def held(self) -> Iterator[tuple[str, str, Signal]]: ...

    def is_clean(self) -> bool: ...


@runtime_checkable
class RankRuntimeProtocol(Protocol):
    """One rank's runtime (mstar's ``WorkerGraphsManager`` and ``process_node_outputs``): what
    the worker loop and the stall report call. `RankRuntime` is the implementation every
    shipped runtime uses; an adapter usually replaces only `new_state`."""

    rank: int
    layout: Layout

    @property
    def requests(self) -> Mapping[str, Any]:
        """rid -> the request's state here (``states``: worker graph -> `WorkerGraphState`,
        ``buffers``, ``assignment``, ``current``)."""
        ...

    @property
    def partition_of(self) -> Mapping[str, str]:
        """Walk -> its partition."""
        ...

    @property
    def specs(self) -> Mapping[str, Any]:
        """Worker graph -> its compiled spec (`graph_spec.GraphSpec`: the speculation reads
        which nodes may schedule ahead, ``spec_nodes``)."""
        ...

    def admit(self, rid: str, walk: str, pass_no: int, assignment: Any,
              partitions: frozenset[str] | None = None) -> None: ...

    def set_walk(self, rid: str, walk: str, pass_no: int) -> None: ...

    def deliver(self, rid: str, walk: str, pass_no: int,
                signals: list[Signal]) -> list[tuple[Signal, str | None, str]]: ...

    def offer_chunk(self, rid: str, chunk: Any) -> tuple[str | None, str]: ...

    def ready_work(self) -> Iterable[tuple[str, str, str, Any]]:
        """(node, walk, rid, state) of every ready node, requests in admission order."""
        ...

    def ready_groups(self) -> dict[tuple[str, str], list[tuple[str, Any]]]:
        """`ready_work` grouped by (node, walk): (rid, state) each, in `ready_work`'s order,
        groups in the order of their first ready node (what the scheduler reads when nothing
        is held back)."""
        ...

    def state_of(self, rid: str, walk: str, node: str) -> Any: ...

    def instance_of(self, rid: str, walk: str, node: str) -> tuple[int, ...]: ...

    def stop_loops(self, rid: str, walk: str, loops: list[str], node: str | None = None) -> list[int]: ...

    def peer_stop(self, rid: str, partition: str, loops: list[str],
                  times: dict[str, tuple[int, ...]] | None = None) -> list[str]: ...

    def learn_stop_times(self, rid: str, walk: str, signals: list[Signal],
                         times: dict[str, tuple[int, ...]] | None) -> None: ...

    def stop_times_of(self, rid: str, walk: str) -> dict[str, tuple[int, ...]] | None: ...

    def complete(self, rid: str, node: str, walk: str) -> Any: ...

    def leftovers(self, rid: str) -> list[str]: ...

    def remove(self, rid: str) -> list[Any]: ...

    def new_state(self, wg_id: str) -> WorkerGraphState: ...


class StallPosition(Struct, frozen=True, kw_only=True):
    """An unfinished request as the conductor sees it: its walk and step, the worker graphs it
    waits on (with their ranks), the ranks it runs on and its partitions' current walks."""

    walk: str
    step: int
    pending: tuple[tuple[str, tuple[int, ...]], ...]
    ranks: tuple[int, ...]
    walks: tuple[str, ...]


@runtime_checkable
class WorkerDoor(Protocol):
    """One rank's worker, as the drivers run it: `drive.worker.worker_main` hands it the
    messages that arrived (`effects.Received`), asks for a batch (`effects.CHOOSE`), and tells
    it when the batch started and finished (`effects.Started`, `effects.Finished`)."""

    rank: int
    #: a batch is in flight (the end state reports a rank still busy)
    busy: bool

    def handle_stimulus(self, stimulus: Any, now: float) -> Effects: ...

    def requests_left(self) -> tuple[str, ...]:
        """The requests this rank still holds state for (the end state)."""
        ...

    def unprocessed_pairs(self) -> list[tuple[str, str]]:
        """(request, message kind) of every message parked for a request this rank no longer
        knows, in arrival order (mstar's ``_unprocessed_messages``)."""
        ...

    def blocked(self, rid: str, position: StallPosition) -> list[ev.BlockedNode]:
        """For a stall report: the nodes of `rid` here that hold, miss or are held."""
        ...


@runtime_checkable
class ConductorDoor(Protocol):
    """The conductor: `effects.Submit` and `effects.Abort` from the API side, `effects.Arrived`
    for a message from a rank."""

    def handle_stimulus(self, stimulus: Any, now: float) -> Effects: ...

    def unfinished(self) -> list[str]:
        """Every request submitted and not ended, admitted ones first."""
        ...

    def waiting_requests(self) -> tuple[str, ...]:
        """The requests waiting for a concurrency slot (the end state)."""
        ...

    def open_requests(self) -> tuple[str, ...]:
        """The admitted requests the conductor still holds (the end state)."""
        ...

    def stall_position(self, rid: str) -> StallPosition | None:
        """Where an unfinished request stands, for a hang report; None before admission."""
        ...

    def next_deadline(self) -> tuple[float, str] | None:
        """The earliest request timeout still to come, and whose."""
        ...


@runtime_checkable
class ClientDoor(Protocol):
    """The API server's side: `effects.Arrived` for what a rank or the conductor sent it,
    `effects.Abort` when it gives a request up."""

    def handle_stimulus(self, stimulus: Any, now: float) -> Effects: ...


@runtime_checkable
class Runtime(Protocol):
    """A runtime under test, as the registry builds it and both drivers assemble a run."""

    name: str
    policy: LoopPolicy
    #: what the user should know about this runtime here (a fallback it took), one line each
    notes: Sequence[str]

    def build_worker(self, rank: int, layout: Layout, nodes: Any,
                     tie_break: Any = None) -> WorkerDoor:
        """Rank `rank`'s worker. `nodes`: the fake nodes' engine-level behaviour
        (`runtime.fake_nodes.FakeNodes`); `tie_break`: a schedule perturbation that reorders
        ties among ready work (``schedule.shuffle_ties``), or None."""
        ...

    def build_conductor(self, layout: Layout, choose: Any) -> ConductorDoor:
        """The conductor; `choose(n)` picks one of `n` data-parallel replicas (seeded)."""
        ...

    def build_client(self) -> ClientDoor:
        """The API server's side."""
        ...
