"""`Tick`: the one event type the simulation makes itself, for the three events of a forward's
cycle that need nothing more from simpy than to be scheduled and stepped: a message arriving
(`network.Network`), a batch running and an idle rank waking (`simulation.SimWorker`).

It relies on what simpy 4.1's ``Environment.step`` and ``Process._resume`` read of an event
(``callbacks``, ``_ok``, ``_value``), and its makers push it onto simpy's queue as
``Environment.schedule`` does (``(now + delay, priority, next(env._eid), event)``, without that
call per event): the reasons simpy is pinned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec


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
