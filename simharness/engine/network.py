"""Links between ranks, the conductor and the client: latency plus size over bandwidth, FIFO.

Each ordered (sender, receiver) pair is one link that carries one message at a time: a message
starts when the link is free, takes ``bytes / bandwidth`` to transmit and ``latency`` to arrive.
Arrival times on one link therefore never decrease, which gives mstar's only ordering guarantee
(FIFO per sender-receiver pair, reference/mstar_semantics.md section 7.1); messages on different
links may overtake each other. Delivery is a simpy timeout whose callback hands the message over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

#: Bytes of framing and metadata in every message (request info, edge descriptors).
CONTROL_BYTES = 512


class Network:
    def __init__(self, env: simpy.Environment, latency_s: float, bandwidth_bytes_per_s: float) -> None:
        self.env = env
        self.latency = latency_s
        self.bandwidth = bandwidth_bytes_per_s
        self._free_at: dict[tuple[int, int], float] = {}
        self.messages = 0
        self.bytes = 0

    def send(self, src: int, dst: int, payload_bytes: int, deliver: Callable[[Any], None], msg: Any) -> float:
        """Schedule `deliver(msg)` at the arrival time; return that time."""
        env = self.env
        now = env.now
        key = (src, dst)
        start = self._free_at.get(key, 0.0)
        if start < now:
            start = now
        end = start + (payload_bytes + CONTROL_BYTES) / self.bandwidth
        self._free_at[key] = end
        arrival = end + self.latency
        self.messages += 1
        self.bytes += payload_bytes
        ev = env.timeout(arrival - now, msg)
        ev.callbacks.append(lambda e: deliver(e.value))
        return arrival
