"""The simulation's clock: simpy's environment, fed and stepped by hand. The one module that
reads or writes simpy's private state.

The simulation keeps simpy's environment (its processes, `Event`, ``all_of``, ``run(until=)``) but
does the two hottest things itself: it puts the three events of a forward's cycle on simpy's
queue (a message arriving, a batch running, an idle rank waking: a `Tick` each, made in C, where
``Environment.schedule`` is a Python call per event and a `Timeout` a Python constructor), and it
takes events off the queue in its own loop (`Clock.step_until`), without a call to ``peek`` and
one to ``step`` per event (0.75% of a forward's instructions).

**Why simpy is pinned** (``simpy==4.1.2`` in pyproject.toml): this module relies on what simpy
4.1 keeps private, and a release may change any of it:

* ``Environment._queue``: a heap of ``(time, priority, event id, event)`` entries, which
  ``schedule`` pushes and ``step`` pops;
* ``Environment._eid``: the counter (``itertools.count``) that numbers the entries, so that
  events due at one time run in the order they were queued;
* ``Environment._now``: the clock, which ``step`` sets from the entry it pops (the public ``now``
  is a Python property over it);
* what ``step`` and ``Process._resume`` read of an event: ``callbacks`` (set to None once it is
  processed), ``_ok``, ``_value``, and ``_defused`` on a failure that was handled.

Every digest test holds the loop to the order of events ``step`` gave, and
`tests/sim/test_engine_loop.py` holds it to ``schedule``'s queue entries and to ``step``'s
handling of a process that fails: a simpy whose internals move fails there first, not as a moved
digest. Owning the heap outright, or going back to ``step``, is a change to this file alone.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from heapq import heapify, heappop, heappush
from typing import Any

import msgspec
import simpy
from simpy.events import NORMAL


class Tick(msgspec.Struct):
    """The least event simpy's ``Environment.step`` and ``Process._resume`` need: its
    callbacks, that it succeeded, and its value (None). Made in C (a Struct), where a simpy
    `Timeout` or `Event` runs a Python constructor; queued exactly as ``Environment.schedule``
    queues a timeout of the same delay (priority NORMAL, the environment's event counter), so
    the order of events is the same. Used for a message arriving (nothing waits on it: its one
    callback hands the message over), a batch running and an idle rank's wake-up (a process
    waits on those: simpy appends its resume to the callbacks).

    Tracked by the cyclic collector, unlike messages and signals: its callbacks reach the
    worker, which reaches the environment's queue, which holds the tick; a run that ends with
    ticks still queued leaves that cycle for the collector to free."""

    #: a list where a process may wait on it (simpy appends its resume), else a tuple
    callbacks: list[Callable[[Any], None]] | tuple[Callable[[Any], None], ...] | None
    #: the message an arrival hands over
    msg: Any = None
    _ok = True
    _value = None


class Clock:
    """One simpy environment's queue and clock, as the simulation drives them."""

    __slots__ = ("env", "_queue", "_eid", "now")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._queue: list[Any] = env._queue
        self._eid = env._eid
        #: the current time, read in C (``Environment.now`` is a Python property over ``_now``;
        #: a rank asks several times per batch)
        self.now: Callable[[], float] = partial(getattr, env, "_now")

    def at(self, t: float, event: Any) -> None:
        """Queue `event` to happen at time `t`, as ``Environment.schedule`` queues a timeout
        that ends then (priority NORMAL, the next event id): without its Python call. `t` is
        the caller's ``now + delay``, as `schedule` computes it, so the rounding is the same."""
        heappush(self._queue, (t, NORMAL, next(self._eid), event))

    def at_priority(self, t: float, priority: int, event: Any) -> None:
        """Queue `event` at time `t` behind every event of a lower `priority` at that time (a
        moved delivery, `deliveries.LATE`); among equal priorities, in the order queued."""
        heappush(self._queue, (t, priority, next(self._eid), event))

    def cancel(self, event: Any) -> None:
        """Take a queued `event` off the queue (a timer no longer wanted: left there, it would
        still move the clock on when its time came). Linear in the queue: for the rare caller."""
        queue = self._queue
        for i, entry in enumerate(queue):
            if entry[3] is event:
                queue[i] = queue[-1]
                queue.pop()
                heapify(queue)
                return

    def after(self, delay: float, event: Any) -> None:
        """Queue `event` to happen `delay` from now, as ``Environment.schedule`` queues it
        (`at` of ``now + delay``; the clock read here saves the caller a call)."""
        heappush(self._queue, (self.env._now + delay, NORMAL, next(self._eid), event))

    def wake(self, event: Any) -> None:
        """Queue `event` to happen now, as ``Event.succeed`` queues an event."""
        heappush(self._queue, (self.env._now, NORMAL, next(self._eid), event))

    def next_time(self) -> float | None:
        """When the earliest queued event happens; None when nothing is queued."""
        queue = self._queue
        return queue[0][0] if queue else None

    def advance(self, t: float) -> None:
        """Move the clock on to `t`, when nothing is queued before it (simpy's own ``run``)."""
        self.env.run(until=t)

    def step_until(self, horizon: float, guard: Any = None, handled: int = 0) -> bool:
        """Process queued events, earliest first, while one is due at or before `horizon`:
        what ``Environment.step`` does for each (pop it, advance the clock, run its callbacks,
        raise a failure nothing defused). Stops early, after the event that did it, when
        `guard` (anything with a ``trips`` count) has counted a trip beyond `handled`, and then
        returns True; else False (nothing is queued, or the next event lies beyond `horizon`)."""
        queue = self._queue
        env = self.env
        while queue and queue[0][0] <= horizon:
            env._now, _, _, event = heappop(queue)
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                _raise_failure(event)
            if guard is not None and guard.trips != handled:
                return True
        return False


def _raise_failure(event: simpy.Event) -> None:
    """A failed event nothing defused (a process that raised): raise a copy of its exception
    with it as the cause, as ``Environment.step`` does. A signal that stopped a process
    (`interrupts.Interrupted`, a KeyboardInterrupt) is raised as it is: it is not the process's
    failure but the command's stop, and it carries what the command found so far."""
    if isinstance(event._value, KeyboardInterrupt):
        raise event._value
    exc = type(event._value)(*event._value.args)
    exc.__cause__ = event._value
    raise exc
