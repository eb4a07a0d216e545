"""Differential runs: one scenario and seed under several runtimes, side by side.

`compare_runtimes` runs every arm with `simharness.run.run_scenario` and finds what differs:

* forward counts per (walk, node) per request, the table the project started from
  (``49 x7`` in one arm, ``50 x7`` in another);
* each arm's outcome and violations;
* the first event where an arm's trace leaves the first arm's (the baseline): which event,
  where (rank, node, request, walk, loop counter) and, for a forward, which routed edges one arm
  has and the other has not.

Arms "differ" (exit code 1 in the CLI) when their counts or outcomes differ; a trace divergence
with equal counts and outcomes is reported but is not a failure (two correct runtimes may route
the same edges in another order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import msgspec

from simharness import events as ev
from simharness import interrupts
from simharness.checks.base import rid_order
from simharness.report.summary import build_summary, collect_forwards, node_order
from simharness.run import RunReport, run_scenario
from simharness.scenario.model import Scenario
from simharness.signals import Signal
from simharness.trace import to_json
from simharness.wording import plural

RowKey = tuple[str, str]  # walk, node


@dataclass
class Comparison:
    scenario: Scenario
    reports: list[RunReport]
    #: (walk, node) -> per arm: request -> forwards (summed over ranks)
    counts: dict[RowKey, list[dict[str, int]]]
    differences: list[dict[str, Any]] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [r.runtime for r in self.reports]

    @property
    def differ(self) -> bool:
        return any(d["kind"] in ("forwards", "outcome") for d in self.differences)

    @property
    def exit_code(self) -> int:
        return 1 if self.differ else 0

    def to_json(self) -> dict[str, Any]:
        return {"arms": [build_summary(r) for r in self.reports], "differences": self.differences}


def compare_runtimes(scenario: Scenario, runtimes: Sequence[str], seed: int | None = None) -> Comparison:
    """Run every arm on the same scenario and seed and collect the differences."""
    reports: list[RunReport] = []
    try:
        for rt in runtimes:
            reports.append(run_scenario(scenario, rt, seed))
    except KeyboardInterrupt as exc:
        # SIGINT or SIGTERM (simharness.interrupts): hand the arms that finished to the caller.
        stop = interrupts.as_interrupted(exc)
        stop.partial = reports
        raise stop from None
    counts = forward_table(reports)
    cmp = Comparison(reports[0].scenario, reports, counts)
    cmp.differences = _count_differences(cmp) + _outcome_differences(cmp)
    base = reports[0]
    for other in reports[1:]:
        div = first_divergence(base.result.events, other.result.events)
        if div is not None:
            div["arms"] = [base.runtime, other.runtime]
            cmp.differences.append(div)
    return cmp


def forward_table(reports: Sequence[RunReport]) -> dict[RowKey, list[dict[str, int]]]:
    """(walk, node) -> one dict per arm of request -> forwards, rows in scenario order."""
    place = node_order(reports[0].scenario)
    rows: dict[RowKey, list[dict[str, int]]] = {}
    for i, rep in enumerate(reports):
        for (walk, node, _rank, rid), counters in collect_forwards(rep.result.events).items():
            per_arm = rows.setdefault((walk, node), [{} for _ in reports])
            per_arm[i][rid] = per_arm[i].get(rid, 0) + len(counters)
    # A request that ran a node in one arm and not in another counts 0 in the other.
    for per_arm in rows.values():
        rids = {rid for arm in per_arm for rid in arm}
        for i, rep in enumerate(reports):
            for rid in rids | set(rep.result.outcomes):
                per_arm[i].setdefault(rid, 0)
    return dict(sorted(rows.items(), key=lambda kv: (*place(*kv[0]), kv[0])))


def compact(counts: dict[str, int]) -> str:
    """``{r0: 50, r1: 50, r2: 49}`` as ``50 x2, 49 x1``: most frequent first."""
    tally = Counter(counts.values())
    if not tally:
        return "-"
    return ", ".join(f"{n} x{m}" for n, m in sorted(tally.items(), key=lambda kv: (-kv[1], -kv[0])))


def _count_differences(cmp: Comparison) -> list[dict[str, Any]]:
    out = []
    for (walk, node), per_arm in cmp.counts.items():
        if all(arm == per_arm[0] for arm in per_arm[1:]):
            continue
        rids = sorted({rid for arm in per_arm for rid in arm
                       if len({a.get(rid, 0) for a in per_arm}) > 1}, key=rid_order)
        out.append({
            "kind": "forwards", "walk": walk, "node": node,
            "counts": {name: compact(arm) for name, arm in zip(cmp.names, per_arm, strict=True)},
            "requests": rids,
        })
    return out


def _outcome_differences(cmp: Comparison) -> list[dict[str, Any]]:
    outcomes = {r.runtime: r.outcome for r in cmp.reports}
    checks = {r.runtime: dict(Counter(v.check for v in r.violations)) for r in cmp.reports}
    if len(set(outcomes.values())) == 1 and len({tuple(sorted(c.items())) for c in checks.values()}) == 1:
        return []
    return [{"kind": "outcome", "outcomes": outcomes, "violations": checks}]


# ---------------------------------------------------------------------------------------------
# traces


def _norm(value: Any) -> Any:
    """An event field as plain comparable data; a signal is its name, destination and origin."""
    if isinstance(value, Signal):
        return ("signal", value.name, value.dest, value.src, value.src_rank, value.counter,
                value.origin)
    if isinstance(value, tuple | list):
        return tuple(_norm(v) for v in value)
    if isinstance(value, msgspec.Struct):  # a record inside an event (`BlockedNode`)
        return _norm(msgspec.structs.astuple(value))
    return value


def _routes(e: ev.Forward) -> Counter[tuple[str, str, str]]:
    return Counter((sig.name, sig.dest, where) for sig, where in e.routes)


def first_divergence(a: Sequence[Any], b: Sequence[Any]) -> dict[str, Any] | None:
    """The first event at which two traces differ, described; None when they are the same."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if type(x) is type(y) and _norm(x) == _norm(y):
            continue
        out: dict[str, Any] = {"kind": "first_divergence", "index": i,
                               "event": _describe(x), "other": _describe(y),
                               "summary": _summary(x, y)}
        if type(x) is ev.Forward and type(y) is ev.Forward:
            rx, ry = _routes(x), _routes(y)
            out["routes"] = {"only_first": _route_list(rx - ry), "only_other": _route_list(ry - rx)}
            fx, fy = set(x.filtered), set(y.filtered)
            if fx != fy:
                out["filtered"] = {"only_first": [list(p) for p in sorted(fx - fy)],
                                   "only_other": [list(p) for p in sorted(fy - fx)]}
        return out
    if len(a) != len(b):
        i = min(len(a), len(b))
        longer, which = (a, "event") if len(a) > len(b) else (b, "other")
        out = {"kind": "first_divergence", "index": i, "event": None, "other": None,
               "summary": f"one trace ends at event {i}; the other goes on with "
                          f"{type(longer[i]).__name__}"}
        out[which] = _describe(longer[i])
        return out
    return None


def _route_list(c: Counter[tuple[str, str, str]]) -> list[dict[str, Any]]:
    return [{"name": n, "dest": d, "to": w, "times": k} for (n, d, w), k in sorted(c.items())]


def _describe(e: Any) -> dict[str, Any]:
    out = to_json(e)
    if type(e) is ev.Forward:
        out["routes"] = [{"name": s.name, "dest": s.dest, "to": w} for s, w in e.routes]
    return out


def _where(e: Any) -> str:
    parts = [type(e).__name__]
    for key in ("rid", "walk", "node"):
        v = getattr(e, key, None)
        if v:
            parts.append(str(v))
    rank = getattr(e, "rank", None)
    if rank is not None:
        parts.append(f"rank {rank}")
    counter = getattr(e, "counter", None)
    if counter is not None:
        parts.append(f"counter {counter}")
    t = getattr(e, "t", None)
    if t is not None:
        parts.append(f"t={t:.6f}")
    return " ".join(parts)


def _summary(x: Any, y: Any) -> str:
    if type(x) is not type(y) or any(getattr(x, k, None) != getattr(y, k, None)
                                     for k in ("rid", "node", "rank", "walk")):
        return f"{_where(x)} | {_where(y)}"
    fields = [f for f in x.__struct_fields__ if _norm(getattr(x, f)) != _norm(getattr(y, f))]
    return f"{_where(x)}: differs in {', '.join(fields)}"


# ---------------------------------------------------------------------------------------------
# console


def render(cmp: Comparison, out: TextIO) -> None:
    w = out.write
    sc = cmp.scenario
    names = cmp.names
    w(f"simharness compare · {sc.name} · seed {sc.seed} · {len(names)} arms\n\n")
    from simharness.report.table import cell, line, render_table

    rows: list[list[Any]] = []
    for (walk, node), per_arm in cmp.counts.items():
        texts = [compact(arm) for arm in per_arm]
        differs = len(set(texts)) > 1
        rows.append([f"{walk}  {node}",
                     *[cell(t, "bad" if differs and t != texts[0] else None) for t in texts],
                     cell("≠", "bad") if differs else ""])
    rows.append([""] * (len(names) + 2))
    rows.append(["outcome", *[cell(r.outcome, "good" if r.outcome == "pass" else "bad") for r in cmp.reports],
                 ""])
    rows.append(["violations", *[str(len(r.violations)) for r in cmp.reports], ""])
    render_table(out, ["forwards per request", *names, ""], rows)
    for r in cmp.reports:
        if r.violations:
            by = Counter(v.check for v in r.violations)
            w(f"  {r.runtime}: " + ", ".join(f"{c} {n}" for c, n in by.items()) + "\n")
    divs = [d for d in cmp.differences if d["kind"] == "first_divergence"]
    if divs:
        w("\nfirst divergence from " + names[0] + ":\n")
        for d in divs:
            w(f"  {d['arms'][1]}: event #{d['index']}: {d['summary']}\n")
            routes = d.get("routes")
            if routes:
                for key, arm in (("only_first", d["arms"][0]), ("only_other", d["arms"][1])):
                    if routes[key]:
                        edges = ", ".join(f"{r['name']}→{r['dest']} ({r['to']})"
                                          + (f" x{r['times']}" if r["times"] > 1 else "")
                                          for r in routes[key])
                        w(f"      routed only by {arm}: {edges}\n")
            filtered = d.get("filtered")
            if filtered:
                for key, arm in (("only_first", d["arms"][0]), ("only_other", d["arms"][1])):
                    if filtered[key]:
                        pairs = ", ".join(f"{n}→{dest}" for n, dest in filtered[key])
                        w(f"      dropped at loop exit only by {arm}: {pairs}\n")
    same = [n for n in names[1:] if not any(d.get("arms", [None, None])[1] == n for d in divs)]
    if same:
        w(f"\nsame trace as {names[0]}: {', '.join(same)}\n")
    if cmp.differ:
        n_rows = sum(1 for d in cmp.differences if d["kind"] == "forwards")
        what = []
        if n_rows:
            what.append(f"forward counts differ on {plural(n_rows, '(walk, node) row')}")
        if any(d["kind"] == "outcome" for d in cmp.differences):
            what.append("outcomes or violations differ")
        w("\n")
        line(out, "DIFFER: " + "; ".join(what), "bad")
    else:
        w("\n")
        line(out, "SAME: every arm has the same forward counts and outcome", "good")


__all__ = ["Comparison", "compact", "compare_runtimes", "first_divergence", "forward_table", "render"]
