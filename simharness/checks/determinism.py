"""`determinism`: the same scenario and seed give the same trace digest.

Not an observer: on request (``--check-determinism``) the runner runs the scenario twice and
hands two that differ here (`DeterminismCheck.differ`), which names the first event where they part.
Its one kind is ``other``.
"""

from __future__ import annotations

from typing import Any

from simharness.checks.base import Check, Violation
from simharness.trace import canonical, event_bytes


class DeterminismCheck(Check):
    name = "determinism"
    priority = 100
    kinds = ("other",)

    @classmethod
    def differ(cls, digest: str, second: str, a: list[Any], b: list[Any]) -> Violation:
        """The violation of two runs whose digests (`digest`, `second`) differ; `a` and `b`
        their events, to find the first difference."""
        first_diff = _first_difference(a, b)
        return Violation(
            cls.name,
            f"the same scenario and seed gave two trace digests ({digest[:19]}... and "
            f"{second[:19]}...); first difference at event {first_diff}: "
            f"{_shown(a, first_diff)} vs {_shown(b, first_diff)}",
            details={"first_difference": first_diff}, kind="other")


def _shown(events: list[Any], i: int) -> str:
    """Event `i` as one line of text, shortened, or that the run had ended by then."""
    if i >= len(events):
        return "(no event: the run had ended)"
    text = canonical(events[i])
    return text if len(text) <= 200 else text[:199] + "…"


def _first_difference(a: list[Any], b: list[Any]) -> int:
    # Compare what the digest hashes: events hold signals, which compare by identity.
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if event_bytes(x) != event_bytes(y):
            return i
    return min(len(a), len(b))
