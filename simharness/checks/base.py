"""What every check shares: the `Check` base, the `Violation` record, what a check is built from
(`RunSetup`) and judges with (`RunContext`), and small text helpers.

A check is an observer (Trio's ``Instrument`` shape): a subclass of `Check` overrides the
``on_<Event>`` hooks it needs (every event type of `simharness.events` has one, a no-op the
recorder never calls) and ``finish(ctx)``, which returns its violations. Checks never change
what runs. Each is built from the run's `RunSetup` alone, and says on its class who it is:
``name`` (``violations[].check``), ``priority`` (its rank as a root cause, which the fuzzer's
signature reads) and ``kinds`` (what its violations are named by, the most telling first). Each
violation carries its ``kind``, set where it is made, and when it happened (``t``), so nothing
downstream reads a message's wording. A check that judges each request on its own can judge it
once it is over (`RequestsOver`) and keep only the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from simharness import events as ev
from simharness.checks.forward_log import ForwardLog
from simharness.placement.layout import Layout
from simharness.ridmap import rid_number
from simharness.scenario.model import Scenario
from simharness.trace import no_op_hook

#: the priority of a check no class declares (the zmq backend's ``crash``): after every other
UNRANKED = 1000


@dataclass
class Violation:
    check: str
    message: str
    walk: str | None = None
    node: str | None = None
    rank: int | None = None
    request: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    #: what went wrong, one of the check's `Check.kinds`, set where the violation is made: the
    #: fuzzer names a failure by it (``check:kind``), never by the message's wording
    kind: str = field(default="other", kw_only=True)
    #: which mechanism, within the kind, where the check can tell (the message, the input, the
    #: kind of rank: ``remove_request:tp-follower``); "" where it cannot. A signature names it
    #: after the kind, so that two mechanisms never share one known case
    mechanism: str = field(default="", kw_only=True)
    #: one short line for a long message (a hang: which node, where, what it waits for, since
    #: when); reports show it first and fold the message under it. "" where the message is short
    headline: str = field(default="", kw_only=True)
    #: when it happened, in the run's time (simulated seconds), for a report's timeline; None
    #: where the check cannot say (the report then places it by its request)
    t: float | None = field(default=None, kw_only=True)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.check, "kind": self.kind}
        if self.mechanism:
            out["mechanism"] = self.mechanism
        if self.headline:
            out["headline"] = self.headline
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
    return [Violation(v.check, v.message, v.walk, v.node, v.rank, rid, dict(v.details), kind=v.kind,
                      t=v.t)
            for v in found]


@dataclass(frozen=True)
class RunSetup:
    """What every check is built from: the run's scenario and layout, and the logs checks share
    (kept once, by the check that owns each, and read by the others)."""

    scenario: Scenario
    layout: Layout
    #: every forward per request: kept by the forwards check, read by the expect check (which
    #: therefore runs with it) and by the summary
    forwards: ForwardLog = field(default_factory=ForwardLog)

    @classmethod
    def of(cls, scenario: Scenario, layout: Layout | None = None) -> RunSetup:
        """A fresh setup for a run of `scenario`; `layout` its own, else built here."""
        return cls(scenario, layout if layout is not None else Layout.build(scenario))


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


class Check:
    """Base of every check: an observer of one run's events that returns `Violation`s at the end.

    A subclass sets `name`, `priority` and `kinds`, overrides the ``on_<Event>`` hooks it needs
    and `finish`, and is built with the run's `RunSetup` (``super().__init__(setup)`` keeps it as
    ``self.setup``). The hooks it does not override are no-ops the recorder never calls, so they
    cost nothing per event; a check that finds at build time that it has nothing to watch may
    set a hook to None on the instance. Adding a check to a run: `simharness.checks.BUILTIN_CHECKS`
    for every run, or ``checks=`` of `simharness.run.simulate` for one.
    """

    #: the check's name: ``violations[].check``, and the first half of a fuzz signature
    name: ClassVar[str] = ""
    #: its rank as a root cause: of the checks that report, the fuzzer names the failure by the
    #: one of the lowest priority (``loop_exit``, 10, before the ``forwards`` and ``drain``
    #: symptoms a stray loop-back causes). Gaps of 10 leave room for a check in between.
    priority: ClassVar[int] = UNRANKED
    #: the checks whose violations this check's explain, for the same request: its own are
    #: causes, theirs symptoms, and reports list the symptoms under the cause (`symptoms`)
    explains: ClassVar[tuple[str, ...]] = ()
    #: the kinds its violations are named by, the most telling first: a run's signature names
    #: the first of them among the check's violations (``loop_exit:peer`` over ``:local``)
    kinds: ClassVar[tuple[str, ...]] = ("other",)

    def __init__(self, setup: RunSetup) -> None:
        #: the run's scenario, layout and shared logs
        self.setup = setup

    def finish(self, ctx: RunContext) -> list[Violation]:
        """The check's violations once every event of the run was seen."""
        return []


# One no-op hook per event type, declared here once: a subclass that overrides ``on_Forward``
# overrides a hook the recorder knows, and the guard-rail test holds every override to a name
# in `events.EVENT_TYPES`.
for _t in ev.EVENT_TYPES:
    setattr(Check, f"on_{_t.__name__}", no_op_hook)
del _t


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


def symptoms(violations: Sequence[Violation], classes: Iterable[type[Check]] = ()) -> list[int | None]:
    """For each violation, the index of the first one in `violations` that explains it (a
    violation of a check whose ``explains`` names this one's check, about the same request or
    about the whole run), None for a cause or a violation nothing explains. `classes`: the
    checks that may have reported (the known ones by default)."""
    if not classes:
        from simharness.checks import KNOWN_CHECKS

        classes = KNOWN_CHECKS
    explains = {c.name: set(c.explains) for c in classes}
    causes: list[tuple[int, Violation]] = [(i, v) for i, v in enumerate(violations)
                                           if explains.get(v.check)]
    out: list[int | None] = []
    for v in violations:
        found = None
        for i, c in causes:
            if v.check in explains[c.check] and (c.request is None or c.request == v.request):
                found = i
                break
        out.append(found)
    return out


def causes_and_symptoms(violations: Sequence[Violation]) -> tuple[list[Violation], list[Violation]]:
    """The violations nothing explains (causes, and what stands alone), then those another
    explains (`symptoms`), each in the order given."""
    links = symptoms(violations)
    return ([v for v, c in zip(violations, links, strict=True) if c is None],
            [v for v, c in zip(violations, links, strict=True) if c is not None])
