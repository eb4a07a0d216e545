"""Links between ranks, the conductor and the client: latency plus size over bandwidth, FIFO.

Each ordered (sender, receiver) pair is one link that carries one message at a time: a message
starts when the link is free, takes ``bytes / bandwidth`` to transmit and ``latency`` to arrive.
Arrival times on one link therefore never decrease, which gives mstar's only ordering guarantee
(FIFO per sender-receiver pair, reference/mstar_semantics.md section 7.1); messages on different
links may overtake each other. Delivery is a `Tick` that carries the message, queued on the
simulation's clock (`clock.Clock.at`), whose one callback is the receiving endpoint's handler
(`Network.connect`): ``deliver(tick)``, which reads ``tick.msg`` (the callbacks are one tuple
per endpoint, made once: an arrival allocates nothing but its `Tick`).

With a perturbation plan (`simharness.engine.faults`) a message may get extra latency, arrive
twice or not at all; it still never overtakes an earlier message of its link. Under a delivery
control (`simharness.engine.deliveries`) each message is handed to it at its due time instead
of being queued, and the control queues or holds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from simharness.engine.clock import Clock, Tick
from simharness.runtime.messages import Send

if TYPE_CHECKING:
    from simharness.engine.deliveries import DeliveryControl
    from simharness.engine.faults import Perturbations

#: Bytes of framing and metadata in every message (request info, edge descriptors).
CONTROL_BYTES = 512


class Network:
    def __init__(self, clock: Clock, latency_s: float, bandwidth_bytes_per_s: float,
                 faults: Perturbations | None = None) -> None:
        self.clock = clock
        #: queues an arrival at its time, ``now + delay`` as ``Environment.schedule`` computes it
        #: (so the rounding is the same)
        self._at = clock.at
        self.latency = latency_s
        self.bandwidth = bandwidth_bytes_per_s
        self._free_at: dict[tuple[int, int], float] = {}
        #: the perturbation plan, or None
        self.faults = faults
        self._last_arrival: dict[tuple[int, int], float] = {}
        #: endpoint -> the callbacks of its arrivals, ``(handler,)`` (`connect`)
        self._callbacks: dict[int, tuple[Callable[[Tick], None]]] = {}
        #: a schedule that decides deliveries (`deliveries.DeliveryControl`), or None
        self.control: DeliveryControl | None = None

    def connect(self, endpoint: int, deliver: Callable[[Tick], None]) -> None:
        """Messages to `endpoint` are handed to ``deliver(tick)`` on arrival (`tick.msg`)."""
        self._callbacks[endpoint] = (deliver,)

    def send(self, src: int, dst: int, payload_bytes: int, msg: Any, now: float | None = None) -> float:
        """One message: `send_all` of it alone. Returns its arrival time."""
        return self.send_all(src, (Send(dst, payload_bytes, msg),), self.clock.now() if now is None else now)

    def send_all(self, src: int, sends: Iterable[Send], now: float) -> float:
        """Schedule each `Send`'s arrival at its connected endpoint, in order (a send that names
        its own ``src``, a KV pull, leaves from there); `now` is the current time. Returns the
        last arrival time (0.0 for none).

        The hot path of every message: the link arithmetic is written out here rather than
        called per message (a message is one link's FIFO slot, then latency)."""
        free_at, bandwidth, latency = self._free_at, self.bandwidth, self.latency
        callbacks, at = self._callbacks, self._at
        # perturbed or controlled: the slow path, per message
        slow = self.faults is not None or self.control is not None
        arrival = 0.0
        for s in sends:
            key = (src if s.src is None else s.src, s.dst)
            start = free_at.get(key, 0.0)
            if start < now:
                start = now
            end = start + (s.nbytes + CONTROL_BYTES) / bandwidth
            free_at[key] = end
            arrival = end + latency
            if slow:
                arrival = self._send_perturbed(src, key, arrival, callbacks[s.dst], s.msg, now)
                continue
            at(now + (arrival - now), Tick(callbacks[s.dst], s.msg))
        return arrival

    def _send_perturbed(self, actor: int, key: tuple[int, int], arrival: float,
                        callbacks: tuple[Callable[[Tick], None]], msg: Any, now: float) -> float:
        src, dst = key
        copies, extra = (1, 0.0) if self.faults is None else self.faults.on_send(src, dst, msg)
        arrival += extra
        last = self._last_arrival.get(key, 0.0)
        if arrival < last:
            arrival = last  # FIFO per link: never overtake an earlier message
        delay = arrival - now
        # simpy schedules at now + delay, which floating point may round one ulp below `last`
        # (held to the same time, a later message would then arrive first): nudge it up.
        while now + delay < last:
            delay = math.nextafter(delay, math.inf)
        self._last_arrival[key] = now + delay
        control = self.control
        for _ in range(copies):
            if control is not None:  # the schedule queues it, or holds it
                control.send(actor, key, msg, now + delay, now, callbacks[0])
            else:
                self._at(now + delay, Tick(callbacks, msg))
        return arrival
