"""``delay``: one message arrives later than its link would bring it.

Tolerated: the protocol permits any delay that keeps each link FIFO, which is the one ordering
mstar relies on, and a delayed message keeps it: it holds the later messages of its link behind
it (the simulation's `Network`).
"""

from __future__ import annotations

from typing import Any

from simharness import fields as f
from simharness.faults.base import Draw
from simharness.faults.message import MessageFault, MessageFaultSpec
from simharness.records import compared_without


@compared_without("path")
class DelayFault(MessageFaultSpec, tag="delay", frozen=True, kw_only=True):
    """``{kind: delay, message, from, to, nth, delay_ms}``."""

    #: A delay of 0 would be a fault that does nothing: the default is the smallest fault that
    #: does something.
    delay_ms: float = 1.0


class Delay(MessageFault):
    name = "delay"
    record = DelayFault
    keys = (*MessageFault.keys, "delay_ms")
    tolerated = True
    order = 10
    real_refusal = "real sockets carry each message as it is sent, and it cannot hold one back"

    def parse_effect(self, m: dict[str, Any], path: str) -> dict[str, Any]:
        return {"delay_ms": f.number(m.get("delay_ms", f.default(DelayFault, "delay_ms")),
                                     f.join(path, "delay_ms"), minimum=0,
                                     maximum=f.MAX_SECONDS * 1000, unit="milliseconds")}

    def effect(self, fault: Any, copies: int, extra_s: float) -> tuple[int, float]:
        return copies, extra_s + fault.delay_ms / 1000.0

    def draw_effect(self, draw: Draw) -> dict[str, Any]:
        from hypothesis import strategies as st

        return {"delay_ms": draw(st.sampled_from((0.1, 1.0, 10.0, 100.0)))}


KIND = Delay()
