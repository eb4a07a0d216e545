"""`expect`: the scenario's own expectations (``expect:`` in the YAML).

``forwards_per_request: {walk: {node: n}}``: every request that completed and whose kind takes
that walk ran the node `n` times in that walk (all passes together) on each rank that hosts it.
``per_request_kind: {kind: {walk: {node: n}}}``: the same, for the requests of one kind.

The check reads each request's counts from the run's forward log (`RunSetup.forwards`, which the
forwards check keeps: expect runs with it) and observes no forward itself. A violation's kind is
``count``; it carries no time (the log keeps none), and a report places it at its node's forwards.
"""

from __future__ import annotations

from typing import Any

from simharness import events as ev
from simharness.checks.base import Check, RunContext, RunSetup, Violation, renamed, rid_order
from simharness.ridmap import RidMap, names_in_order
from simharness.wording import plural


class ExpectCheck(Check):
    name = "expect"
    priority = 90
    kinds = ("count",)

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        #: the run's forwards per request, kept by the forwards check
        self._log = setup.forwards
        #: rid -> (request kind, walks, placement)
        self.admitted: RidMap[tuple[str, tuple[str, ...], Any]] = RidMap()
        self._interned: dict[Any, Any] = {}
        expect = setup.scenario.expect
        if not (expect.forwards_per_request or expect.per_request_kind):
            self.on_Admitted = None  # type: ignore[assignment]  # nothing expected: nothing to watch

    def on_Admitted(self, e: ev.Admitted) -> None:
        facts = (e.request_kind, e.walks, e.placement)
        self.admitted[e.rid] = self._interned.setdefault(facts, facts)

    def counts_of(self, rid: str) -> dict[tuple[str, str, int], int]:
        """One request's forwards per (walk, node, rank)."""
        return {place: len(runs) for place, runs in self._log.of(rid).items()}

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
            frozen = self._log.frozen(rid)
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
                                details={"count": got, "expected": n}, kind="count"))
            if alike is not None:
                judged[alike] = out[first:]
        return out
