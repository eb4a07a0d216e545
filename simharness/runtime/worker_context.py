"""`LoopContext`: what a worker loop's collaborator may read of the loop it serves.

The collaborators in `worker_parts` (teardown, lockstep, speculation, KV pulls, reports) are
built with the loop (`WorkerLoop`) and keep it, but they may use only this: the rank and its
routing, the scenario and the fake nodes, the per-request records, the trace, the engine gate,
the scheduler, and the two other parts a part asks a question of (the lockstep's ``has_tp``,
the teardown's ``pending``). A runtime that swaps one part (`runtime.parts.WorkerParts`) can
read here what its part may rely on; the parts do not import the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from simharness.runtime.protocol import RankRuntimeProtocol, WorkerGraphState
from simharness.scenario.model import Scenario


class LoopContext(Protocol):
    rank: int
    runtime: RankRuntimeProtocol
    scenario: Scenario
    #: the fake nodes' engine-level behaviour (`runtime.fake_nodes.FakeNodes`)
    nodes: Any
    #: the round-robin scheduler (`runtime.scheduler.MicroScheduler`)
    scheduler: Any
    #: the worker-loop and teardown options (`protocol.LoopPolicy`)
    policy: Any
    #: the other parts, for the questions one part asks another
    lockstep: Any
    teardown: Any

    @property
    def records(self) -> Mapping[str, Any]:
        """rid -> this rank's record of the request (`worker_parts.RequestRecord`)."""
        ...

    def emit(self, event: Any) -> None:
        """Record a trace event."""
        ...

    def gate(self, node: str, walk: str, rid: str, st: WorkerGraphState) -> str:
        """Why the engine would not run `node` for `rid` now ("" when it would)."""
        ...

    def schedule(self) -> Any:
        """The scheduler's next batch of the rank's own ready work (`WorkerLoop.schedule`)."""
        ...

    def held(self, node: str, walk: str, rid: str, st: WorkerGraphState) -> None:
        """The gate held `node` for `rid` while choosing work."""
        ...


__all__ = ["LoopContext"]
