"""The runaway guard: work that never stops growing is cut short, on both drivers.

A *runaway* is the opposite of a hang: work that never stops growing (stray loop-backs that keep
a branch cycling after its loop ended). Left alone it runs to the request timeout, at a cost of
seconds of wall time and thousands of symptoms. So the guard counts, per (request, walk, node,
rank), the forwards the graph can explain: the node's forwards per pass (the product of its
enclosing loops' ``max_iters``) times the passes the conductor started for that walk. When the
count passes `RUNAWAY_FACTOR` times that plus `RUNAWAY_SLACK` it records a `Runaway` and bumps
`trips`. It never acts itself: a driver reads `trips` after each step (an integer compare) and
tears the request down (a `Stalled` with reason ``runaway``), or ends the run if the same work
keeps going after that. At the end the driver hands `runaways` to the checks
(`checks.RunContext`), and the liveness check reports each one: the request, the node and rank,
how far past the explained count it ran, and the cycle (the forwards of that request between
the node's last two forwards).

This is run policy, not a check: it lives with the driver core, and a check never steers a run.

What the count keeps stays flat in finished requests: when a request ends its counts, its
passes per walk and its window of recent forwards are frozen into interned tuples (requests that
ran alike share them, and each holds one slot of a `RidMap`) and thawed only if an event for it
comes later, so nothing restarts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from math import prod
from typing import Any

from simharness import events as ev
from simharness.ridmap import RidMap
from simharness.scenario.model import Scenario

#: How many times the explained forwards a (request, walk, node, rank) may run before it counts
#: as a runaway. Generous on purpose: speculation, duplicated messages and dynamic stops add a
#: few forwards, never a multiple; a stray that circulates adds them without end.
RUNAWAY_FACTOR = 4
#: Forwards allowed on top, so a node the graph explains no forward of still gets a few.
RUNAWAY_SLACK = 16
#: Forwards of one request remembered to name the cycle.
_RECENT = 64

Key = tuple[str, str, str, int]  # rid, walk, node, rank


@dataclass
class Runaway:
    """One (request, walk, node, rank) that ran past its explained forwards."""

    t: float
    rid: str
    walk: str
    node: str
    rank: int
    pass_no: int
    forwards: int
    explained: int
    limit: int
    cycle: tuple[str, ...]
    #: passes of the walk the conductor had started by the end of the run (`RunawayGuard.report`)
    passes: int = 0


class _Tally:
    """The runaway count of one (request, walk, node, rank): forwards so far, the count past
    which it trips, and its ``node@rank`` label (shared by every request's window)."""

    __slots__ = ("n", "limit", "label")

    def __init__(self, limit: int, label: str, n: int = 0) -> None:
        self.n = n
        self.limit = limit
        self.label = label


class RunawayGuard:
    """Counts, per (request, walk, node, rank), the forwards the graph explains, and records
    a `Runaway` when one runs past its limit. An observer of the driver's recorder, read by the
    driver after each step; it never acts itself and never changes what runs."""

    def __init__(self, scenario: Scenario | None = None) -> None:
        #: runaways found so far; the driver compares `trips` with what it has handled
        self.runaways: list[Runaway] = []
        self.trips = 0
        self._facts = scenario.walk_facts if scenario is not None else None
        self._per_pass: dict[tuple[str, str], int] = {}
        #: rid -> walk -> passes started, while the request runs
        self._passes: dict[str, dict[str, int]] = {}
        #: rid -> ((walk, passes started), ...) of an ended request
        self._passes_ended: RidMap[tuple[tuple[str, int], ...]] = RidMap()
        #: key -> its runaway count, while the request runs
        self._counts: dict[Key, _Tally] = {}
        self._recent: dict[str, deque[str]] = {}
        #: rid -> the keys of that request in `_counts` (so its end can freeze them)
        self._keys_of: dict[str, list[Key]] = {}
        #: rid -> (((walk, node, rank), count, next trip), ...), recent window) of an ended request
        self._ended: RidMap[tuple[tuple[tuple[tuple[str, str, int], int, int], ...],
                                  tuple[str, ...]]] = RidMap()
        #: one copy of each equal frozen tuple, shared by every ended request that holds it
        self._interned: dict[Any, Any] = {}
        self._labels: dict[tuple[str, int], str] = {}

    def on_WalkStarted(self, e: ev.WalkStarted) -> None:
        passes = self._passes.get(e.rid)
        if passes is None:  # the request's first pass (or a pass after it ended: reopen it)
            passes = self._passes[e.rid] = dict(self._passes_ended.pop(e.rid, ()))
        passes[e.walk] = passes.get(e.walk, 0) + 1

    def _passes_of(self, rid: str, walk: str) -> int:
        passes = self._passes.get(rid)
        if passes is not None:
            return passes.get(walk, 0)
        ended: tuple[tuple[str, int], ...] = self._passes_ended.get(rid, ())
        return dict(ended).get(walk, 0)

    def on_Forward(self, e: ev.Forward) -> None:
        if self._facts is None:
            return
        rid = e.rid
        recent = self._recent.get(rid)
        if recent is None:  # the request's first forward, or one after it ended (thaw it)
            if rid in self._ended:
                self._thaw(rid)
                recent = self._recent[rid]
            else:
                recent = self._recent[rid] = deque(maxlen=_RECENT)
        key = (rid, e.walk, e.node, e.rank)
        tally = self._counts.get(key)
        if tally is None:  # the first forward of this key
            tally = self._counts[key] = _Tally(self._limit(rid, e.walk, e.node),
                                               self._label(e.node, e.rank))
            self._keys_of.setdefault(rid, []).append(key)
        recent.append(tally.label)
        tally.n += 1
        if tally.n > tally.limit:
            self._trip(e, tally)

    def _label(self, node: str, rank: int) -> str:
        """``node@rank``: one string per (node, rank), shared by every request's window."""
        label = self._labels.get((node, rank))
        if label is None:
            label = self._labels[(node, rank)] = f"{node}@{rank}"
        return label

    def on_RequestEnded(self, e: ev.RequestEnded) -> None:
        intern = self._interned.setdefault
        passes = self._passes.pop(e.rid, None)
        if passes is not None:
            frozen = tuple(sorted(passes.items()))
            self._passes_ended[e.rid] = intern(frozen, frozen)
        keys = self._keys_of.pop(e.rid, None)
        if keys is None:
            return
        counts = self._counts
        tallies = [(k[1:], counts.pop(k)) for k in keys]
        tally = tuple(sorted((place, t.n, t.limit) for place, t in tallies))
        recent = self._recent.pop(e.rid, ())
        # The window differs from request to request (how the ranks interleaved), so it is kept
        # only where a later forward could need it: a cycle is cut between the node's last two
        # forwards, and a thawed request trips only once a count passes its limit, so unless
        # some count has reached its limit already, the trip comes at the node's second forward
        # after the thaw at the earliest and its cycle lies wholly after the thaw.
        at_limit = any(n >= limit for _k, n, limit in tally)
        window = tuple(recent) if at_limit else ()
        pair = (intern(tally, tally), intern(window, window))
        self._ended[e.rid] = intern(pair, pair)

    def _thaw(self, rid: str) -> None:
        frozen, recent = self._ended.pop(rid)
        self._recent[rid] = deque(recent, maxlen=_RECENT)
        keys = self._keys_of[rid] = []
        for (walk, node, rank), n, limit in frozen:
            key = (rid, walk, node, rank)
            keys.append(key)
            self._counts[key] = _Tally(limit, self._label(node, rank), n)

    def _explained(self, rid: str, walk: str, node: str) -> int:
        per_pass = self._per_pass.get((walk, node))
        if per_pass is None:
            wf = self._facts.get(walk) if self._facts is not None else None
            per_pass = 0
            if wf is not None and node in wf.nodes:
                per_pass = prod(lp.max_iters for lp in wf.loops_of.get(node, ()))
            self._per_pass[(walk, node)] = per_pass
        return per_pass * max(1, self._passes_of(rid, walk))

    def _limit(self, rid: str, walk: str, node: str) -> int:
        return RUNAWAY_FACTOR * self._explained(rid, walk, node) + RUNAWAY_SLACK

    def _trip(self, e: ev.Forward, tally: _Tally) -> None:
        # Passes started since the limit was set explain more forwards: move it, no trip.
        n = tally.n
        fresh = self._limit(e.rid, e.walk, e.node)
        if n <= fresh:
            tally.limit = fresh
            return
        # The driver tears the request down at the first trip; a second one (twice the limit)
        # tells it the work goes on regardless, and it ends the run.
        tally.limit = 2 * fresh
        self.runaways.append(Runaway(e.t, e.rid, e.walk, e.node, e.rank, e.pass_no, n,
                                     self._explained(e.rid, e.walk, e.node), fresh,
                                     _cycle(self._recent[e.rid], tally.label)))
        self.trips += 1

    def see(self, event: object) -> None:
        """One event, for a driver that hands them over itself rather than through a
        `Recorder` (the real processes' launcher, as their events arrive)."""
        if type(event) is ev.Forward:
            self.on_Forward(event)
        elif type(event) is ev.WalkStarted:
            self.on_WalkStarted(event)
        elif type(event) is ev.RequestEnded:
            self.on_RequestEnded(event)

    def report(self) -> list[Runaway]:
        """Every runaway, each with the passes of its walk started by now (for the end of the
        run: what the liveness check reports)."""
        return [replace(r, passes=max(1, self._passes_of(r.rid, r.walk))) for r in self.runaways]


def _cycle(recent: deque[str], at: str) -> tuple[str, ...]:
    """The forwards between the last two forwards of `at` (both ends included); the whole
    remembered tail when `at` ran only once in it."""
    items = list(recent)
    last = len(items) - 1
    for i in range(last - 1, -1, -1):
        if items[i] == at:
            return tuple(items[i:])
    return tuple(items)


__all__ = ["RUNAWAY_FACTOR", "RUNAWAY_SLACK", "Runaway", "RunawayGuard"]
