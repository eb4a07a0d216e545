"""What every check shares: the `Violation` record, the run context, and small text helpers.

A check is an observer (Trio's ``Instrument`` shape): it may define ``on_<Event>`` methods that
the recorder calls as events happen, and it must define ``finish(ctx)`` returning its
violations. Checks never change what runs. Each has a stable ``name`` used in
``violations[].check``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from simharness.placement.layout import Layout
from simharness.ridmap import rid_number
from simharness.scenario.model import Scenario


@dataclass
class Violation:
    check: str
    message: str
    walk: str | None = None
    node: str | None = None
    rank: int | None = None
    request: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.check}
        for key in ("walk", "node", "rank", "request"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["message"] = self.message
        out.update(self.details)
        return out

    def sort_key(self) -> tuple:
        return (*rid_order(self.request or ""), self.walk or "", self.node or "",
                self.rank if self.rank is not None else -1)


@dataclass
class RunContext:
    """What a check may consult at the end of a run besides the events it observed."""

    scenario: Scenario
    layout: Layout
    outcomes: Mapping[str, str]


class Check(Protocol):
    name: str

    def finish(self, ctx: RunContext) -> list[Violation]: ...


def counters_text(counters: Iterable[int | None]) -> str:
    """``[0, 1, ..., 48, 0]`` as ``0..48, 0``: runs of consecutive counters collapse."""
    items = list(counters)
    parts: list[str] = []
    i = 0
    while i < len(items):
        c = items[i]
        if c is None:
            parts.append("-")
            i += 1
            continue
        j = i
        while j + 1 < len(items) and items[j + 1] is not None and items[j + 1] == items[j] + 1:
            j += 1
        parts.append(f"{c}..{items[j]}" if j - i >= 2 else ", ".join(str(x) for x in items[i:j + 1]))
        i = j + 1
    return ", ".join(parts)


def and_join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def rid_order(rid: str) -> tuple[int, str]:
    """Sort key for request names: canonical ``r<n>`` by number, any other name first, by text.

    The number comes from `rid_number`, the one parser of request names, so every table that
    orders names agrees with `RidMap` on which names are numbered (``r²`` and ``r01`` are not).
    """
    n = rid_number(rid)
    return (-1 if n is None else n, rid)
