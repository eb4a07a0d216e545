"""What a runtime under test provides to the drivers.

A runtime is an object with a ``name`` and ``build_rank(rank, layout)`` returning that rank's
pure state machine (see `simharness.runtime.rank.RankRuntime` for the methods the drivers call).
It also states the policies of mstar's worker loop and conductor that differ between mstar
versions (`LoopPolicy`); the drivers carry them out. A runtime may set ``worker_loop_class`` to
a `WorkerLoop` subclass when its worker loop itself differs, and ``conductor_class`` to a
`Conductor` subclass when its conductor does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from simharness.placement.layout import Layout

BATCHING_MODES = ("minibatch", "backlog")


@dataclass(frozen=True)
class LoopPolicy:
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
                             f"got {self.batching!r}")
        if not isinstance(self.drain_barrier, bool):
            raise ValueError(f"drain_barrier must be true or false, got {self.drain_barrier!r}")


class Runtime(Protocol):
    name: str
    description: str
    policy: LoopPolicy

    def build_rank(self, rank: int, layout: Layout) -> Any: ...
