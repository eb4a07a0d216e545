"""What every check shares: the `Violation` record, the run context, and small text helpers.

A check is an observer (Trio's ``Instrument`` shape): it may define ``on_<Event>`` methods that
the recorder calls as events happen, and it must define ``finish(ctx)`` returning its
violations. Checks never change what runs. Each has a stable ``name`` used in
``violations[].check``. A check that judges each request on its own can judge it once it is
over (`RequestsOver`) and keep only the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from simharness import events as ev
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


def renamed(found: Iterable[Violation], rid: str) -> list[Violation]:
    """`found`, violations of one request, as they read for request `rid` instead: for a check
    that judges a request which ran exactly as an earlier one once (its messages do not name
    the request). Each is a new record with a copy of its details."""
    return [Violation(v.check, v.message, v.walk, v.node, v.rank, rid, dict(v.details))
            for v in found]


@dataclass
class RunContext:
    """What a check may consult at the end of a run besides the events it observed."""

    scenario: Scenario
    layout: Layout
    outcomes: Mapping[str, str]
    #: the driver's runaway guard's finds (`simharness.drive.runaway.Runaway`: rid, walk, node,
    #: rank, t, pass_no, forwards, explained, limit, cycle, passes), in the order they tripped
    runaways: Sequence[Any] = ()


class RequestsOver:
    """When nothing more of a request is to come: it ended and every rank it was placed on
    removed it.

    `RequestEnded` alone is too early: a rank tears a request down only after the batch it has
    in flight completes, so forwards, chunks and batches of an ended request still come until
    that rank's `Removed` (a stray pass after a loop ended, a chunk after the final one). A rank
    of the placement that never held the request never removes it; such a request is over only
    at the end of the run. The outcome given is the one of the request's `RequestEnded`, which
    is the run's outcome for it (the run records the first end, and a request ends once). A rank
    that removed a request sends nothing more of it; should one, a check judges what came after
    on its own at the end of the run.

    What it keeps is per running request, dropped when the request is over.
    """

    __slots__ = ("_waiting", "_outcome")

    def __init__(self) -> None:
        #: rid -> ranks of its placement that have not removed it yet
        self._waiting: dict[str, set[int]] = {}
        #: rid -> its outcome, once it ended and until it is over
        self._outcome: dict[str, str] = {}

    def admitted(self, e: ev.Admitted) -> None:
        self._waiting[e.rid] = {r for _wg, ranks in e.placement for r in ranks}

    def ended(self, e: ev.RequestEnded) -> str | None:
        """The request's outcome if it is over now, else None."""
        self._outcome[e.rid] = e.outcome
        return self._over(e.rid)

    def removed(self, e: ev.Removed) -> str | None:
        """The request's outcome if this removal makes it over, else None."""
        waiting = self._waiting.get(e.rid)
        if waiting is None:
            return None
        waiting.discard(e.rank)
        return self._over(e.rid)

    def _over(self, rid: str) -> str | None:
        outcome = self._outcome.get(rid)
        if outcome is None or self._waiting.get(rid):
            return None
        del self._outcome[rid]
        self._waiting.pop(rid, None)
        return outcome


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
        j, last = i, c
        while j + 1 < len(items) and (nxt := items[j + 1]) is not None and nxt == last + 1:
            j, last = j + 1, nxt
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
