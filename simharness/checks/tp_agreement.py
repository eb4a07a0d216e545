"""`tp_agreement`: the ranks of a TP instance move in lockstep.

For each request and each worker graph that runs on a lockstep instance of several ranks:

* every rank runs the same sequence of batches of the instance's nodes (same node, walk and
  request ids, in the same order) as the instance's rank 0;
* for each forward, every rank drops the same loop-back edges, finishes the same loops and
  reports the same worker graphs done;
* only rank 0 emits to the client, streams, or sends outside the instance.

What the check keeps stays flat in finished requests. The batch sequences are compared as the
batches start (`_Pair`): only the batches one rank ran ahead of the other wait for their match,
and after the first difference nothing more of that pair is kept. A request's forward effects
are judged once it is over (it ended and its ranks removed it, `RequestsOver`) and only their
violations are kept; ``finish`` judges what is left (hangs, a run cut short). A request keeps
one slot (`RidMap`) for its placement, shared with the requests placed alike, so a stray forward
after its end is still judged. Violations come out as if all were judged at the end. They are
of one kind, ``other``; a follower's send outside its instance carries the time of its forward.
"""

from __future__ import annotations

from collections import defaultdict, deque

from simharness import events as ev
from simharness.checks.base import Check, RequestsOver, RunContext, RunSetup, Violation, rid_order
from simharness.placement.layout import Layout
from simharness.ridmap import RidMap, RidSet
from simharness.wording import plural

#: (node, walk, rids) of one batch
Batch = tuple[str, str, tuple[str, ...]]
#: (walk, node, pass, counter, rank) of one forward of a request
EffectKey = tuple[str, str, int, int | None, int]


class _Pair:
    """Rank 0 of an instance and one other rank: their batches of the instance's nodes,
    compared in order as they start (batch i of one with batch i of the other)."""

    __slots__ = ("lead", "mine", "n_lead", "n_mine", "rids", "differ")

    def __init__(self) -> None:
        #: batches of rank 0 that the other rank has not run yet, and the reverse (one of the
        #: two is empty: lockstep ranks are at most a batch or so apart)
        self.lead: deque[Batch] = deque()
        self.mine: deque[Batch] = deque()
        self.n_lead = 0
        self.n_mine = 0
        #: every request of the two ranks' batches (a byte each): a batch count that differs is
        #: a violation only if all of them completed, which only the end of the run tells
        self.rids = RidSet()
        #: (batch number, rank 0's batch, the other's) of the first difference, once found
        self.differ: tuple[int, Batch, Batch] | None = None

    def add(self, b: Batch, lead: bool) -> None:
        if self.differ is not None:
            return  # the first difference is the finding: nothing after it is compared
        for rid in b[2]:
            self.rids.add(rid)
        if lead:
            self.n_lead += 1
            if self.mine:
                self._compare(self.n_lead - 1, b, self.mine.popleft())
            else:
                self.lead.append(b)
        else:
            self.n_mine += 1
            if self.lead:
                self._compare(self.n_mine - 1, self.lead.popleft(), b)
            else:
                self.mine.append(b)

    def _compare(self, i: int, a: Batch, b: Batch) -> None:
        if a != b:
            self.differ = (i, a, b)
            self.lead.clear()
            self.mine.clear()
            self.rids = RidSet()


def _ranks(ranks: tuple[int, ...]) -> str:
    """An instance's ranks: ``ranks 0, 1``."""
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(map(str, ranks))}"


def _effects(eff: tuple) -> str:
    """What one forward did, in words: ``dropped nothing, finished loop decode_loop, completed
    decode#0``."""
    dropped, finished, completed = eff
    return (f"dropped {', '.join(f'{n}→{d}' for n, d in dropped) or 'nothing'}, "
            f"finished {'loop ' + ', '.join(finished) if finished else 'no loop'}, "
            f"completed {', '.join(completed) or 'no worker graph'}")


class TpAgreementCheck(Check):
    name = "tp_agreement"
    priority = 50
    kinds = ("other",)

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        if all(g.instance_size == 1 for g in setup.scenario.placement.node_groups):
            # No lockstep instance in this layout: nothing to observe.
            self.on_Forward = self.on_BatchStarted = None  # type: ignore[assignment]
            self.on_Admitted = self.on_RequestEnded = self.on_Removed = None  # type: ignore[assignment]
        #: the run's layout, to route each batch to the comparisons it joins as it starts
        self._layout = setup.layout
        #: rid -> its placement (a slot per request, the dict shared by requests placed alike)
        self._placement: RidMap[dict[str, tuple[int, ...]]] = RidMap()
        self._placements: dict[tuple, dict[str, tuple[int, ...]]] = {}
        #: (worker graph, instance) some request was placed on
        self._used: set[tuple[str, tuple[int, ...]]] = set()
        #: instance -> rank other than its rank 0 -> the comparison of their batches
        self._pairs: dict[tuple[int, ...], dict[int, _Pair]] = {}
        #: (node, walk, rank) -> the instances whose comparison a batch of it joins
        self._joins: dict[tuple[str, str, int], list[tuple[int, ...]]] = {}
        #: rid -> (walk, node, pass, counter, rank) -> (filtered, finished, completed wgs),
        #: until the request is over and judged
        self.effects: dict[str, dict[EffectKey, tuple]] = {}
        self._over = RequestsOver()
        #: violations of the forward effects of the requests judged so far, as each was over
        self.judged: list[Violation] = []
        #: violations of followers that sent outside the instance, as they happened
        self.leaks: list[Violation] = []

    def on_Admitted(self, e: ev.Admitted) -> None:
        placement = self._placements.get(e.placement)
        if placement is None:
            placement = self._placements[e.placement] = dict(e.placement)
            self._use(placement, self._layout)
        self._placement[e.rid] = placement
        self._over.admitted(e)

    def _use(self, placement: dict[str, tuple[int, ...]], layout: Layout) -> None:
        """A request was placed so: its lockstep instances' comparisons take its worker
        graphs' nodes from now on."""
        for wg_id, ranks in placement.items():
            if len(ranks) < 2 or (wg_id, ranks) in self._used:
                continue
            self._used.add((wg_id, ranks))
            if ranks not in self._pairs:
                self._pairs[ranks] = {r: _Pair() for r in ranks[1:]}
            wg = layout.by_id[wg_id]
            for n in wg.node_names:
                for r in ranks:
                    joins = self._joins.setdefault((n, wg.walk, r), [])
                    if ranks not in joins:
                        joins.append(ranks)

    def on_BatchStarted(self, e: ev.BatchStarted) -> None:
        self._route(e.rank, (e.node, e.walk, e.rids))

    def _route(self, rank: int, b: Batch) -> None:
        for ranks in self._joins.get((b[0], b[1], rank), ()):
            pairs = self._pairs[ranks]
            if rank == ranks[0]:
                for pair in pairs.values():
                    pair.add(b, True)
            else:
                pairs[rank].add(b, False)

    def on_Forward(self, e: ev.Forward) -> None:
        ranks = self._placement.get(e.rid, {}).get(e.wg, ())
        if len(ranks) < 2:
            return
        effects = self.effects.get(e.rid)
        if effects is None:  # its first forward (or one after it was judged: judged at the end)
            effects = self.effects[e.rid] = {}
        effects[(e.walk, e.node, e.pass_no, e.counter, e.rank)] = (
            e.filtered, e.finished_loops, e.completed_wgs)
        if e.rank != ranks[0]:
            # A follower may keep its own copy of a streamed item when it also consumes the
            # stream (mstar's replicated fan-out); anything else outside is rank 0's to send.
            bad = [f"{s.name}→{where}" for s, where in e.routes
                   if where in ("client",)
                   or (where.startswith("stream:") and int(where[7:]) != e.rank)
                   or (where.startswith("rank:") and int(where[5:]) not in ranks)]
            if bad:
                self.leaks.append(Violation(
                    self.name, f"{e.node} on rank {e.rank}, not rank 0 of its instance, sent "
                               f"{', '.join(bad)}: only rank 0 emits, streams to other ranks or sends "
                               f"outside",
                    walk=e.walk, node=e.node, rank=e.rank, request=e.rid, kind="other", t=e.t))

    def on_RequestEnded(self, e: ev.RequestEnded) -> None:
        if self._over.ended(e) is not None:
            self._judge_over(e.rid)

    def on_Removed(self, e: ev.Removed) -> None:
        if self._over.removed(e) is not None:
            self._judge_over(e.rid)

    def _judge_over(self, rid: str) -> None:
        effects = self.effects.pop(rid, None)
        if effects is not None:
            self.judged.extend(self._judge(rid, effects))

    def _judge(self, rid: str, effects: dict[EffectKey, tuple]) -> list[Violation]:
        """One request's forwards: every rank of the instance did what its lowest rank did."""
        out = []
        by_fwd: dict[tuple, dict[int, tuple]] = defaultdict(dict)
        for (walk, node, p, c, rank), eff in effects.items():
            by_fwd[(walk, node, p, c)][rank] = eff
        for (walk, node, _p, c), per_rank in by_fwd.items():
            ranks = sorted(per_rank)
            ref = per_rank[ranks[0]]
            for r in ranks[1:]:
                got = per_rank[r]
                if got != ref:
                    out.append(Violation(
                        self.name, f"{node} {'outside any loop' if c is None else f'at loop counter {c}'}"
                                   f": rank {r} {_effects(got)}, but rank {ranks[0]} {_effects(ref)}",
                        walk=walk, node=node, rank=r, request=rid, kind="other"))
        return out

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = []
        for ranks in sorted(self._pairs):
            for r, pair in self._pairs[ranks].items():
                if pair.differ is not None:
                    i, a, b = pair.differ
                    out.append(Violation(
                        self.name, f"rank {r} ran batch {i} of its instance ({_ranks(ranks)}) as "
                                   f"{b[0]} for {', '.join(b[2])} where rank {ranks[0]} ran {a[0]} for "
                                   f"{', '.join(a[2])}",
                        node=b[0], rank=r, details={"instance": list(ranks), "batch": i}, kind="other"))
                elif pair.n_lead != pair.n_mine and all(ctx.outcomes.get(x) == "completed"
                                                        for x in pair.rids):
                    out.append(Violation(
                        self.name, f"rank {r} ran {plural(pair.n_mine, 'batch', 'batches')} of its "
                                   f"instance ({_ranks(ranks)}), rank {ranks[0]} ran {pair.n_lead}",
                        rank=r, details={"instance": list(ranks)}, kind="other"))
        effects = list(self.judged)
        for rid, held in self.effects.items():
            effects.extend(self._judge(rid, held))
        # Request by request, as if every request were judged now; each request's violations
        # stay in the order they were found (the sort is stable).
        effects.sort(key=lambda v: rid_order(v.request or ""))
        return out + effects + self.leaks
