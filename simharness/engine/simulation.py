"""The simpy driver: wires conductor, ranks, network and workload, and runs to the end.

The run loop steps the simpy environment itself so that it can notice two things simpy alone
would not tell apart:

* quiescence: no event is left but some request has not ended. That is a hang, found in
  simulated time without waiting for any timeout; every such request is reported (`Stalled`,
  with what each node holds and misses) and then torn down as the API's abort would;
* a request's deadline (``limits.request_timeout_s``, mstar's 600 s API timeout) passing while
  other work keeps the simulation busy: reported and torn down the same way.

Nothing here reads the wall clock; `wall_s` is measured by the caller around `run`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import simpy

from simharness.engine import events as ev
from simharness.engine.client import ApiClient
from simharness.engine.conductor import Conductor
from simharness.engine.fake_nodes import FakeNodes
from simharness.engine.network import Network
from simharness.engine.rng import RandomStreams
from simharness.engine.trace import Recorder
from simharness.engine.worker import Worker
from simharness.placement.layout import Layout
from simharness.runtime.protocol import LoopPolicy
from simharness.scenario.model import Scenario

INF = float("inf")


@dataclass
class SimResult:
    scenario: Scenario
    runtime: str
    layout: Layout
    recorder: Recorder
    sim_time_s: float
    outcomes: dict[str, str] = field(default_factory=dict)
    messages: int = 0

    @property
    def events(self) -> list[Any]:
        return self.recorder.events


class Simulation:
    def __init__(
        self,
        scenario: Scenario,
        runtime: Any,
        observers: Iterable[Any] = (),
        layout: Layout | None = None,
        keep_trace: bool = True,
    ) -> None:
        self.scenario = scenario
        self.runtime_name = getattr(runtime, "name", str(runtime))
        self.policy: LoopPolicy = getattr(runtime, "policy", None) or LoopPolicy()
        self.layout = layout or Layout.build(scenario)
        self.env = simpy.Environment()
        self.streams = RandomStreams(scenario.seed)
        self.recorder = Recorder(observers, keep=keep_trace)
        net = scenario.network
        self.network = Network(self.env, net.latency_us * 1e-6, net.bandwidth_gbps * 1e9 / 8)
        self.fake_nodes = FakeNodes(scenario)
        self.workers = [Worker(self, r, runtime.build_rank(r, self.layout))
                        for r in range(self.layout.num_ranks)]
        self.conductor = Conductor(self)
        self.client = ApiClient(self)
        self.outcomes: dict[str, str] = {}
        self._next_id = 0
        self._workload_done = False

    # -- workload -----------------------------------------------------------------------------

    def _workload(self):
        env = self.env
        for phase in self.scenario.workload:
            remaining = [phase.count]

            def client(kind: str = phase.request, remaining: list[int] = remaining):
                while remaining[0] > 0:
                    remaining[0] -= 1
                    rid = f"r{self._next_id}"
                    self._next_id += 1
                    done = env.event()
                    self.conductor.submit(
                        rid, kind, lambda outcome, d=done, r=rid: self._ended(r, d, outcome))
                    yield done

            procs = [env.process(client()) for _ in range(min(phase.concurrency, phase.count))]
            if procs:
                yield env.all_of(procs)
        self._workload_done = True

    def _ended(self, rid: str, done: simpy.Event, outcome: str) -> None:
        self.outcomes[rid] = outcome
        done.succeed(outcome)

    # -- running ------------------------------------------------------------------------------

    def run(self) -> SimResult:
        # The trace keeps every event alive, so the cyclic collector would rescan a growing heap
        # over and over; nothing the run creates needs it before the end.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run()
        finally:
            if enabled:
                gc.enable()

    def _run(self) -> SimResult:
        env = self.env
        env.process(self._workload())
        for w in self.workers:
            env.process(w.run())
        conductor = self.conductor
        step = env.step
        peek = env.peek
        while True:
            t = peek()
            if t == INF:
                # Nothing left to happen: whatever has not ended never will.
                unfinished = conductor.unfinished()
                if not unfinished:
                    break
                for rid in unfinished:
                    self._stall(rid, "quiescence")
                continue
            deadline = conductor.next_deadline()
            if deadline is not None and deadline[0] < t:
                if deadline[0] > env.now:
                    env.run(until=deadline[0])
                self._stall(deadline[1], "timeout")
                continue
            step()
        self.recorder.emit(self._final_state())
        return SimResult(self.scenario, self.runtime_name, self.layout, self.recorder, env.now,
                         dict(self.outcomes), self.network.messages)

    # -- stalls -------------------------------------------------------------------------------

    def _stall(self, rid: str, reason: str) -> None:
        self.recorder.emit(self.stall_report(rid, reason))
        self.conductor.abort(rid, "hung" if reason == "quiescence" else "timeout")

    def stall_report(self, rid: str, reason: str) -> ev.Stalled:
        """What the request is waiting for, right now, on every rank."""
        req = self.conductor.requests.get(rid)
        now = self.env.now
        if req is None or req.assignment is None:
            return ev.Stalled(now, rid, reason, "", 0, (), ())
        walk = req.walk
        pending = tuple((wg, req.assignment.wg_ranks[wg]) for wg in req.pending)
        blocked: list[ev.BlockedNode] = []
        gate = self.fake_nodes.gate_detail
        for r in req.assignment.ranks:
            rs = self.workers[r].runtime.requests.get(rid)
            if rs is None:
                continue
            for wg_id, st in rs.states.items():
                if st.spec.walk != walk:
                    continue
                rows = []
                for node, ns in st.spec.nodes.items():
                    cur, nxt = st.cur[node], st.nxt[node]
                    missing = tuple(i for i in ns.inputs if i not in cur)
                    closed, waits = ("", ()) if missing else gate(node, st)
                    rows.append(ev.BlockedNode(
                        r, wg_id, node, st.counter(node), tuple(cur.values()),
                        tuple(nxt.values()), missing, closed, waits,
                        node in st.ready))
                interesting = [b for b in rows if b.held or b.held_next or b.queued or b.gate]
                if not interesting and wg_id in req.pending:
                    interesting = rows
                blocked.extend(interesting)
        return ev.Stalled(now, rid, reason, walk, req.step, pending, tuple(blocked))

    def _final_state(self) -> ev.RunEnded:
        return ev.RunEnded(
            self.env.now,
            tuple((w.rank, tuple(w.runtime.requests)) for w in self.workers if w.runtime.requests),
            tuple((w.rank, tuple((rid, kind) for rid, kinds in w.unprocessed.items() for kind in kinds))
                  for w in self.workers if w.unprocessed),
            tuple(self.conductor.requests),
            tuple(q.rid for q in self.conductor.waiting),
            tuple(w.rank for w in self.workers if w.busy),
        )
