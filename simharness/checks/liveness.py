"""`liveness`: every request completes; a hang is reported with its wait-for chain.

The driver reports a `Stalled` request when no event is left (quiescence) or when the request
passes its timeout in simulated time. This check turns each report into one violation naming the
request, the walk and pass, the worker graphs that never reported done, and for each node that
holds something: on which rank, which inputs it holds, which it misses and who would send them,
or what its engine gate is waiting for. The node named first is the one the chain points at:
a gated node whose inputs are all there, else a node that holds some inputs but not all.

A *runaway* is the opposite of a hang: work that never stops growing (stray loop-backs that keep
a branch cycling after its loop ended). Left alone it runs to the request timeout, at a cost of
seconds of wall time and thousands of symptoms. So this check also counts, per (request, walk,
node, rank), the forwards the graph can explain: the node's forwards per pass (the product of
its enclosing loops' ``max_iters``) times the passes the conductor started for that walk. When
the count passes `RUNAWAY_FACTOR` times that plus `RUNAWAY_SLACK` the check records a runaway
and bumps `trips`. It never acts itself: the driver reads `trips` after each step (an integer
compare) and tears the request down, or ends the run if the same work keeps going after that.
The violation names the request, the node and rank, how far past the explained count it ran,
and the cycle: the forwards of that request between the node's last two forwards.

What the count keeps stays flat in finished requests: when a request ends its counts, its
passes per walk and its window of recent forwards are frozen into interned tuples (requests that
ran alike share them, and each holds one slot of a `RidMap`) and thawed only if an event for it
comes later, so nothing restarts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from math import prod

from simharness import events as ev
from simharness.checks.base import RunContext, Violation, and_join
from simharness.ridmap import RidMap
from simharness.scenario.model import Scenario
from simharness.wording import plural

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


class _Tally:
    """The runaway count of one (request, walk, node, rank): forwards so far, the count past
    which it trips, and its ``node@rank`` label (shared by every request's window)."""

    __slots__ = ("n", "limit", "label")

    def __init__(self, limit: int, label: str, n: int = 0) -> None:
        self.n = n
        self.limit = limit
        self.label = label


class LivenessCheck:
    name = "liveness"

    def __init__(self, scenario: Scenario | None = None) -> None:
        self.stalls: list[ev.Stalled] = []
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
        self._interned: dict[object, object] = {}
        self._labels: dict[tuple[str, int], str] = {}

    def on_Stalled(self, e: ev.Stalled) -> None:
        self.stalls.append(e)

    def on_WalkStarted(self, e: ev.WalkStarted) -> None:
        passes = self._passes.get(e.rid)
        if passes is None:  # the request's first pass (or a pass after it ended: reopen it)
            passes = self._passes[e.rid] = dict(self._passes_ended.pop(e.rid, ()))
        passes[e.walk] = passes.get(e.walk, 0) + 1

    def _passes_of(self, rid: str, walk: str) -> int:
        passes = self._passes.get(rid)
        if passes is not None:
            return passes.get(walk, 0)
        return dict(self._passes_ended.get(rid, ())).get(walk, 0)

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
            self._passes_ended[e.rid] = intern(frozen, frozen)  # type: ignore[assignment]
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
        self._ended[e.rid] = intern(pair, pair)  # type: ignore[assignment]

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

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = self._runaway_violations(ctx)
        # A blocked node may sit in another partition's walk than the one that stalled: its
        # producers are those of its own worker graph's walk.
        walk_of = {wg.id: wg.walk for wg in ctx.layout.worker_graphs}
        for s in self.stalls:
            if s.reason == "runaway":
                continue  # reported above, from what the count saw
            if not s.walk:
                out.append(Violation(self.name, f"{s.rid} was never admitted ({s.reason} at "
                                                f"t={s.t:.3f} s): it waited for a concurrency slot",
                                     request=s.rid))
                continue
            lines = []
            chain = []
            for b in _ordered(s.blocked):
                held = [h.describe() for h in b.held]
                entry = {"node": b.node, "rank": b.rank, "wg": b.wg, "counter": b.counter,
                         "held": [h.name for h in b.held], "missing": list(b.missing)}
                if b.gate.startswith(ev.LOCKSTEP_HOLD):
                    text = (f"{b.node}@{b.rank} holds every input but TP lockstep holds it: "
                            f"{b.gate[len(ev.LOCKSTEP_HOLD):]}")
                    entry["gate"] = b.gate
                elif b.gate:
                    text = f"{b.node}@{b.rank} holds every input but its engine gate holds it: {b.gate}"
                    entry["gate"] = b.gate
                    entry["missing"] = [f"{n} (walk start)" for n in b.gate_waits]
                elif b.missing:
                    wants = []
                    walk = walk_of.get(b.wg, s.walk)
                    facts = ctx.scenario.walk_facts[walk]
                    streamed = ctx.scenario.stream_inputs(walk)
                    for name in b.missing:
                        prod = facts.producers(name, b.node)
                        if not prod and name in streamed:
                            # A stream input comes from another partition, not from a node of
                            # this walk: name the partition whose chunks it waits for.
                            srcs = sorted({c.src for c in ctx.scenario.connections if c.edge == name})
                            prod = [f"the stream from partition {src}" for src in srcs]
                        wants.append(f"{name} (from {' or '.join(prod) if prod else 'nobody'})")
                    have = f"holds {and_join(held)} and " if held else ""
                    text = f"{b.node}@{b.rank} {have}waits for {and_join(wants)}"
                else:
                    text = f"{b.node}@{b.rank} is ready but was never run"
                if b.held_next:
                    text += f"; its next-iteration slot holds {and_join([h.describe() for h in b.held_next])}"
                    entry["held_next"] = [h.name for h in b.held_next]
                lines.append(text)
                chain.append(entry)
            pending = and_join([f"{wg} on rank{'s' if len(r) > 1 else ''} {','.join(map(str, r))}"
                                for wg, r in s.pending])
            when = ("no event was left" if s.reason == "quiescence"
                    else f"it passed its {ctx.scenario.limits.request_timeout_s:g} s timeout")
            first = chain[0] if chain else {}
            # A request admitted just before its deadline, or one whose work is all in flight,
            # has no node that holds or waits for anything yet.
            sentences = [f"{s.rid} hung in walk {s.walk} (pass {s.pass_no}) at t={s.t:.3f} s ({when})",
                         *(lines or ["No node of the walk holds an input or waits on a gate"])]
            if pending:
                sentences.append(f"Worker graphs not done: {pending}")
            msg = ". ".join(sentences)
            out.append(Violation(
                self.name, msg, walk=s.walk, node=first.get("node"), rank=first.get("rank"),
                request=s.rid,
                details={"reason": s.reason, "pass": s.pass_no,
                         "missing": first.get("missing", []), "held": first.get("held", []),
                         "gate": first.get("gate", ""), "chain": chain,
                         "pending": [{"wg": wg, "ranks": list(r)} for wg, r in s.pending]},
            ))
        return out

    def _runaway_violations(self, ctx: RunContext) -> list[Violation]:
        out = []
        seen: set[Key] = set()
        for r in self.runaways:
            key = (r.rid, r.walk, r.node, r.rank)
            if key in seen:
                continue  # the second trip of the same work: the run ended there
            seen.add(key)
            passes = max(1, self._passes_of(r.rid, r.walk))
            per_pass = r.explained // passes
            cycle = " -> ".join(r.cycle)
            msg = (f"{r.rid} ran away in walk {r.walk} (pass {r.pass_no}) at t={r.t:.3f} s: "
                   f"{r.node}@{r.rank} ran {r.forwards} forwards where the graph explains "
                   f"{r.explained} ({plural(passes, 'pass', 'passes')} of {per_pass}); "
                   f"it keeps cycling {cycle}. The request was cut short instead of running to its "
                   f"{ctx.scenario.limits.request_timeout_s:g} s timeout")
            out.append(Violation(
                self.name, msg, walk=r.walk, node=r.node, rank=r.rank, request=r.rid,
                details={"reason": "runaway", "pass": r.pass_no, "forwards": r.forwards,
                         "explained": r.explained, "limit": r.limit, "cycle": list(r.cycle)}))
        return out


def _cycle(recent: deque[str], at: str) -> tuple[str, ...]:
    """The forwards between the last two forwards of `at` (both ends included); the whole
    remembered tail when `at` ran only once in it."""
    items = list(recent)
    last = len(items) - 1
    for i in range(last - 1, -1, -1):
        if items[i] == at:
            return tuple(items[i:])
    return tuple(items)


def _ordered(blocked: tuple[ev.BlockedNode, ...]) -> list[ev.BlockedNode]:
    """Gated nodes first (a root cause), then partly filled nodes, then the rest."""
    def rank(b: ev.BlockedNode) -> int:
        if b.gate:
            return 0
        if b.held and b.missing:
            return 1
        if not b.missing:
            return 2
        return 3
    return sorted(blocked, key=lambda b: (rank(b), b.rank))
