"""How a driver assembles the runtime under test: its loop policy, one worker loop per rank and
the conductor. The simpy driver and the real processes build them here, so both run the same
state machines and `confirm` compares like with like.
"""

from __future__ import annotations

from typing import Any

from simharness.placement.layout import Layout
from simharness.rng import RandomStreams
from simharness.runtime.conductor import Conductor
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.protocol import LoopPolicy
from simharness.runtime.worker_loop import WorkerLoop


def policy_of(runtime: Any) -> LoopPolicy:
    """The runtime's loop policy; the reference semantics when it names none."""
    return getattr(runtime, "policy", None) or LoopPolicy()


def build_worker_loop(runtime: Any, rank: int, layout: Layout, nodes: FakeNodes) -> WorkerLoop:
    """Rank `rank`'s worker loop. mstar's worker loop is part of the runtime under test, so a
    runtime may bring its own class (`worker_loop_class`)."""
    loop_class = getattr(runtime, "worker_loop_class", None) or WorkerLoop
    return loop_class(rank, runtime.build_rank(rank, layout), nodes, policy_of(runtime),
                      layout.scenario.seed)


def build_conductor(runtime: Any, layout: Layout, streams: RandomStreams) -> Conductor:
    """The conductor; replicas are chosen from the seed's ``placement`` stream. mstar's conductor
    is part of the runtime under test too, so a runtime may bring its own `Conductor` subclass
    (`conductor_class`)."""
    conductor_class = getattr(runtime, "conductor_class", None) or Conductor
    return conductor_class(layout.scenario, layout, policy_of(runtime),
                           lambda n: streams.choice_index("placement", n))


__all__ = ["build_conductor", "build_worker_loop", "policy_of"]
