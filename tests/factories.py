"""Small keyword factories for the runtime model's messages and stimuli, so that unit tests
drive `WorkerLoop`, `Conductor`, `RankRuntime` and `ApiClient` directly, without an engine.

Every factory takes the fields it is likely to vary as keywords with defaults; anything else
is passed through to the message class.

`denoise_loop` is the one worker-graph section that both the `GraphState` tests and the
state conformance suite drive by hand.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from simharness.graph.ir import Edge, Loop, Node
from simharness.placement.layout import Layout
from simharness.rng import RandomStreams
from simharness.runtime.api_client import ApiClient
from simharness.runtime.effects import Arrived
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.messages import InputSignals, NewRequest, RemoveRequest, ResultTensors
from simharness.runtime.profiles import MstarPython
from simharness.runtime.protocol import LoopPolicy
from simharness.signals import ORIGIN_WALK_START, Signal
from tests.helpers import build, split_loop

_seq = itertools.count(1000)


def signal(name: str, dest: str, *, walk: str = "w", pass_no: int = 0, nbytes: int = 0,
           src_node: str = "conductor", src_rank: int = -1, origin: str = ORIGIN_WALK_START,
           stream: bool = False) -> Signal:
    return Signal(name, dest, False, False, nbytes, src_node, src_rank, walk, pass_no, None,
                  origin, next(_seq), stream)


def denoise_loop(iters: int = 3) -> Loop:
    """The denoise shape in one worker graph: ``dit`` takes an external ``emb`` and its own
    ``latents`` and ``t`` back each iteration, for `iters` iterations; when the loop ends it
    sends ``latents`` to ``vae``. Start it with `denoise_start`."""
    dit = Node("dit", ("emb", "latents", "t"), (Edge("latents", "dit"), Edge("t", "dit")))
    return Loop("denoise", iters, dit, outputs=(Edge("latents", "vae"),))


def denoise_start() -> list[Signal]:
    """What the walk start hands `denoise_loop`: the external ``emb`` and the first-iteration
    ``latents`` and ``t``."""
    return [signal(name, "dit") for name in ("emb", "latents", "t")]


def route_back(state: Any, items: Any, node: str) -> None:
    """Ingest the items `state` just completed that go to `node` in the same graph, as a rank
    does with its local edges (an `Edge` is turned into a signal)."""
    for e in items:
        dest = e.to if isinstance(e, Edge) else e.dest
        if dest == node:
            state.ingest(e if isinstance(e, Signal) else signal(e.name, dest))


def arrived(msg: Any) -> Arrived:
    return Arrived(msg=msg)


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


def input_signals(*, rid: str = "r0", walk: str = "w", pass_no: int = 0, signals: list[Signal],
                  src: int = 0, **kw: Any) -> InputSignals:
    return InputSignals(rid=rid, walk=walk, pass_no=pass_no, signals=signals, src=src, **kw)


def remove(*, rid: str = "r0", source: str = "conductor") -> RemoveRequest:
    return RemoveRequest(rid=rid, source=source)


def result(*, rid: str = "r0", rank: int = 1, name: str = "out") -> ResultTensors:
    return ResultTensors(rid=rid, rank=rank, signal=signal(name, "client"))
