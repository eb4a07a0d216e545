"""Links between ranks, the conductor and the client: latency plus size over bandwidth, FIFO.

Each ordered (sender, receiver) pair is one link that carries one message at a time: a message
starts when the link is free, takes ``bytes / bandwidth`` to transmit and ``latency`` to arrive.
Arrival times on one link therefore never decrease, which gives mstar's only ordering guarantee
(FIFO per sender-receiver pair, reference/mstar_semantics.md section 7.1); messages on different
links may overtake each other. Delivery is a `Tick` scheduled on the simpy environment,
whose callback hands the message over: ``deliver(msg, arrival)`` (a `functools.partial` of the
handler, so an arrival runs no frame of ours before the handler's).

With a perturbation plan (`simharness.engine.faults`) a message may get extra latency, arrive
twice or not at all; it still never overtakes an earlier message of its link.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec
import simpy
from simpy.events import NORMAL

if TYPE_CHECKING:
    from simharness.engine.faults import Perturbations

#: Bytes of framing and metadata in every message (request info, edge descriptors).
CONTROL_BYTES = 512


class Tick(msgspec.Struct):
    """The least event simpy's ``Environment.step`` and ``Process._resume`` need: its
    callbacks, that it succeeded, and its value (None). Made in C (a Struct), where a simpy
    `Timeout` or `Event` runs a Python constructor; scheduled by ``Environment.schedule`` exactly
    as a timeout of the same delay (priority NORMAL, the environment's event counter), so the
    order of events is the same. Used for a message arriving (nothing waits on it: its one
    callback hands the message over), a batch running and an idle rank's wake-up (a process
    waits on those: simpy appends its resume to the callbacks)."""

    callbacks: list[Callable[[Any], None]] | None
    _ok = True
    _value = None


class Network:
    def __init__(self, env: simpy.Environment, latency_s: float, bandwidth_bytes_per_s: float,
                 faults: Perturbations | None = None) -> None:
        self.env = env
        self._schedule = env.schedule
        self.latency = latency_s
        self.bandwidth = bandwidth_bytes_per_s
        self._free_at: dict[tuple[int, int], float] = {}
        #: the perturbation plan, or None
        self.faults = faults
        self._last_arrival: dict[tuple[int, int], float] = {}

    def send(self, src: int, dst: int, payload_bytes: int, deliver: Callable[[Any, Any], None],
             msg: Any, now: float | None = None) -> float:
        """Schedule `deliver(msg, event)` at the arrival time; return that time. `now`: the
        current time, when the caller has it at hand."""
        env = self.env
        if now is None:
            now = env.now
        key = (src, dst)
        start = self._free_at.get(key, 0.0)
        if start < now:
            start = now
        end = start + (payload_bytes + CONTROL_BYTES) / self.bandwidth
        self._free_at[key] = end
        arrival = end + self.latency
        if self.faults is not None:
            return self._send_perturbed(key, src, dst, arrival, deliver, msg)
        self._schedule(Tick([partial(deliver, msg)]), NORMAL, arrival - now)
        return arrival

    def _send_perturbed(self, key: tuple[int, int], src: int, dst: int, arrival: float,
                        deliver: Callable[[Any, Any], None], msg: Any) -> float:
        copies, extra = self.faults.on_send(src, dst, msg)
        arrival += extra
        now = self.env.now
        last = self._last_arrival.get(key, 0.0)
        if arrival < last:
            arrival = last  # FIFO per link: never overtake an earlier message
        delay = arrival - now
        # simpy schedules at now + delay, which floating point may round one ulp below `last`
        # (held to the same time, a later message would then arrive first): nudge it up.
        while now + delay < last:
            delay = math.nextafter(delay, math.inf)
        self._last_arrival[key] = now + delay
        for _ in range(copies):
            self._schedule(Tick([partial(deliver, msg)]), NORMAL, delay)
        return arrival
