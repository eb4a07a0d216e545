"""Links between ranks, the conductor and the client: latency plus size over bandwidth, FIFO.

Each ordered (sender, receiver) pair is one link that carries one message at a time: a message
starts when the link is free, takes ``bytes / bandwidth`` to transmit and ``latency`` to arrive.
Arrival times on one link therefore never decrease, which gives mstar's only ordering guarantee
(FIFO per sender-receiver pair, reference/mstar_semantics.md section 7.1); messages on different
links may overtake each other. Delivery is a `Tick` that carries the message, scheduled on the
simpy environment, whose one callback is the receiver's handler: ``deliver(tick)``, which reads
``tick.msg`` (the callbacks are one tuple per handler, made once: an arrival allocates nothing
but its `Tick`).

With a perturbation plan (`simharness.engine.faults`) a message may get extra latency, arrive
twice or not at all; it still never overtakes an earlier message of its link.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from heapq import heappush
from typing import TYPE_CHECKING, Any

import simpy
from simpy.events import NORMAL

from simharness.engine.tick import Tick

if TYPE_CHECKING:
    from simharness.engine.faults import Perturbations

#: Bytes of framing and metadata in every message (request info, edge descriptors).
CONTROL_BYTES = 512


class Network:
    def __init__(self, env: simpy.Environment, latency_s: float, bandwidth_bytes_per_s: float,
                 faults: Perturbations | None = None) -> None:
        self.env = env
        # An arrival is pushed onto simpy's queue here, as ``Environment.schedule`` would push it
        # (time, priority, the environment's event counter, event), without a Python call per
        # message: see `engine.tick`. Its time is ``now + delay``, as `schedule` computes it, so
        # the rounding is the same.
        self._queue = env._queue
        self._eid = env._eid
        self.latency = latency_s
        self.bandwidth = bandwidth_bytes_per_s
        self._free_at: dict[tuple[int, int], float] = {}
        #: the perturbation plan, or None
        self.faults = faults
        self._last_arrival: dict[tuple[int, int], float] = {}
        #: handler -> the callbacks of its arrivals, ``(handler,)``
        self._callbacks: dict[Callable[[Tick], None], tuple[Callable[[Tick], None]]] = {}

    def send(self, src: int, dst: int, payload_bytes: int, deliver: Callable[[Tick], None],
             msg: Any, now: float | None = None) -> float:
        """Schedule `deliver(tick)` at the arrival time, `tick.msg` being `msg`; return that
        time. `now`: the current time, when the caller has it at hand."""
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
        callbacks = self._callbacks.get(deliver)
        if callbacks is None:
            callbacks = self._callbacks[deliver] = (deliver,)
        if self.faults is not None:
            return self._send_perturbed(key, src, dst, arrival, callbacks, msg)
        heappush(self._queue, (now + (arrival - now), NORMAL, next(self._eid), Tick(callbacks, msg)))
        return arrival

    def _send_perturbed(self, key: tuple[int, int], src: int, dst: int, arrival: float,
                        callbacks: tuple[Callable[[Tick], None]], msg: Any) -> float:
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
            heappush(self._queue, (now + delay, NORMAL, next(self._eid), Tick(callbacks, msg)))
        return arrival
