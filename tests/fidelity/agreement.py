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


# -- the model against the real stack -------------------------------------------------------------

#: mechanisms the real stack shows that the model has no part for, each with why it stays a
#: gap (docs/fidelity.md): a run whose stack side shows one is counted under its label, not
#: compared event by event
REAL_ONLY: dict[str, str] = {
    "freed-tensor": "mstar frees a tensor a node still needs (its reference counts); the model "
                    "has no tensors",
    "no-stream-buffer": "a rank routes a stream item to a StreamBuffer it never created; the "
                        "model makes a buffer per consumer partition",
    "skipped-partition-consumer": "a stream consumer runs on the final empty chunk for a request "
                                  "that skips its partition; the model never starts that partition",
}


def model_of(scenario: Any) -> Any:
    """The scenario under ``mstar-python`` with mstar 0.2.1's loop policy (what the stack runs)."""
    import msgspec

    from simharness.runtime.protocol import MSTAR_0_2_1
    from simharness.scenario.model import RuntimeChoice

    options = {f: getattr(MSTAR_0_2_1, f) for f in MSTAR_0_2_1.__struct_fields__}
    return msgspec.structs.replace(scenario, runtime=RuntimeChoice("mstar-python", options))


def real_only(real: RunReport) -> list[str]:
    """The `REAL_ONLY` mechanisms the real stack's run shows, by label."""
    from simharness.mstar.stack.worker import FREED_TENSOR, NO_STREAM_BUFFER

    sc = real.scenario
    kinds: dict[str, Any] = {}
    found: set[str] = set()
    for e in real.result.events:
        t = type(e)
        if t is ev.Submitted:
            kinds[e.rid] = sc.requests.get(e.request_kind)
        elif t is ev.Dropped and e.what == "main_loop_error":
            if FREED_TENSOR in e.reason:
                found.add("freed-tensor")
            elif NO_STREAM_BUFFER in e.reason:
                found.add("no-stream-buffer")
        elif t is ev.Forward:
            kind = kinds.get(e.rid)
            if kind is not None and e.walk not in kind.walks:
                found.add("skipped-partition-consumer")
    return sorted(found)
