"""The simpy driver: runs the pure loops (conductor, one worker loop per rank, API client) in
virtual time, over simulated links, under a closed-loop workload.

This module supplies only the clock and the transport; the policy is the driver core's
(`simharness.drive`): each rank runs `drive.worker.worker_main` as a simpy process, staying busy
for a batch's service time (the fake node's cost); the workload is `drive.core.Workload`; hangs
and their reports are `drive.core.Stalls`. Every `Send` a loop returns travels over `Network`
to its endpoint's handler.

The run loop steps the simpy environment itself so that it can notice two things simpy alone
would not tell apart:

* quiescence: no event is left but some request has not ended. Nothing can happen any more, so
  the core reports the hung requests and aborts them, which lets the requests queued behind
  them in; found in simulated time without waiting for any timeout;
* a request's deadline (``limits.request_timeout_s``, mstar's 600 s API timeout) passing while
  other work keeps the simulation busy: reported and torn down the same way;
* a runaway: the optional `guard` (`drive.runaway.RunawayGuard`) counts work the graph cannot
  explain and bumps its ``trips``; after each step the loop compares that integer with the trips it has
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
from collections.abc import Callable, Generator, Iterable, Sequence
from functools import partial
from typing import Any

import simpy

from simharness import events as ev
from simharness.drive.core import (
    QUIESCENCE,
    RUNAWAY,
    TIMEOUT,
    RequestPosition,
    Stalls,
    Workload,
    conductor_final,
    rank_final,
    run_ended,
)
from simharness.drive.result import RunResult
from simharness.drive.worker import rank_main
from simharness.engine.clock import Clock, Tick
from simharness.engine.deliveries import DeliveryControl, RecordedControl
from simharness.engine.faults import Perturbations
from simharness.engine.network import Network
from simharness.placement.layout import Layout
from simharness.ridmap import RidMap
from simharness.rng import RandomStreams
from simharness.runtime.effects import Abort, Alarm, Arrived, Effects, Submit
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID, Send
from simharness.runtime.protocol import LoopPolicy, Runtime, WorkerDoor
from simharness.runtime.scheduler import Batch
from simharness.scenario.model import Scenario
from simharness.trace import Recorder

INF = float("inf")


class Simulation:
    def __init__(
        self,
        scenario: Scenario,
        runtime: Runtime,
        observers: Iterable[Any] = (),
        layout: Layout | None = None,
        keep_trace: bool = True,
        guard: Any = None,
        digest: bool = True,
        control: Callable[[Clock], DeliveryControl] | None = None,
    ) -> None:
        self.scenario = scenario
        #: an observer with ``trips`` (a count) and ``runaways`` (each with a ``rid``), or None
        self.guard = guard
        self.runtime_name = runtime.name
        self.policy: LoopPolicy = runtime.policy
        self.layout = layout or Layout.build(scenario)
        self.env = simpy.Environment()
        #: the environment's queue and clock, which the run steps and feeds by hand
        self.clock = Clock(self.env)
        self.streams = RandomStreams(scenario.seed)
        self.recorder = Recorder(observers, keep=keep_trace, digest=digest)
        net = scenario.network
        self.faults = Perturbations.build(scenario, self.streams)
        self.network = Network(self.clock, net.latency_us * 1e-6, net.bandwidth_gbps * 1e9 / 8, self.faults)
        #: who decides deliveries: a search's control, else the scenario's recorded schedule
        self.control: DeliveryControl | None = (
            control(self.clock) if control is not None
            else RecordedControl(self.clock, scenario.schedule.deliveries) if scenario.schedule.deliveries
            else None)
        self.network.control = self.control
        self.fake_nodes = FakeNodes(scenario)
        emit = self.recorder.emit
        tie_break = self.faults.tie_break if self.faults is not None and self.faults.shuffle_ties else None
        self.workers = [SimWorker(self, runtime.build_worker(r, self.layout, self.fake_nodes, tie_break))
                        for r in range(self.layout.num_ranks)]
        self.conductor = runtime.build_conductor(
            self.layout, lambda n: self.streams.choice_index("placement", n))
        self.client = runtime.build_client()
        # read once the runtime is built: a runtime may have something to say about this layout
        self.notes = tuple(scenario.notes) + tuple(runtime.notes)
        self.workload = Workload(scenario)
        self.stalls = Stalls(self, self.client, emit)
        #: rid -> the event its client process waits on
        self._done: dict[str, simpy.Event] = {}
        for w in self.workers:
            self.network.connect(w.rank, w.deliver)
        self.network.connect(CONDUCTOR_ID, self._conductor_deliver)
        self.network.connect(CLIENT_ID, self._client_deliver)
        #: (instance, leader batch number) -> [ranks arrived, the event that fires when all have]
        self._collectives: dict[tuple[tuple[int, ...], int], list[Any]] = {}

    @property
    def outcomes(self) -> RidMap[str]:
        return RidMap((rid, o) for rid, o in self.workload.outcomes.items() if o)

    def collective(self, instance: tuple[int, ...], number: int) -> simpy.Event:
        """The rendezvous of a lockstep batch: it fires when every rank of the instance has
        started the batch (the collectives inside a TP forward hold each rank until then)."""
        key = (instance, number)
        entry = self._collectives.get(key)
        if entry is None:
            entry = self._collectives[key] = [0, self.env.event()]
        entry[0] += 1
        met: simpy.Event = entry[1]
        if entry[0] == len(instance):
            del self._collectives[key]
            if self.control is not None:
                self.control.joined(instance)
            met.succeed()
        return met

    # -- the clock and the transport -----------------------------------------------------------

    def now(self) -> float:
        return self.env.now

    def send_all(self, src: int, sends: list[Send]) -> None:
        self.network.send_all(src, sends, self.clock.now())

    def _conduct(self, stimulus: Any) -> None:
        eff = self.conductor.handle_stimulus(stimulus, self.env.now)
        if eff.events:
            self.recorder.emit_all(eff.events)
        for rid, outcome in eff.ended:
            self._ended(rid, outcome)
        if eff.sends:
            self.send_all(CONDUCTOR_ID, eff.sends)

    def _conductor_deliver(self, tick: Tick) -> None:
        self._conduct(Arrived(msg=tick.msg))

    def _client_deliver(self, tick: Tick) -> None:
        self._client(Arrived(msg=tick.msg))

    def _client(self, stimulus: Any) -> None:
        eff = self.client.handle_stimulus(stimulus, self.env.now)
        if eff.events:
            self.recorder.emit_all(eff.events)
        if eff.sends:
            self.send_all(CLIENT_ID, eff.sends)
        for at, rid in eff.alarms:
            timer = self.env.timeout(max(0.0, at - self.env.now))
            timer.callbacks.append(partial(self._ring, rid))

    def _ring(self, rid: str, _event: Any) -> None:
        """A client alarm set for `rid` went off."""
        self._client(Alarm(rid=rid))

    def abort(self, rid: str, outcome: str) -> None:
        self._conduct(Abort(rid=rid, outcome=outcome))

    def blocked(self, asks: Sequence[RequestPosition]) -> dict[str, list[ev.BlockedNode]]:
        out: dict[str, list[ev.BlockedNode]] = {}
        for p in asks:
            assert p.position is not None
            nodes = out[p.rid] = []
            for r in p.position.ranks:
                nodes.extend(self.workers[r].loop.blocked(p.rid, p.position))
        return out

    def positions(self, rids: Iterable[str]) -> list[RequestPosition]:
        position = self.conductor.stall_position
        return [RequestPosition(rid=rid, position=position(rid)) for rid in rids]

    # -- workload: the core's closed loop, one simpy process per client -------------------------

    def _workload(self) -> Generator[simpy.Event, Any, None]:
        env = self.env
        workload = self.workload
        for phase in range(len(workload.phases)):

            def client(phase: int = phase) -> Generator[simpy.Event, Any, None]:
                while (sub := workload.issue(phase)) is not None:
                    done = self._done[sub.rid] = env.event()
                    self._conduct(Submit(rid=sub.rid, kind=sub.kind))
                    yield done

            procs = [env.process(client()) for _ in range(workload.clients(phase))]
            if procs:
                yield env.all_of(procs)

    def _ended(self, rid: str, outcome: str) -> None:
        self.workload.end(rid, outcome)
        self._done.pop(rid).succeed(outcome)

    # -- running ------------------------------------------------------------------------------

    def run(self) -> RunResult:
        # A kept trace holds every event alive, so the cyclic collector would rescan a growing heap
        # over and over; nothing the run creates needs it before the end.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run()
        finally:
            if enabled:
                gc.enable()

    def _run(self) -> RunResult:
        env = self.env
        env.process(self._workload())
        for w in self.workers:
            env.process(rank_main(w.loop, w))
        if self.faults is not None:
            for rank, at in sorted(self.faults.crashes.items()):
                env.process(self._crash(self.workers[rank], at))
        conductor = self.conductor
        clock = self.clock
        guard = self.guard
        handled = 0
        cut: set[str] = set()
        # No deadline falls before `horizon`: a request's deadline is its submission time plus
        # the one timeout, so deadlines never come earlier than the earliest one seen, and the
        # conductor is asked again only once the next event lies beyond it.
        horizon = -INF
        while True:
            # Events up to the horizon, without a question per event (`Clock.step_until`).
            if clock.step_until(horizon, guard, handled):
                rid = guard.runaways[handled].rid
                handled += 1
                if rid in cut or rid not in conductor.open_requests():
                    break  # torn down already, and its work still grows: stop here
                cut.add(rid)
                self.stalls.stall(RUNAWAY, self.positions([rid]))
                horizon = -INF
                continue
            t = clock.next_time()
            control = self.control
            if control is not None and (t is None or t > horizon_of(conductor, t)) and control.release_one():
                # At rest, or about to give up on a request, with messages held: the schedule
                # lets one go (a delay is never a hang; `deliveries`).
                horizon = -INF
                continue
            if t is None:
                # Nothing left to happen: whatever has not ended never will.
                unfinished = conductor.unfinished()
                if not unfinished:
                    break
                self.stalls.stall(QUIESCENCE, self.positions(unfinished))
                horizon = -INF
                continue
            deadline = conductor.next_deadline()
            if deadline is not None and deadline[0] < t:
                if deadline[0] > env.now:
                    clock.advance(deadline[0])
                self.stalls.stall(TIMEOUT, self.positions([deadline[1]]))
                horizon = -INF
                continue
            horizon = t if deadline is None else deadline[0]
        self.recorder.emit(run_ended(env.now, [rank_final(w.loop) for w in self.workers],
                                     conductor_final(conductor)))
        return RunResult(self.scenario, self.runtime_name, self.layout, self.recorder, env.now,
                         self.outcomes, notes=self.notes)

    def so_far(self) -> RunResult:
        """Where an unfinished run stands (it was stopped): the requests submitted so far, each
        with its outcome, or "running"."""
        return RunResult(self.scenario, self.runtime_name, self.layout, self.recorder, self.env.now,
                         RidMap((rid, o or "running") for rid, o in self.workload.outcomes.items()),
                         notes=self.notes)

    def _crash(self, worker: SimWorker, at: float) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(at)
        worker.stopped = True


def horizon_of(conductor: Any, t: float) -> float:
    """The next request deadline, or `t` when none falls before it."""
    deadline = conductor.next_deadline()
    return t if deadline is None or deadline[0] >= t else deadline[0]


class SimWorker:
    """A rank in virtual time: the `WorkerPort` of a `WorkerLoop` run by a simpy process."""

    def __init__(self, sim: Simulation, loop: WorkerDoor) -> None:
        self.sim = sim
        self.env = sim.env
        self.loop = loop
        self.rank = loop.rank
        self.inbox: list[Any] = []
        #: what the idle rank waits on, until the first message arrives
        self._wake: Tick | None = None
        #: queue a run or a wait, and a wake-up, as simpy would (`Clock.after`, `Clock.wake`)
        self._after = sim.clock.after
        self._wake_up = sim.clock.wake
        #: the port's ``now()``: the simulated time, read in C (`Clock.now`)
        self.now = sim.clock.now
        #: set by a crash fault: the rank finishes nothing more and loses what is sent to it
        self.stopped = False
        self._duration_of = sim.fake_nodes.duration
        self._emit_all = sim.recorder.emit_all
        self._send_all = sim.network.send_all
        faults = sim.faults
        self._faults = faults
        self._shuffle = faults is not None and faults.shuffle_ties

    def deliver(self, tick: Tick) -> None:
        """A message arrived (`Network` calls this with its `Tick`)."""
        if self.stopped:
            return
        self.inbox.append(tick.msg)
        wake = self._wake
        if wake is not None:  # idle: the first arrival wakes the rank (as `Event.succeed` would)
            self._wake = None
            self._wake_up(wake)

    # -- WorkerPort ---------------------------------------------------------------------------

    def receive(self, handle: Any) -> None:
        if self.inbox:
            msgs, self.inbox = self.inbox, []
            if self._shuffle and self._faults is not None:
                msgs = self._faults.interleave(msgs)
            handle(msgs)

    def apply(self, effects: Effects) -> None:
        if effects.events:
            self._emit_all(effects.events)
        if effects.sends:
            self._send_all(self.rank, effects.sends, self.now())

    def chosen(self, batch: Batch | None) -> None:
        pass

    def idle(self, timeout: float | None = None) -> Tick:
        wake = self._wake = Tick([])
        if timeout is not None:
            alarm = Tick([lambda _tick: self._alarm(wake)])
            self._after(timeout, alarm)
        return wake

    def _alarm(self, wake: Tick) -> None:
        """An idle wait's `timeout` ran out: wake the rank unless a message did already."""
        if self._wake is wake:
            self._wake = None
            self._wake_up(wake)

    def wait(self, seconds: float) -> Tick:
        tick = Tick([])
        self._after(seconds, tick)
        return tick

    def duration(self, batch: Batch) -> float:
        duration = self._duration_of(batch.node, batch.walk, len(batch.rids))
        if self._faults is not None:
            duration = self._faults.service_time(self.rank, duration)
        return duration

    def collective(self, batch: Batch) -> simpy.Event:
        return self.sim.collective(batch.instance, batch.collective)

    def execute(self, batch: Batch, duration: float) -> Tick:
        tick = Tick([])  # what `env.timeout(duration)` would schedule, made in C
        self._after(duration, tick)
        return tick

    def finished(self, effects: Effects) -> None:
        self.apply(effects)
