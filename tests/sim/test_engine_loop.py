"""The simulation's own stepping of simpy's queue, and its `Tick` events, behave as simpy's.

`engine.clock.Clock` takes events off the environment's queue itself instead of calling
``Environment.step``; a batch's run, an idle rank's wake-up and a message's arrival are `Tick`
structs instead of simpy `Timeout`s and `Event`s. The digest tests hold both to the order of
events simpy gave before; these tests hold the rest: a failing process still ends the run with
its exception, a `Tick` takes its place among simpy's own events exactly as a timeout of the
same delay would, and no module but the clock reads simpy's private state.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy
from simpy.events import NORMAL

from simharness.engine.clock import Clock, Tick
from simharness.run import simulate
from simharness.runtime.parts import WorkerParts
from simharness.runtime.profiles import MstarPython
from simharness.runtime.worker_loop import WorkerLoop
from simharness.scenario.loader import load_scenario

BAGEL = Path(__file__).resolve().parents[2] / "scenarios" / "bagel_cfg.yaml"


class _Boom(RuntimeError):
    pass


class _FailingLoop(WorkerLoop):
    def _finish(self, batch, now):
        raise _Boom(f"rank {self.rank} cannot finish {batch.node}")


class FailsAtFirstFinish(MstarPython):
    """The worker loop raises when its first batch finishes: its simpy process fails."""

    parts = WorkerParts(worker_loop=_FailingLoop)


def test_a_failing_process_ends_the_run_with_its_exception():
    sc = load_scenario(BAGEL)
    with pytest.raises(_Boom, match="cannot finish") as info:
        simulate(sc, "tests.sim.test_engine_loop:FailsAtFirstFinish", keep_trace=False)
    # As Environment.step raises it: a copy, caused by the process's own exception.
    assert isinstance(info.value.__cause__, _Boom)


def test_a_tick_is_ordered_among_timeouts_as_a_timeout_of_its_delay():
    env = simpy.Environment()
    order: list[str] = []

    def mark(name):
        return lambda _event: order.append(name)

    for i, delay in enumerate([2.0, 1.0, 1.0, 0.0, 2.0, 1.0]):
        name = f"{i}@{delay}"
        if i % 2:
            tick = Tick([mark(name)])
            env.schedule(tick, NORMAL, delay)
        else:
            env.timeout(delay).callbacks.append(mark(name))
    env.run()
    # Time first, then the order they were scheduled in, Tick or Timeout alike.
    assert order == ["3@0.0", "1@1.0", "2@1.0", "5@1.0", "0@2.0", "4@2.0"]


def test_a_process_waits_on_a_tick_and_resumes_with_none():
    env = simpy.Environment()
    got = []

    def proc():
        tick = Tick([])
        env.schedule(tick, NORMAL, 3.0)
        got.append((yield tick))
        got.append(env.now)

    env.process(proc())
    env.run()
    assert got == [None, 3.0]


def test_an_arrival_is_queued_as_environment_schedule_queues_it():
    """`Network.send_all` pushes its arrival onto simpy's queue itself (no `schedule` call per
    message): the entry is the one ``Environment.schedule`` makes for the same delay, time,
    priority and event counter alike, so a simpy whose queue entries change shape fails here
    and not as a moved digest."""
    from simharness.engine.network import Network

    def queue_after(push):
        env = simpy.Environment()
        env.run(until=env.timeout(0.3))  # a clock that is not zero, and a counter in use
        env.timeout(0.1)
        push(env)
        env.timeout(0.2)
        return [(t, prio, eid, type(ev).__name__) for t, prio, eid, ev in sorted(env._queue)]

    delays = []

    def by_network(env):
        net = Network(Clock(env), 10e-6, 1e9)
        net.connect(1, lambda tick: None)
        for n in (0, 4096, 1 << 20):
            delays.append(net.send(0, 1, n, "m", env.now) - env.now)

    ours = queue_after(by_network)
    theirs = queue_after(lambda env: [env.schedule(Tick((print,)), NORMAL, d) for d in delays])
    assert ours == theirs and [e[3] for e in ours].count("Tick") == 3


def test_the_clock_queues_as_simpy_queues():
    """`Clock.at`, `after` and `wake` make the entries ``Environment.schedule`` makes for a timeout
    of that delay and ``Event.succeed`` for an event that fires now."""

    def queue_after(push):
        env = simpy.Environment()
        env.run(until=env.timeout(0.3))
        env.timeout(0.1)
        push(env)
        return [(t, prio, eid) for t, prio, eid, _ in sorted(env._queue)]

    def ours(env):
        clock = Clock(env)
        clock.at(env.now + 0.2, Tick([]))
        clock.after(0.5, Tick([]))
        clock.wake(Tick([]))

    def theirs(env):
        env.schedule(Tick([]), NORMAL, 0.2)
        env.timeout(0.5)
        env.event().succeed()

    assert queue_after(ours) == queue_after(theirs)


def test_the_clock_steps_to_its_horizon_and_stops_at_a_guard_s_trip():
    env = simpy.Environment()
    clock = Clock(env)
    seen: list[float] = []

    class Guard:
        trips = 0

    def mark(_event):
        seen.append(env.now)
        if env.now == 2.0:
            Guard.trips += 1

    for t in (1.0, 2.0, 3.0, 4.0):
        clock.at(t, Tick([mark]))
    assert clock.step_until(1.5, Guard, 0) is False and seen == [1.0] and clock.next_time() == 2.0
    assert clock.step_until(10.0, Guard, 0) is True and seen == [1.0, 2.0]  # the trip, at once
    assert clock.step_until(10.0, Guard, 1) is False and seen == [1.0, 2.0, 3.0, 4.0]
    assert clock.next_time() is None and clock.now() == 4.0


def test_only_the_clock_touches_simpy_s_private_state():
    """Every read or write of simpy's internals is in `engine/clock.py`, beside the reason simpy
    is pinned."""
    import ast

    pkg = Path(__file__).resolve().parents[2] / "simharness"
    private = {"_queue", "_eid", "_now", "_defused", "_ok"}
    bad = [f"{path.relative_to(pkg)}:{n.lineno}: {n.attr}" for path in pkg.rglob("*.py")
           if path != pkg / "engine" / "clock.py"
           for n in ast.walk(ast.parse(path.read_text()))
           if isinstance(n, ast.Attribute) and n.attr in private]
    assert bad == []
