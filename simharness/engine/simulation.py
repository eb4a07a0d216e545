"""The simpy driver: runs the pure loops (conductor, one worker loop per rank, API client) in
virtual time, over simulated links, under a closed-loop workload.

Each rank is a simpy process: it handles the messages that arrived, takes a batch, stays busy for
the batch's service time (the fake node's cost), then finishes it and sends what it produced.
Every `Send` a loop returns travels over `Network` to its endpoint's handler.

The run loop steps the simpy environment itself so that it can notice two things simpy alone
would not tell apart:

* quiescence: no event is left but some request has not ended. That is a hang, found in
  simulated time without waiting for any timeout; every such admitted request is reported
  (`Stalled`, with what each node holds and misses) and then torn down as the API's abort
  would, which lets the requests queued behind it in;
* a request's deadline (``limits.request_timeout_s``, mstar's 600 s API timeout) passing while
  other work keeps the simulation busy: reported and torn down the same way;
* a runaway: the optional `guard` (the liveness check) counts work the graph cannot explain and
  bumps its ``trips``; after each step the loop compares that integer with the trips it has
  handled. A new trip tears its request down like a hang (``Stalled`` with reason
  ``runaway``); a trip for a request already torn down means the work goes on without it, and
  the run ends there. Either way a runaway costs a bounded number of events, not a timeout.

Schedule perturbations and faults (`faults.Perturbations`, built only when the scenario asks
for them) hook in at four places: a batch's service time, a message leaving (`Network`), the
order of a rank's inbox, and the round-robin's tie-break; a crashed rank stops in `SimWorker`.

Nothing here reads the wall clock; `wall_s` is measured by the caller around `run`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import simpy

from simharness import events as ev
from simharness.engine.faults import Perturbations
from simharness.engine.network import Network
from simharness.placement.layout import Layout
from simharness.rng import RandomStreams
from simharness.runtime.api_client import ApiClient
from simharness.runtime.assembly import build_conductor, build_worker_loop, policy_of
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID, Send
from simharness.runtime.protocol import LoopPolicy
from simharness.runtime.stall import blocked_nodes
from simharness.runtime.worker_loop import WorkerLoop
from simharness.scenario.model import Scenario
from simharness.trace import Recorder

INF = float("inf")
#: the request outcome each kind of stall ends with
_OUTCOME = {"quiescence": "hung", "timeout": "timeout", "runaway": "runaway"}


@dataclass
class SimResult:
    scenario: Scenario
    runtime: str
    layout: Layout
    recorder: Recorder
    sim_time_s: float
    outcomes: dict[str, str] = field(default_factory=dict)
    #: what the runtime under test wants its user to know (e.g. a fallback it took)
    notes: tuple[str, ...] = ()

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
        guard: Any = None,
    ) -> None:
        self.scenario = scenario
        #: an observer with ``trips`` (a count) and ``runaways`` (each with a ``rid``), or None
        self.guard = guard
        self.runtime_name = getattr(runtime, "name", str(runtime))
        self.notes = tuple(scenario.notes) + tuple(getattr(runtime, "notes", ()))
        self.policy: LoopPolicy = policy_of(runtime)
        self.layout = layout or Layout.build(scenario)
        self.env = simpy.Environment()
        self.streams = RandomStreams(scenario.seed)
        self.recorder = Recorder(observers, keep=keep_trace)
        net = scenario.network
        self.faults = Perturbations.build(scenario, self.streams)
        self.network = Network(self.env, net.latency_us * 1e-6, net.bandwidth_gbps * 1e9 / 8, self.faults)
        self.fake_nodes = FakeNodes(scenario)
        emit = self.recorder.emit
        self.workers = [SimWorker(self, build_worker_loop(runtime, r, self.layout, self.fake_nodes, emit))
                        for r in range(self.layout.num_ranks)]
        self.conductor = build_conductor(runtime, self.layout, self.streams, emit)
        self.client = ApiClient(self.policy, emit)
        if self.faults is not None and self.faults.shuffle_ties:
            for w in self.workers:
                w.loop.scheduler.tie_break = self.faults.tie_break
        #: endpoint -> its message handler
        self._handlers: dict[int, Any] = {w.rank: w.deliver for w in self.workers}
        self._handlers[CONDUCTOR_ID] = self._conductor_deliver
        self._handlers[CLIENT_ID] = self._client_deliver
        self.outcomes: dict[str, str] = {}
        self._next_id = 0
        #: (instance, leader batch number) -> [ranks arrived, the event that fires when all have]
        self._collectives: dict[tuple[tuple[int, ...], int], list[Any]] = {}

    def collective(self, instance: tuple[int, ...], number: int) -> simpy.Event:
        """The rendezvous of a lockstep batch: it fires when every rank of the instance has
        started the batch (the collectives inside a TP forward hold each rank until then)."""
        key = (instance, number)
        entry = self._collectives.get(key)
        if entry is None:
            entry = self._collectives[key] = [0, self.env.event()]
        entry[0] += 1
        if entry[0] == len(instance):
            del self._collectives[key]
            entry[1].succeed()
        return entry[1]

    # -- messages -----------------------------------------------------------------------------

    def send_all(self, src: int, sends: list[Send]) -> None:
        net_send = self.network.send
        handlers = self._handlers
        for s in sends:
            net_send(src if s.src is None else s.src, s.dst, s.nbytes, handlers[s.dst], s.msg)

    def _conductor_deliver(self, msg: Any) -> None:
        self.send_all(CONDUCTOR_ID, self.conductor.handle(msg, self.env.now))

    def _client_deliver(self, msg: Any) -> None:
        self.send_all(CLIENT_ID, self.client.handle(msg, self.env.now))

    # -- workload -----------------------------------------------------------------------------

    def _workload(self):
        env = self.env
        for phase in self.scenario.workload:
            issued = [0]

            def client(phase=phase, issued=issued):
                while issued[0] < phase.count:
                    kind = phase.kind_of(issued[0])
                    issued[0] += 1
                    rid = f"r{self._next_id}"
                    self._next_id += 1
                    done = env.event()
                    self.send_all(CONDUCTOR_ID, self.conductor.submit(
                        rid, kind, env.now, lambda outcome, d=done, r=rid: self._ended(r, d, outcome)))
                    yield done

            procs = [env.process(client()) for _ in range(min(phase.concurrency, phase.count))]
            if procs:
                yield env.all_of(procs)

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
        if self.faults is not None:
            for rank, at in sorted(self.faults.crashes.items()):
                env.process(self._crash(self.workers[rank], at))
        conductor = self.conductor
        step = env.step
        peek = env.peek
        guard = self.guard
        handled = 0
        cut: set[str] = set()
        while True:
            t = peek()
            if t == INF:
                # Nothing left to happen: whatever has not ended never will.
                unfinished = conductor.unfinished()
                if not unfinished:
                    break
                # Only admitted requests hang: one waiting for a concurrency slot gets the slot
                # an abort below frees, and runs. A queue that no admitted request holds up
                # (a conductor that never admits it) is reported as never admitted.
                admitted = [rid for rid in unfinished if conductor.stall_position(rid) is not None]
                for rid in admitted or unfinished:
                    self._stall(rid, "quiescence")
                continue
            deadline = conductor.next_deadline()
            if deadline is not None and deadline[0] < t:
                if deadline[0] > env.now:
                    env.run(until=deadline[0])
                self._stall(deadline[1], "timeout")
                continue
            step()
            if guard is not None and guard.trips != handled:
                rid = guard.runaways[handled].rid
                handled += 1
                if rid in cut or rid not in conductor.requests:
                    break  # torn down already, and its work still grows: stop here
                cut.add(rid)
                self._stall(rid, "runaway")
        self.recorder.emit(self._final_state())
        return SimResult(self.scenario, self.runtime_name, self.layout, self.recorder, env.now,
                         dict(self.outcomes), notes=self.notes)

    def _crash(self, worker: SimWorker, at: float):
        yield self.env.timeout(at)
        worker.crashed = True

    # -- stalls -------------------------------------------------------------------------------

    def _stall(self, rid: str, reason: str) -> None:
        self.recorder.emit(self.stall_report(rid, reason))
        self.client.forget(rid)
        self.send_all(CONDUCTOR_ID, self.conductor.abort(
            rid, _OUTCOME.get(reason, reason), self.env.now))

    def stall_report(self, rid: str, reason: str) -> ev.Stalled:
        """What the request is waiting for, right now, on every rank."""
        pos = self.conductor.stall_position(rid)
        now = self.env.now
        if pos is None:
            return ev.Stalled(now, rid, reason, "", 0, (), ())
        waiting_on = [wg for wg, _ in pos.pending]
        blocked: list[ev.BlockedNode] = []
        for r in pos.ranks:
            loop = self.workers[r].loop
            blocked.extend(blocked_nodes(r, loop.runtime, loop.gate_detail, rid, pos.walks, waiting_on))
        return ev.Stalled(now, rid, reason, pos.walk, pos.step, pos.pending, tuple(blocked))

    def _final_state(self) -> ev.RunEnded:
        loops = [w.loop for w in self.workers]
        return ev.RunEnded(
            self.env.now,
            tuple((w.rank, tuple(w.runtime.requests)) for w in loops if w.runtime.requests),
            tuple((w.rank, tuple(w.unprocessed_pairs())) for w in loops if w.unprocessed),
            tuple(self.conductor.requests),
            tuple(q.rid for q in self.conductor.waiting),
            tuple(w.rank for w in loops if w.busy),
        )


class SimWorker:
    """A rank in virtual time: a `WorkerLoop` driven by a simpy process."""

    def __init__(self, sim: Simulation, loop: WorkerLoop) -> None:
        self.sim = sim
        self.env = sim.env
        self.loop = loop
        self.rank = loop.rank
        self.inbox: list[Any] = []
        self._wake: simpy.Event | None = None
        #: set by a crash fault: the rank finishes nothing more and loses what is sent to it
        self.crashed = False

    def deliver(self, msg: Any) -> None:
        if self.crashed:
            return
        self.inbox.append(msg)
        wake = self._wake
        if wake is not None and not wake.triggered:
            wake.succeed()

    def run(self):
        env = self.env
        loop = self.loop
        sim = self.sim
        rank = self.rank
        duration_of = sim.fake_nodes.duration
        faults = sim.faults
        shuffle = faults is not None and faults.shuffle_ties
        while True:
            if self.crashed:
                return
            if self.inbox:
                msgs, self.inbox = self.inbox, []
                if shuffle:
                    msgs = faults.interleave(msgs)
                for msg in msgs:
                    sends = loop.handle(msg, env.now)
                    if sends:
                        sim.send_all(rank, sends)
            batch = loop.take_batch(env.now)
            if loop.outbox:
                sim.send_all(rank, loop.pop_outbox())
            if batch is None:
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            duration = duration_of(batch.node, batch.walk, len(batch.rids))
            if faults is not None:
                duration = faults.service_time(rank, duration)
            if batch.instance:
                yield sim.collective(batch.instance, batch.tp_number)
            loop.start(batch, env.now, duration)
            yield env.timeout(duration)
            if self.crashed:
                return
            sim.send_all(rank, loop.finish(batch, env.now))
