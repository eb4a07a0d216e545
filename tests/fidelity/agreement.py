"""What "the model agrees with the real mstar code" means, as data compared between two runs.

For two reports of the same scenario and seed (`mstar-python`, our model, and `mstar`, the real
graph code), `disagreements` lists every difference in:

* forward counts per (walk, node, rank, request);
* the loop counter sequence of each of those;
* per completion (the k-th forward of a node for a request on a rank), the multiset of routed
  edges ``(name, destination, where)``, with what was filtered at loop exit and which loops
  finished;
* the outcome: pass or fail, each request's end, and the violations per check.

The first trace divergence (`simharness.compare.first_divergence`) is added to help whoever has
to explain a disagreement.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from simharness import events as ev
from simharness.compare import first_divergence
from simharness.report.summary import collect_forwards
from simharness.run import RunReport

CompletionKey = tuple[str, str, str, int, int, int]  # rid, walk, node, rank, pass, k-th


def completions(report: RunReport) -> dict[CompletionKey, tuple[Any, ...]]:
    seen: Counter[tuple[str, str, str, int, int]] = Counter()
    out: dict[CompletionKey, tuple[Any, ...]] = {}
    for e in report.result.events:
        if type(e) is not ev.Forward:
            continue
        base = (e.rid, e.walk, e.node, e.rank, e.pass_no)
        k = seen[base]
        seen[base] += 1
        routes = tuple(sorted(Counter((s.name, s.dest, where) for s, where in e.routes).items()))
        # the loops one forward finishes: a set (the order each runtime lists them in is not a
        # semantic)
        out[(*base, k)] = (routes, tuple(sorted(e.filtered)), tuple(sorted(e.finished_loops)),
                           e.counter)
    return out


def outcome(report: RunReport) -> tuple[Any, ...]:
    return (report.outcome, tuple(sorted(report.result.outcomes.items())),
            tuple(sorted(Counter(v.check for v in report.violations).items())))


def disagreements(model: RunReport, real: RunReport, limit: int = 8) -> list[str]:
    out: list[str] = []
    fa, fb = collect_forwards(model.result.events), collect_forwards(real.result.events)
    for key in sorted(set(fa) | set(fb), key=str):
        ca, cb = fa.get(key, []), fb.get(key, [])
        if len(ca) != len(cb):
            out.append(f"forwards {key}: model {len(ca)}, mstar {len(cb)}")
        elif ca != cb:
            out.append(f"loop counters {key}: model {ca}, mstar {cb}")
    pa, pb = completions(model), completions(real)
    for key in sorted(set(pa) | set(pb), key=str):
        if pa.get(key) != pb.get(key):
            out.append(f"completion {key}: model {pa.get(key)}, mstar {pb.get(key)}")
    if outcome(model) != outcome(real):
        out.append(f"outcome: model {outcome(model)}, mstar {outcome(real)}")
    if out:
        div = first_divergence(model.result.events, real.result.events)
        if div is not None:
            out.insert(0, f"first trace divergence at event {div['index']}: {div['summary']}")
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])
