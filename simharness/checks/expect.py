"""`expect`: the scenario's own expectations (``expect:`` in the YAML).

``forwards_per_request: {walk: {node: n}}``: every request that completed and whose kind takes
that walk ran the node `n` times in that walk (all passes together) on each rank that hosts it.
``per_request_kind: {kind: {walk: {node: n}}}``: the same, for the requests of one kind.
"""

from __future__ import annotations

from collections import Counter

from simharness import events as ev
from simharness.checks.base import RunContext, Violation, rid_order
from simharness.scenario.model import Scenario


class ExpectCheck:
    name = "expect"

    def __init__(self, scenario: Scenario | None = None) -> None:
        if scenario is not None and not (scenario.expect.forwards_per_request
                                         or scenario.expect.per_request_kind):
            self.on_Forward = None  # type: ignore[assignment]  # nothing expected: nothing to count
        self.counts: Counter[tuple[str, str, int, str]] = Counter()
        self.admitted: dict[str, ev.Admitted] = {}

    def on_Admitted(self, e: ev.Admitted) -> None:
        self.admitted[e.rid] = e

    def on_Forward(self, e: ev.Forward) -> None:
        self.counts[(e.walk, e.node, e.rank, e.rid)] += 1

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = []
        for rid in sorted(self.admitted, key=rid_order):
            if ctx.outcomes.get(rid) != "completed":
                continue
            adm = self.admitted[rid]
            placement = dict(adm.placement)
            # walk -> node -> (count, the expect key it came from); a kind's own count wins
            wanted: dict[str, dict[str, tuple[int, str]]] = {}
            for walk, per_node in ctx.scenario.expect.forwards_per_request.items():
                wanted[walk] = {node: (n, "expect.forwards_per_request") for node, n in per_node.items()}
            source = f"expect.per_request_kind.{adm.request_kind}"
            for walk, per_node in ctx.scenario.expect.per_request_kind.get(adm.request_kind, {}).items():
                wanted.setdefault(walk, {}).update({node: (n, source) for node, n in per_node.items()})
            for walk, per_node in wanted.items():
                if walk not in adm.walks:
                    continue
                for node, (n, key) in per_node.items():
                    for rank in placement[ctx.layout.wg_of[(walk, node)]]:
                        got = self.counts[(walk, node, rank, rid)]
                        if got != n:
                            out.append(Violation(
                                self.name,
                                f"expected {n} forwards of {node} in {walk} per request "
                                f"({key}), got {got} on rank {rank}",
                                walk=walk, node=node, rank=rank, request=rid,
                                details={"count": got, "expected": n}))
        return out
