"""`tp_agreement`: the ranks of a TP instance move in lockstep.

For each request and each worker graph that runs on a lockstep instance of several ranks:

* every rank runs the same sequence of batches of the instance's nodes (same node, walk and
  request ids, in the same order) as the instance's rank 0;
* for each forward, every rank drops the same loop-back edges, finishes the same loops and
  reports the same worker graphs done;
* only rank 0 emits to the client, streams, or sends outside the instance.
"""

from __future__ import annotations

from collections import defaultdict

from simharness import events as ev
from simharness.checks.base import RunContext, Violation, rid_order
from simharness.ridmap import RidMap
from simharness.scenario.model import Scenario


class TpAgreementCheck:
    name = "tp_agreement"

    def __init__(self, scenario: Scenario | None = None) -> None:
        if scenario is not None and all(g.instance_size == 1 for g in scenario.placement.node_groups):
            # No lockstep instance in this layout: nothing to observe.
            self.on_Forward = self.on_BatchStarted = None  # type: ignore[assignment]
        #: rid -> its placement (a slot per request, the dict shared by requests placed alike)
        self._placement: RidMap[dict[str, tuple[int, ...]]] = RidMap()
        self._placements: dict[tuple, dict[str, tuple[int, ...]]] = {}
        #: rank -> [(node, walk, rids)] in the order the rank started them
        self.batches: dict[int, list[tuple[str, str, tuple[str, ...]]]] = defaultdict(list)
        #: (rid, walk, node, pass, counter, rank) -> (filtered, finished, completed wgs)
        self.effects: dict[tuple, tuple] = {}
        self.leaks: list[tuple[ev.Forward, list[str]]] = []

    def on_Admitted(self, e: ev.Admitted) -> None:
        placement = self._placements.get(e.placement)
        if placement is None:
            placement = self._placements[e.placement] = dict(e.placement)
        self._placement[e.rid] = placement

    def on_BatchStarted(self, e: ev.BatchStarted) -> None:
        self.batches[e.rank].append((e.node, e.walk, e.rids))

    def on_Forward(self, e: ev.Forward) -> None:
        ranks = self._placement.get(e.rid, {}).get(e.wg, ())
        if len(ranks) < 2:
            return
        self.effects[(e.rid, e.walk, e.node, e.pass_no, e.counter, e.rank)] = (
            e.filtered, e.finished_loops, e.completed_wgs)
        if e.rank != ranks[0]:
            bad = [f"{s.name}→{where}" for s, where in e.routes
                   if where in ("client",) or where.startswith("stream:")
                   or (where.startswith("rank:") and int(where[5:]) not in ranks)]
            if bad:
                self.leaks.append((e, bad))

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = []
        layout = ctx.layout
        instances: set[tuple[int, ...]] = set()
        nodes_of: dict[tuple[int, ...], set[tuple[str, str]]] = defaultdict(set)
        for placement in self._placement.values():
            for wg_id, ranks in placement.items():
                if len(ranks) > 1:
                    instances.add(ranks)
                    wg = layout.by_id[wg_id]
                    nodes_of[ranks].update((n, wg.walk) for n in wg.node_names)
        for ranks in sorted(instances):
            nodes = nodes_of[ranks]
            lead = [b for b in self.batches.get(ranks[0], []) if (b[0], b[1]) in nodes]
            for r in ranks[1:]:
                mine = [b for b in self.batches.get(r, []) if (b[0], b[1]) in nodes]
                for i, (a, b) in enumerate(zip(lead, mine, strict=False)):
                    if a != b:
                        out.append(Violation(
                            self.name, f"rank {r} ran batch {i} of its instance {list(ranks)} as "
                                       f"{b[0]} {list(b[2])} where rank {ranks[0]} ran {a[0]} {list(a[2])}",
                            node=b[0], rank=r, details={"instance": list(ranks), "batch": i}))
                        break
                else:
                    if len(lead) != len(mine) and all(ctx.outcomes.get(x) == "completed"
                                                      for b in lead + mine for x in b[2]):
                        out.append(Violation(
                            self.name, f"rank {r} ran {len(mine)} batches of its instance {list(ranks)}, "
                                       f"rank {ranks[0]} ran {len(lead)}",
                            rank=r, details={"instance": list(ranks)}))
        by_fwd: dict[tuple, dict[int, tuple]] = defaultdict(dict)
        for (rid, walk, node, p, c, rank), eff in self.effects.items():
            by_fwd[(rid, walk, node, p, c)][rank] = eff
        for (rid, walk, node, _p, c), per_rank in sorted(by_fwd.items(), key=lambda kv: rid_order(kv[0][0])):
            ranks = sorted(per_rank)
            ref = per_rank[ranks[0]]
            for r in ranks[1:]:
                got = per_rank[r]
                if got != ref:
                    out.append(Violation(
                        self.name, f"{node} at counter {c} dropped {list(got[0])}, finished {list(got[1])} "
                                   f"and completed {list(got[2])} on rank {r} but {list(ref[0])}, "
                                   f"{list(ref[1])} and {list(ref[2])} on rank {ranks[0]}",
                        walk=walk, node=node, rank=r, request=rid))
        for e, bad in self.leaks:
            out.append(Violation(self.name, f"{e.node} on rank {e.rank}, not rank 0 of its instance, sent "
                                            f"{', '.join(bad)}: only rank 0 emits, streams or sends outside",
                                 walk=e.walk, node=e.node, rank=e.rank, request=e.rid))
        return out
