"""`forwards`: every node runs exactly as often as the graph implies, with the right counters.

For each request, each pass of a walk it completed, and each node of that walk, the node must
run on every rank of the instance that hosts it, once per iteration of its enclosing loops, with
its innermost loop counter going 0..n-1 once each per pass. A loop runs ``max_iters``
iterations, or, if it is dynamic, the iterations drawn for that request and pass (the same draw
the fake nodes' ``check_stop`` uses). An extra forward after a loop ended, a missing one, a
forward on a rank that should not run the node, or counters out of sequence are violations.

A speculative forward whose output was discarded (the overshoot after a dynamic stop) is not a
completion: it is allowed once per dynamic stop and counted apart.

Passes the request never completed (it hung, or timed out) are left to `liveness`. Forwards are
attributed to the pass the rank believed current, so a stray pass after a loop ended counts
against the pass it followed. A stream-fed walk that repeats until its final chunk does not tell
its ranks about each new pass (mstar sends it nothing), so its forwards are compared in total.
"""

from __future__ import annotations

from collections import defaultdict

from simharness import events as ev
from simharness.checks.base import RunContext, Violation, counters_text, rid_order
from simharness.rng import draw_stop

Key = tuple[str, str, int, str]  # walk, node, rank, rid


class ForwardsCheck:
    name = "forwards"

    def __init__(self) -> None:
        #: (walk, node, rank, rid) -> pass -> counters in order
        self.observed: dict[Key, dict[int, list[int | None]]] = defaultdict(lambda: defaultdict(list))
        self.admitted: dict[str, ev.Admitted] = {}
        self.started: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self.passes_done: dict[str, set[tuple[str, int]]] = defaultdict(set)
        self.overshoots: dict[Key, int] = defaultdict(int)

    def on_Admitted(self, e: ev.Admitted) -> None:
        self.admitted[e.rid] = e

    def on_WalkStarted(self, e: ev.WalkStarted) -> None:
        self.started[e.rid].append((e.walk, e.pass_no))

    def on_PassDone(self, e: ev.PassDone) -> None:
        self.passes_done[e.rid].add((e.walk, e.pass_no))

    def on_Forward(self, e: ev.Forward) -> None:
        self.observed[(e.walk, e.node, e.rank, e.rid)][e.pass_no].append(e.counter)

    def on_Overshoot(self, e: ev.Overshoot) -> None:
        self.overshoots[(e.walk, e.node, e.rank, e.rid)] += 1

    def expected(self, ctx: RunContext) -> tuple[dict[Key, dict[int, list[int | None]]], set[Key]]:
        """Expected counters per key and pass, and the keys compared in total (repeated walks)."""
        sc = ctx.scenario
        exp: dict[Key, dict[int, list[int | None]]] = defaultdict(dict)
        totals: set[Key] = set()
        for rid, adm in self.admitted.items():
            kind = sc.requests[adm.request_kind]
            repeating = {st.walk for steps in kind.partitions.values() for st in steps if st.until_final}
            placement = dict(adm.placement)
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
        return exp, totals

    def finish(self, ctx: RunContext) -> list[Violation]:
        expected, totals = self.expected(ctx)
        out: list[Violation] = []
        keys = set(expected) | set(self.observed)
        for key in sorted(keys, key=lambda k: (rid_order(k[3]), k[0], k[1], k[2])):
            walk, node, rank, rid = key
            done = {p for w, p in self.passes_done.get(rid, ()) if w == walk}
            exp = expected.get(key, {})
            obs = self.observed.get(key, {})
            message = None
            if key in totals:
                got = [c for p in sorted(obs) for c in obs[p]]
                want = exp.get(-1, [])
                n_obs, n_exp = len(got), len(want)
                if ctx.outcomes.get(rid) == "completed" and sorted(got, key=_k) != sorted(want, key=_k):
                    message = f"{n_obs} forwards over its repeated passes, expected {n_exp}"
            else:
                notes = []
                n_obs = n_exp = 0
                for p in sorted(set(exp) | set(obs)):
                    if p not in done:
                        continue
                    got, want = obs.get(p, []), exp.get(p, [])
                    n_obs += len(got)
                    n_exp += len(want)
                    if got != want:
                        notes.append((p, _explain(got, want)))
                if notes:
                    multi = len(exp) > 1
                    text = "; ".join(f"pass {p}: {t}" if multi else t for p, t in notes)
                    message = f"{n_obs} forwards, expected {n_exp}: {text}"
            if message is not None:
                out.append(Violation(self.name, message, walk=walk, node=node, rank=rank, request=rid,
                                     details={"count": n_obs, "expected": n_exp}))
            extra = self.overshoots.get(key, 0)
            if extra > max(1, len(done)):
                out.append(Violation(
                    self.name, f"{extra} speculative forwards were discarded; at most one per "
                               f"dynamic stop is expected", walk=walk, node=node, rank=rank, request=rid,
                    details={"overshoots": extra}))
        return out


def _k(c: int | None) -> int:
    return -1 if c is None else c


def _explain(got: list[int | None], want: list[int | None]) -> str:
    if not want:
        return f"ran {len(got)} forwards where none were expected (loop counters {counters_text(got)})"
    if len(got) > len(want) and got[: len(want)] == want:
        extra = got[len(want):]
        if all(c is None for c in extra):
            return f"{len(extra)} extra forward{'s' if len(extra) > 1 else ''} (the node is in no loop)"
        what = "an extra pass" if len(extra) == 1 else f"{len(extra)} extra passes"
        return f"{what} at loop counter {counters_text(extra)} after the loop ended"
    if len(got) < len(want) and want[: len(got)] == got:
        last = f"after loop counter {got[-1]}" if got and got[-1] is not None else "before its first forward"
        return f"stopped {last}: {len(want) - len(got)} forwards missing"
    return f"loop counters {counters_text(got)} instead of {counters_text(want)}"
