"""``duplicate``: one message arrives twice in a row.

Not tolerated: ZMQ between live peers never delivers a message twice, and mstar has no defence
against it, so every runtime degrades under it.
"""

from __future__ import annotations

from typing import Any

from simharness.faults.message import MessageFault, MessageFaultSpec
from simharness.records import compared_without


@compared_without("path")
class DuplicateFault(MessageFaultSpec, tag="duplicate", frozen=True, kw_only=True):
    """``{kind: duplicate, message, from, to, nth}``."""


class Duplicate(MessageFault):
    name = "duplicate"
    record = DuplicateFault
    tolerated = False
    order = 20
    real_refusal = "real sockets carry each message once, and it cannot send one twice"

    def effect(self, fault: Any, copies: int, extra_s: float) -> tuple[int, float]:
        # a message an earlier rule dropped stays dropped
        return (max(copies, 2) if copies else 0), extra_s


KIND = Duplicate()
