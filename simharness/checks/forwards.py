"""`forwards`: every node runs exactly as often as the graph implies, with the right counters.

For each request, each pass of a walk it completed, and each node of that walk, the node must
run on every rank of the instance that hosts it, once per iteration of its enclosing loops, with
its innermost loop counter going 0..n-1 once each per pass. A loop runs ``max_iters``
iterations, or, if it is dynamic, the iterations drawn for that request and pass (the same draw
the fake nodes' ``check_stop`` uses). An extra forward after a loop ended, a missing one, a
forward on a rank that should not run the node, or counters out of sequence are violations.

A speculative forward whose output was discarded (the overshoot after a dynamic stop) is not a
completion: it is allowed once per dynamic stop and counted apart.

What the check keeps stays flat in finished requests: a request's forwards (`ForwardLog`) and
its walks are frozen into shared, interned tuples when it ends (requests that ran alike share one
copy), and thawed again only if a late event for it arrives. The log is the run's shared one
(`RunSetup.forwards`): the expect check and the run summary read it too.

A violation's kind is the most telling of what its passes show, in this order:
``extra-after-loop`` (a pass after the loop ended), ``extra`` (a forward beyond the count of a
node in no loop), ``unexpected`` (forwards where none were expected), ``missing`` (the node
stopped short), ``counters`` (anything else: counters out of sequence, a repeated walk's total,
too many discarded speculative forwards). A violation carries no time: the check keeps none
(a finished request's forwards are shared with the requests that ran alike), and a report
places it at its node's forwards.

Passes the request never completed (it hung, or timed out) are left to `liveness`. Forwards are
attributed to the pass the rank believed current, so a stray pass after a loop ended counts
against the pass it followed. A stream-fed walk that repeats until its final chunk does not tell
its ranks about each new pass (mstar sends it nothing), so its forwards are compared in total.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from simharness import events as ev
from simharness.checks.base import Check, RunContext, RunSetup, Violation, counters_text, renamed, rid_order
from simharness.checks.forward_log import ForwardLog, Key
from simharness.ridmap import RidMap, names_in_order
from simharness.rng import draw_stop
from simharness.wording import plural

__all__ = ["ForwardLog", "ForwardsCheck", "Key"]


def intern(table: dict[Any, Any], value: Any) -> Any:
    """`value`, or the equal one already in `table` (so equal values share one object)."""
    return table.setdefault(value, value)


class ForwardsCheck(Check):
    name = "forwards"
    priority = 20
    kinds = ("extra-after-loop", "extra", "unexpected", "missing", "counters")

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        #: every forward, per request: the run's shared log, which this check keeps
        self.log = setup.forwards
        # Per request, a slot each (`RidMap`): what a finished request leaves is interned.
        #: rid -> (request kind, placement) of its admission
        self.admitted: RidMap[tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]] = RidMap()
        #: rid -> (walk, pass) started: a list while the request runs, a tuple once it ended
        self.started: RidMap[list[tuple[str, int]] | tuple[tuple[str, int], ...]] = RidMap()
        #: rid -> (walk, pass) completed: a set while the request runs, a frozenset once it ended
        self.passes_done: RidMap[set[tuple[str, int]] | frozenset[tuple[str, int]]] = RidMap()
        self.overshoots: dict[Key, int] = defaultdict(int)
        self._interned: dict[Any, Any] = {}
        # The recorder calls the log itself: no frame of ours between it and every forward.
        self.on_Forward = self.log.add  # type: ignore[method-assign]

    def on_Admitted(self, e: ev.Admitted) -> None:
        facts = (e.request_kind, intern(self._interned, e.placement))
        self.admitted[e.rid] = intern(self._interned, facts)

    def on_WalkStarted(self, e: ev.WalkStarted) -> None:
        have = self.started.get(e.rid)
        if type(have) is not list:
            have = self.started[e.rid] = list(have or ())
        have.append((e.walk, e.pass_no))

    def on_PassDone(self, e: ev.PassDone) -> None:
        have = self.passes_done.get(e.rid)
        if type(have) is not set:
            have = self.passes_done[e.rid] = set(have or ())
        have.add((e.walk, e.pass_no))

    def on_Forward(self, e: ev.Forward) -> None:
        self.log.add(e)

    def on_Overshoot(self, e: ev.Overshoot) -> None:
        self.overshoots[(e.walk, e.node, e.rank, e.rid)] += 1

    def on_RequestEnded(self, e: ev.RequestEnded) -> None:
        # Freeze what the request left: shared with every request that ran alike.
        rid = e.rid
        self.log.close(rid)
        started = self.started.get(rid)
        if started is not None:
            self.started[rid] = intern(self._interned, tuple(started))
        done = self.passes_done.get(rid)
        if done is not None:
            self.passes_done[rid] = intern(self._interned, frozenset(done))

    def expected(self, ctx: RunContext, rid: str | None = None
                 ) -> tuple[dict[Key, dict[int, list[int | None]]], set[Key]]:
        """Expected counters per key and pass of one request (of every request without `rid`),
        and the keys compared in total (repeated walks)."""
        exp: dict[Key, dict[int, list[int | None]]] = defaultdict(dict)
        totals: set[Key] = set()
        for one in ([rid] if rid is not None else list(self.admitted)):
            self._expect(ctx, one, exp, totals)
        return exp, totals

    def _expect(self, ctx: RunContext, rid: str, exp: dict[Key, dict[int, list[int | None]]],
                totals: set[Key]) -> None:
        sc = ctx.scenario
        if rid in self.admitted:
            request_kind, placement_items = self.admitted[rid]
            kind = sc.requests[request_kind]
            repeating = {st.walk for steps in kind.partitions.values() for st in steps if st.until_final}
            placement = dict(placement_items)
            for walk, p in self.started.get(rid, ()):
                if (walk, p) not in self.passes_done.get(rid, ()):
                    continue
                wf = sc.walk_facts[walk]
                part = sc.partition_of[walk]
                iters = {}
                for name, lp in wf.loops.items():
                    n = lp.max_iters
                    dist = kind.stops.get(name) if lp.stop is not None else None
                    if dist is not None:
                        n = min(n, draw_stop(sc.seed, rid, part, p, name, dist))
                    iters[name] = n
                for node in wf.nodes:
                    seq = wf.counter_sequence(node, iters)
                    for rank in placement[ctx.layout.wg_of[(walk, node)]]:
                        key = (walk, node, rank, rid)
                        if walk in repeating:
                            totals.add(key)
                            exp[key][-1] = exp[key].get(-1, []) + seq
                        else:
                            exp[key][p] = seq

    def _observed(self, rid: str) -> dict[Key, dict[int, list[int | None]]]:
        """One request's forwards as key -> pass -> counters in order."""
        out: dict[Key, dict[int, list[int | None]]] = {}
        for (walk, node, rank), runs in self.log.of(rid).items():
            per_pass: dict[int, list[int | None]] = defaultdict(list)
            for p, c in runs:
                per_pass[p].append(c)
            out[(walk, node, rank, rid)] = per_pass
        return out

    def _rids(self) -> Iterator[str]:
        """Every request admitted or seen forwarding, in request order, one at a time (a soak's
        names are never all held at once)."""
        return names_in_order([self.admitted, *self.log.tables()], rid_order)

    def per_pass(self, ctx: RunContext) -> Iterator[tuple[Key, int, list[int | None], list[int | None]]]:
        """What the check compares pass by pass: (key, pass, observed counters, expected
        counters) for each pass a request completed, request by request. A repeated walk's
        forwards, compared in total, are not among them (`expected` names those keys)."""
        for rid in self._rids():
            expected, totals = self.expected(ctx, rid)
            observed = self._observed(rid)
            for key in sorted(set(expected) | set(observed)):
                if key not in totals:
                    done = self._done(rid, key[0])
                    for p, got, want in _passes(done, expected.get(key, {}), observed.get(key, {})):
                        yield key, p, got, want

    def _done(self, rid: str, walk: str) -> set[int]:
        """The passes of `walk` that `rid` completed."""
        return {p for w, p in self.passes_done.get(rid, ()) if w == walk}

    def finish(self, ctx: RunContext) -> list[Violation]:
        # Request by request, so that the whole run's forwards are never expanded at once.
        out: list[Violation] = []
        #: `_alike` of each request judged -> what was found: a request that ran as one of them
        #: did gets the same violations, under its own name (no message names the request)
        judged: dict[tuple[int, int, int, int, str | None], list[Violation]] = {}
        for rid in self._rids():
            alike = self._alike(ctx, rid)
            found = judged.get(alike) if alike is not None else None
            if found is not None:
                out.extend(renamed(found, rid))
                continue
            expected, totals = self.expected(ctx, rid)
            observed = self._observed(rid)
            keys = set(expected) | set(observed)
            found = self._compare(ctx, sorted(keys), expected, totals, observed)
            if alike is not None:
                judged[alike] = found
            out.extend(found)
        return out

    def _alike(self, ctx: RunContext, rid: str) -> tuple[int, int, int, int, str | None] | None:
        """What the verdict on ended request `rid` rests on and nothing else: its forwards,
        admission, walks started and passes done (each an interned value, so requests that ran
        alike share them: their identities stand for them) and its outcome. None when something
        particular to the request enters the verdict too: a loop length drawn for it (a
        dynamic stop), a discarded speculative forward, or a request that never ended."""
        admitted = self.admitted.get(rid)
        started = self.started.get(rid)
        done = self.passes_done.get(rid)
        if (self.overshoots or admitted is None or type(started) is not tuple
                or type(done) is not frozenset or ctx.scenario.requests[admitted[0]].stops):
            return None
        log = self.log.frozen(rid)
        if log is None:
            return None
        return id(log), id(admitted), id(started), id(done), ctx.outcomes.get(rid)

    def _compare(self, ctx: RunContext, keys: list[Key], expected: dict[Key, dict[int, list[int | None]]],
                 totals: set[Key], observed: dict[Key, dict[int, list[int | None]]]) -> list[Violation]:
        out: list[Violation] = []
        for key in keys:
            walk, node, rank, rid = key
            done = self._done(rid, walk)
            exp = expected.get(key, {})
            obs = observed.get(key, {})
            message = None
            kind = "counters"
            if key in totals:
                got = [c for p in sorted(obs) for c in obs[p]]
                want = exp.get(-1, [])
                n_obs, n_exp = len(got), len(want)
                if ctx.outcomes.get(rid) == "completed" and sorted(got, key=_k) != sorted(want, key=_k):
                    message = f"{plural(n_obs, 'forward')} over its repeated passes, expected {n_exp}"
            else:
                notes = []
                n_obs = n_exp = 0
                for p, got, want in _passes(done, exp, obs):
                    n_obs += len(got)
                    n_exp += len(want)
                    if got != want:
                        notes.append((p, *_explain(got, want)))
                if notes:
                    multi = len(exp) > 1
                    text = "; ".join(f"pass {p}: {t}" if multi else t for p, t, _kind in notes)
                    message = f"{plural(n_obs, 'forward')}, expected {n_exp}: {text}"
                    kind = min((k for _p, _t, k in notes), key=self.kinds.index)
            if message is not None:
                out.append(Violation(self.name, message, walk=walk, node=node, rank=rank, request=rid,
                                     details={"count": n_obs, "expected": n_exp}, kind=kind))
            extra = self.overshoots.get(key, 0)
            if extra > max(1, len(done)):
                # (named "counters" as the wording-matched kinds named it: renaming it would
                # rename its corpus cases)
                out.append(Violation(
                    self.name, f"{extra} speculative forwards were discarded; at most one per "
                               f"dynamic stop is expected", walk=walk, node=node, rank=rank, request=rid,
                    details={"overshoots": extra}, kind="counters"))
        return out


def _passes(done: set[int], exp: dict[int, list[int | None]], obs: dict[int, list[int | None]]
            ) -> list[tuple[int, list[int | None], list[int | None]]]:
    """One key's completed passes, each as (pass, observed counters, expected counters): the
    unit the check compares (`per_pass` gives the same to whoever shows it)."""
    return [(p, obs.get(p, []), exp.get(p, [])) for p in sorted(set(exp) | set(obs)) if p in done]


def _k(c: int | None) -> int:
    return -1 if c is None else c


def _explain(got: list[int | None], want: list[int | None]) -> tuple[str, str]:
    """What one pass's forwards show against what was expected: (text, kind)."""
    if not want:
        return (f"ran {plural(len(got), 'forward')} where none were expected "
                f"(loop counters {counters_text(got)})"), "unexpected"
    if len(got) > len(want) and got[: len(want)] == want:
        extra = got[len(want):]
        if all(c is None for c in extra):
            return f"{plural(len(extra), 'extra forward')} (the node is in no loop)", "extra"
        what = "an extra pass" if len(extra) == 1 else f"{len(extra)} extra passes"
        return f"{what} at loop counter {counters_text(extra)} after the loop ended", "extra-after-loop"
    if len(got) < len(want) and want[: len(got)] == got:
        last = f"after loop counter {got[-1]}" if got and got[-1] is not None else "before its first forward"
        return f"stopped {last}: {plural(len(want) - len(got), 'forward')} missing", "missing"
    return f"loop counters {counters_text(got)} instead of {counters_text(want)}", "counters"
