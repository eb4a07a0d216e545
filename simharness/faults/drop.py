"""``drop``: one message never arrives.

Not tolerated: ZMQ between live peers never loses a message, and mstar has no defence against
it, so every runtime degrades under it.
"""

from __future__ import annotations

from typing import Any

from simharness.faults.message import MessageFault, MessageFaultSpec
from simharness.records import compared_without


@compared_without("path")
class DropFault(MessageFaultSpec, tag="drop", frozen=True, kw_only=True):
    """``{kind: drop, message, from, to, nth}``."""


class Drop(MessageFault):
    name = "drop"
    record = DropFault
    tolerated = False
    order = 30
    real_refusal = "real sockets deliver every message, and it cannot lose one"

    def effect(self, fault: Any, copies: int, extra_s: float) -> tuple[int, float]:
        return 0, extra_s


KIND = Drop()
