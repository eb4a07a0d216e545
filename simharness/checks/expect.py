"""`expect`: the scenario's own expectations (``expect:`` in the YAML).

``forwards_per_request: {walk: {node: n}}``: every request that completed and whose kind takes
that walk ran the node `n` times in that walk (all passes together) on each rank that hosts it.
``per_request_kind: {kind: {walk: {node: n}}}``: the same, for the requests of one kind.

Given the forwards check's `ForwardLog` (as `builtin_checks` does), the check reads each
request's counts from it and observes no forward itself: the log already holds every forward
per (walk, node, rank). On its own it counts them: a finished request's counts are frozen into
an interned tuple (requests that ran alike share it, and each holds one slot of a `RidMap`), so
what the check keeps does not grow with the requests a run has finished by more than a few
bytes each.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from simharness import events as ev
from simharness.checks.base import RunContext, Violation, renamed, rid_order
from simharness.checks.forwards import ForwardLog
from simharness.ridmap import RidMap, names_in_order
from simharness.scenario.model import Scenario
from simharness.wording import plural


class ExpectCheck:
    name = "expect"

    def __init__(self, scenario: Scenario | None = None, log: ForwardLog | None = None) -> None:
        #: the run's forwards per request, kept by the forwards check (None: counted here)
        self._log = log
        if log is not None or (scenario is not None and not (scenario.expect.forwards_per_request
                                                             or scenario.expect.per_request_kind)):
            # Counted by the log, or nothing expected: nothing to count here.
            self.on_Forward = self.on_RequestEnded = None  # type: ignore[assignment]
        #: rid -> (walk, node, rank) -> forwards, while the request runs
        self._live: dict[str, Counter[tuple[str, str, int]]] = {}
        #: rid -> the frozen items of its counts, once it ended
        self._frozen: RidMap[tuple[Any, ...]] = RidMap()
        #: rid -> (request kind, walks, placement)
        self.admitted: RidMap[tuple[str, tuple[str, ...], Any]] = RidMap()
        self._interned: dict[Any, Any] = {}

    def on_Admitted(self, e: ev.Admitted) -> None:
        facts = (e.request_kind, e.walks, e.placement)
        self.admitted[e.rid] = self._interned.setdefault(facts, facts)

    def on_Forward(self, e: ev.Forward) -> None:
        have = self._live.get(e.rid)
        if have is None:  # the request's first forward, or a late one (it reopens)
            have = self._live[e.rid] = Counter(dict(self._frozen.pop(e.rid, ())))
        have[(e.walk, e.node, e.rank)] += 1

    def on_RequestEnded(self, e: ev.RequestEnded) -> None:
        have = self._live.pop(e.rid, None)
        if have is not None:
            frozen = tuple(sorted(have.items()))
            self._frozen[e.rid] = self._interned.setdefault(frozen, frozen)

    def counts_of(self, rid: str) -> dict[tuple[str, str, int], int]:
        """One request's forwards per (walk, node, rank)."""
        if self._log is not None:
            return {place: len(runs) for place, runs in self._log.of(rid).items()}
        live = self._live.get(rid)
        return dict(live) if live is not None else dict(self._frozen.get(rid, ()))

    def finish(self, ctx: RunContext) -> list[Violation]:
        out: list[Violation] = []
        expect = ctx.scenario.expect
        if not (expect.forwards_per_request or expect.per_request_kind):
            return out  # nothing expected: no request's counts to read
        #: (admission, forwards) of each completed request judged, by identity (both interned:
        #: requests that ran alike share them) -> what was found, for a request that ran alike
        judged: dict[tuple[int, int], list[Violation]] = {}
        for rid in names_in_order([self.admitted], rid_order):
            if ctx.outcomes.get(rid) != "completed":
                continue
            facts = self.admitted[rid]
            frozen = self._log.frozen(rid) if self._log is not None else self._frozen.get(rid)
            alike = None if frozen is None else (id(facts), id(frozen))
            found = judged.get(alike) if alike is not None else None
            if found is not None:
                out.extend(renamed(found, rid))
                continue
            first = len(out)
            request_kind, walks, placement_items = facts
            placement = dict(placement_items)
            counts = self.counts_of(rid)
            # walk -> node -> (count, the expect key it came from); a kind's own count wins
            wanted: dict[str, dict[str, tuple[int, str]]] = {}
            for walk, per_node in ctx.scenario.expect.forwards_per_request.items():
                wanted[walk] = {node: (n, "expect.forwards_per_request") for node, n in per_node.items()}
            source = f"expect.per_request_kind.{request_kind}"
            for walk, per_node in ctx.scenario.expect.per_request_kind.get(request_kind, {}).items():
                wanted.setdefault(walk, {}).update({node: (n, source) for node, n in per_node.items()})
            for walk, wanted_here in wanted.items():
                if walk not in walks:
                    continue
                for node, (n, key) in wanted_here.items():
                    for rank in placement[ctx.layout.wg_of[(walk, node)]]:
                        got = counts.get((walk, node, rank), 0)
                        if got != n:
                            out.append(Violation(
                                self.name,
                                f"expected {plural(n, 'forward')} of {node} in {walk} per request "
                                f"({key}), got {got} on rank {rank}",
                                walk=walk, node=node, rank=rank, request=rid,
                                details={"count": got, "expected": n}))
            if alike is not None:
                judged[alike] = out[first:]
        return out
