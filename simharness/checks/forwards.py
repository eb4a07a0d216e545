"""`forwards`: every node runs exactly as often as the graph implies, with the right counters.

For each request, each pass of a walk it completed, and each node of that walk, the node must
run on every rank of the instance that hosts it, once per iteration of its enclosing loops (the
product of ``max_iters`` when nothing stops early), with its innermost loop counter going
0..n-1 once each per pass. An extra forward after a loop ended, a missing one, a forward on a
rank that should not run the node, or counters out of sequence are violations.

Passes the request never completed (it hung, or timed out) are left to `liveness`. Forwards are
attributed to the pass the rank believed current, so a stray pass after a loop ended counts
against the pass it followed.
"""

from __future__ import annotations

from collections import defaultdict

from simharness import events as ev
from simharness.checks.base import RunContext, Violation, counters_text, rid_order

Key = tuple[str, str, int, str]  # walk, node, rank, rid


class ForwardsCheck:
    name = "forwards"

    def __init__(self) -> None:
        #: (walk, node, rank, rid) -> pass -> counters in order
        self.observed: dict[Key, dict[int, list[int | None]]] = defaultdict(lambda: defaultdict(list))
        self.admitted: dict[str, ev.Admitted] = {}
        self.passes_done: dict[str, set[int]] = defaultdict(set)

    def on_Admitted(self, e: ev.Admitted) -> None:
        self.admitted[e.rid] = e

    def on_PassDone(self, e: ev.PassDone) -> None:
        self.passes_done[e.rid].add(e.pass_no)

    def on_Forward(self, e: ev.Forward) -> None:
        self.observed[(e.walk, e.node, e.rank, e.rid)][e.pass_no].append(e.counter)

    def expected(self, ctx: RunContext) -> dict[Key, dict[int, list[int | None]]]:
        exp: dict[Key, dict[int, list[int | None]]] = defaultdict(dict)
        facts = ctx.scenario.walk_facts
        for rid, adm in self.admitted.items():
            placement = dict(adm.placement)
            for p, walk in enumerate(adm.walks):
                wf = facts[walk]
                for node in wf.nodes:
                    for rank in placement[ctx.layout.wg_of[(walk, node)]]:
                        exp[(walk, node, rank, rid)][p] = wf.counter_sequence(node)
        return exp

    def finish(self, ctx: RunContext) -> list[Violation]:
        expected = self.expected(ctx)
        out: list[Violation] = []
        keys = set(expected) | set(self.observed)
        for key in sorted(keys, key=lambda k: (rid_order(k[3]), k[0], k[1], k[2])):
            walk, node, rank, rid = key
            done = self.passes_done.get(rid, set())
            exp = expected.get(key, {})
            obs = self.observed.get(key, {})
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
            if not notes:
                continue
            multi = len({p for p in exp}) > 1
            text = "; ".join(f"pass {p}: {t}" if multi else t for p, t in notes)
            out.append(Violation(
                self.name, f"{n_obs} forwards, expected {n_exp}: {text}",
                walk=walk, node=node, rank=rank, request=rid,
                details={"count": n_obs, "expected": n_exp},
            ))
        return out


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
