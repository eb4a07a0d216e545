"""The test-only factory: `bench`, one small scenario's worker loops, conductor and API client,
so that unit tests drive `WorkerLoop`, `Conductor`, `RankRuntime` and `ApiClient` directly,
without an engine.

The keyword factories of messages, stimuli and signals (`signal`, `arrived`, `input_signals`,
`remove`, `result`) and the worker-graph section the state tests drive by hand (`denoise_loop`)
ship in `simharness.testing`, for an adapter's tests as for ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simharness.placement.layout import Layout
from simharness.rng import RandomStreams
from simharness.runtime.api_client import ApiClient
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.messages import NewRequest
from simharness.runtime.profiles import MstarPython
from simharness.runtime.protocol import LoopPolicy
from simharness.signals import Signal
from simharness.testing import signal
from tests.helpers import build, split_loop


@dataclass
class Bench:
    """One small scenario's pieces: layout, one worker loop per rank, conductor, API client."""

    layout: Layout
    loops: list[Any]
    conductor: Any
    client: ApiClient

    def assignment(self) -> Any:
        return self.layout.assign(lambda n: 0)

    def new_request(self, *, rid: str = "r0", rank: int, kind: str = "req",
                    signals: list[Signal] | None = None, **kw: Any) -> NewRequest:
        """NEW_REQUEST for `rank`, with the walk's start inputs that land there by default."""
        if signals is None:
            facts = self.layout.scenario.walk_facts["w"]
            wg_ranks = self.assignment().wg_ranks
            signals = [signal(name, dest) for name, dest in sorted(facts.start_inputs)
                       if rank in wg_ranks[self.layout.wg_of[("w", dest)]]]
        part = self.layout.scenario.partition_of["w"]
        return NewRequest(rid=rid, kind=kind, current={part: ("w", 0)},
                          assignment=kw.pop("assignment", self.assignment()), signals=signals, **kw)


def bench(*, max_iters: int = 2, concurrency_cap: int | None = None,
          policy: LoopPolicy | None = None) -> Bench:
    """The split loop of `tests.helpers.split_loop` (A on rank 0; B and C on rank 1)."""
    raw = split_loop(max_iters=max_iters)
    if concurrency_cap is not None:
        raw["placement"]["max_concurrent_requests"] = concurrency_cap
    sc = build(raw)
    layout = Layout.build(sc)
    runtime = MstarPython()
    if policy is not None:
        runtime.policy = policy
    nodes = FakeNodes(sc)
    loops = [runtime.build_worker(r, layout, nodes) for r in range(layout.num_ranks)]
    streams = RandomStreams(sc.seed)
    conductor = runtime.build_conductor(layout, lambda n: streams.choice_index("placement", n))
    return Bench(layout, loops, conductor, runtime.build_client())
