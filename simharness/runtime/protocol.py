"""The declared interfaces of the runtime under test.

A runtime is an object with a ``name`` and ``build_rank(rank, layout)`` returning that rank's
pure state machine (`RankRuntimeProtocol`; `simharness.runtime.rank.RankRuntime` implements
it), whose per-request, per-worker-graph state is a `WorkerGraphState`. It also states the
policies of mstar's worker loop and conductor that differ between mstar versions
(`LoopPolicy`). A runtime may set ``worker_loop_class`` to a `WorkerLoop` subclass when its
worker loop differs, and ``conductor_class`` to a `Conductor` subclass when its conductor does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from msgspec import Struct

from simharness.placement.layout import Layout
from simharness.runtime.signals import Signal
from simharness.wording import hint

BATCHING_MODES = ("minibatch", "backlog")


class LoopPolicy(Struct, frozen=True):
    """Worker-loop and teardown behaviour.

    ``batching``: ``minibatch`` is the reference (mstar at 6666c623): a batch takes every ready
    request of its (node, walk) and the engine splits it into minibatches of ``max_batch``
    inside one execution. ``backlog`` is mstar 0.2.1: the scheduler caps a batch at
    ``max_batch`` and serves the remainder first on the next steps.

    ``drain_barrier``: mstar 0.2.1 sends REMOVE only after the API server has read every output
    (READS_DONE); the reference sends it as soon as the request is done.
    """

    batching: str = "minibatch"
    drain_barrier: bool = False

    def __post_init__(self) -> None:
        if self.batching not in BATCHING_MODES:
            raise ValueError(f"batching must be one of {', '.join(BATCHING_MODES)}, "
                             f"got {self.batching!r}{hint(str(self.batching), BATCHING_MODES)}")
        if not isinstance(self.drain_barrier, bool):
            raise ValueError(f"drain_barrier must be true or false, got {self.drain_barrier!r}")


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
    one conformance suite (tests/unit/test_state_conformance.py). `RankRuntime`, the worker
    loop, the scheduler, the fake nodes' gate and the stall report use nothing else.
    """

    #: the compiled worker graph: ``id``, ``walk``, ``nodes[name]`` (inputs, outputs, loop)
    spec: Any
    #: loop name -> its status
    loops: Mapping[str, LoopStatus]

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
    #: rid -> the request's state here (``states``: worker graph -> `WorkerGraphState`,
    #: ``buffers``, ``assignment``, ``current``)
    requests: Mapping[str, Any]
    partition_of: Mapping[str, str]

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

    def stop_loops(self, rid: str, walk: str, loops: list[str]) -> list[int]: ...

    def peer_stop(self, rid: str, partition: str, loops: list[str]) -> list[str]: ...

    def complete(self, rid: str, node: str, walk: str) -> Any: ...

    def leftovers(self, rid: str) -> list[str]: ...

    def remove(self, rid: str) -> list[Any]: ...

    def new_state(self, wg_id: str) -> WorkerGraphState: ...
