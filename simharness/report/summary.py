"""The run summary: the JSON object of DESIGN section 6, and the forward counts behind it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from simharness.checks.base import rid_order
from simharness.checks.forward_log import collect_forwards, counters_of
from simharness.run import RunReport
from simharness.scenario.model import Scenario

ForwardKey = tuple[str, str, int, str]  # walk, node, rank, request


def forwards_of(report: RunReport) -> dict[ForwardKey, list[int | None]]:
    """Loop counters per (walk, node, rank, request) of a run (`forward_log.counters_of`)."""
    return counters_of(report.result.forward_log, report.result.events)


def forward_counts(report: RunReport) -> Iterator[tuple[ForwardKey, int]]:
    """Forwards per (walk, node, rank, request), one key at a time (a soak's console table
    needs the counts, not every counter)."""
    log = report.result.forward_log
    if log is not None:
        yield from log.counts()
    else:
        for key, counters in collect_forwards(report.result.events).items():
            yield key, len(counters)


def node_order(scenario: Scenario):
    """Sort (walk, node) pairs in the order the scenario declares them (unknown ones last)."""
    walk_pos = {w: i for i, w in enumerate(scenario.walks)}
    node_pos = {(w, n): i for w, wf in scenario.walk_facts.items() for i, n in enumerate(wf.nodes)}

    def key(walk: str, node: str) -> tuple[int, int]:
        return (walk_pos.get(walk, 99), node_pos.get((walk, node), 99))

    return key


def forward_order(scenario: Scenario):
    """Sort by request, then walks and nodes in the order the scenario declares them, then rank."""
    place = node_order(scenario)

    def key(k: ForwardKey) -> tuple:
        walk, node, rank, rid = k
        return (rid_order(rid), *place(walk, node), rank)

    return key


def request_counts(report: RunReport) -> dict[str, int]:
    outcomes = report.result.outcomes
    submitted = len(outcomes)
    return {
        "submitted": submitted,
        "completed": sum(1 for o in outcomes.values() if o == "completed"),
        "hung": sum(1 for o in outcomes.values() if o in ("hung", "timeout", "runaway")),
        "failed": sum(1 for o in outcomes.values() if o == "failed"),
    }


def build_summary(report: RunReport) -> dict[str, Any]:
    sc = report.scenario
    forwards = forwards_of(report)
    order = forward_order(sc)
    rows = [
        {"walk": w, "node": n, "rank": r, "request": rid, "count": len(c), "loop_counters": c}
        for (w, n, r, rid), c in sorted(forwards.items(), key=lambda kv: order(kv[0]))
    ]
    out: dict[str, Any] = {
        "scenario": sc.name,
        "runtime": report.runtime,
        "backend": report.backend,
        "seed": sc.seed,
        "fingerprint": sc.fingerprint,
        "trace_digest": report.trace_digest,
        "outcome": report.outcome,
        "requests": request_counts(report),
        "forwards": rows,
        "violations": _violations_json(report.violations),
        "sim_time_s": round(report.result.sim_time_s, 6),
        "wall_s": round(report.wall_s, 4),
    }
    if report.result.notes:
        out["notes"] = list(report.result.notes)
    out.update(report.extra)
    return out


def _violations_json(violations: list[Any]) -> list[dict[str, Any]]:
    """Each violation as JSON, causes first (the checks' order), a symptom with the index of
    the violation that explains it (``symptom_of``)."""
    from simharness.checks import symptoms

    out = []
    for v, cause in zip(violations, symptoms(violations), strict=True):
        doc = v.to_json()
        if cause is not None:
            doc["symptom_of"] = cause
        out.append(doc)
    return out
