"""`ModelRuntime`: a runtime assembled from our state machines, the base of every model of mstar.

A model runtime gives each rank its routing (``build_rank``, a `protocol.RankRuntimeProtocol`)
and builds the rest from its `parts` (`runtime.parts.WorkerParts`): the worker loop and its
collaborators, the stream buffers and the conductor; a runtime that differs in one concern swaps
one class there. It implements the `protocol.Runtime` the drivers assemble a run from, so the
simpy driver and the real processes build the same state machines and `confirm` compares like
with like.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from simharness.placement.layout import Layout
from simharness.runtime.api_client import ApiClient
from simharness.runtime.conductor import Conductor
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.parts import WorkerParts
from simharness.runtime.protocol import LoopPolicy, RankRuntimeProtocol
from simharness.runtime.worker_loop import WorkerLoop


class ModelRuntime:
    """Our model of mstar's worker, conductor and API side over a rank runtime of its own.

    Subclasses set ``name``, ``description`` and `parts`, and implement `build_rank`."""

    name = "model"
    description = ""
    #: the classes the workers and the conductor are built from (None: the standard one)
    parts: WorkerParts = WorkerParts()

    def __init__(self, batching: str = "minibatch", drain_barrier: bool = False,
                 choose_first: bool = False, wake_us: float = 0.0,
                 idle_poll_ms: float = 0.0, acks: bool = False, successors: bool = False) -> None:
        self.policy = LoopPolicy(batching=batching, drain_barrier=drain_barrier,
                                 choose_first=choose_first, wake_us=wake_us,
                                 idle_poll_ms=idle_poll_ms, acks=acks, successors=successors)
        self.notes: Sequence[str] = []

    def build_rank(self, rank: int, layout: Layout) -> RankRuntimeProtocol:
        raise NotImplementedError

    def build_worker(self, rank: int, layout: Layout, nodes: FakeNodes,
                     tie_break: Any = None) -> WorkerLoop:
        loop_class = self.parts.worker_loop or WorkerLoop
        return loop_class(rank, self.build_rank(rank, layout), nodes, self.policy,
                          layout.scenario.seed, parts=self.parts, tie_break=tie_break)

    def build_conductor(self, layout: Layout, choose: Callable[[int], int]) -> Conductor:
        conductor_class = self.parts.conductor or Conductor
        return conductor_class(layout.scenario, layout, self.policy, choose)

    def build_client(self) -> ApiClient:
        return ApiClient(self.policy)


__all__ = ["ModelRuntime"]
