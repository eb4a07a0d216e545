"""The forward log: every forward of a run, per request, kept once for the checks that read it.

The forwards check keeps it (`RunSetup.forwards`); the expect check reads its counts from it,
and the run summary and console show it, kept trace or not.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from simharness import events as ev
from simharness.ridmap import RidMap

Key = tuple[str, str, int, str]  # walk, node, rank, rid
Place = tuple[str, str, int]  # walk, node, rank
#: a request's forwards: place -> (pass, counter) of each forward, in the order they ran
Log = dict[Place, list[tuple[int, int | None]]]


class ForwardLog:
    """Every forward of a run, per request, flat in finished requests.

    While a request runs its forwards are appended to lists; when it ends (`close`) they become
    one tuple, interned: the thousands of requests of a soak that ran alike share one copy, so
    what a finished request costs is one slot of a `RidMap`. A forward for a closed request (a
    stray after the end) reopens it.
    """

    def __init__(self) -> None:
        self._open: dict[str, Log] = {}
        self._closed: RidMap[tuple[tuple[Place, tuple[tuple[int, int | None], ...]], ...]] = RidMap()
        self._interned: dict[Any, Any] = {}

    def add(self, e: ev.Forward) -> None:
        log = self._open.get(e.rid)
        if log is None:
            log = self._reopen(e.rid)
        place = (e.walk, e.node, e.rank)
        runs = log.get(place)
        if runs is None:
            runs = log[place] = []
        runs.append((e.pass_no, e.counter))

    def close(self, rid: str) -> None:
        log = self._open.pop(rid, None)
        if log is not None:
            frozen = tuple(sorted((place, tuple(runs)) for place, runs in log.items()))
            self._closed[rid] = self._interned.setdefault(frozen, frozen)

    def _reopen(self, rid: str) -> Log:
        frozen = self._closed.pop(rid, ())
        log = self._open[rid] = {place: list(runs) for place, runs in frozen}
        return log

    def frozen(self, rid: str) -> tuple[tuple[Place, tuple[tuple[int, int | None], ...]], ...] | None:
        """A request's forwards as the interned tuple that requests which ran alike share (None
        if it ran none), closing its log first if it is open: for judging once the run is over
        (a request's stray forwards after its end reopen its log)."""
        self.close(rid)
        return self._closed.get(rid)

    def tables(self) -> tuple[RidMap[Any], dict[str, Log]]:
        """The finished requests' table and the open ones' (for `names_in_order`)."""
        return self._closed, self._open

    def rids(self) -> list[str]:
        return [*self._closed, *self._open]

    def of(self, rid: str) -> Log | dict[Place, tuple[tuple[int, int | None], ...]]:
        """One request's forwards (read only)."""
        log = self._open.get(rid)
        return log if log is not None else dict(self._closed.get(rid, ()))

    def counts(self) -> Iterator[tuple[Key, int]]:
        """(walk, node, rank, rid) -> number of forwards, for every place."""
        for rid in self.rids():
            for (walk, node, rank), runs in self.of(rid).items():
                yield (walk, node, rank, rid), len(runs)

    def counters(self) -> Iterator[tuple[Key, list[int | None]]]:
        """(walk, node, rank, rid) -> loop counters in the order they ran, for every place."""
        for rid in self.rids():
            for (walk, node, rank), runs in self.of(rid).items():
                yield (walk, node, rank, rid), [c for _, c in runs]


def collect_forwards(events: Iterable[Any]) -> dict[Key, list[int | None]]:
    """Loop counters per (walk, node, rank, request), from a run's events."""
    out: dict[Key, list[int | None]] = defaultdict(list)
    for e in events:
        if type(e) is ev.Forward:
            out[(e.walk, e.node, e.rank, e.rid)].append(e.counter)
    return out


def counters_of(log: ForwardLog | None, events: Iterable[Any]) -> dict[Key, list[int | None]]:
    """Loop counters per (walk, node, rank, request) of a run: from the forwards check's log
    (every judged run, on either driver, has one), else from the events (a run cut short)."""
    if log is not None:
        return dict(log.counters())
    return collect_forwards(events)
