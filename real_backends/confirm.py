"""``simharness confirm``: the simulation and the zmq backend on one scenario, side by side.

Both runs produce the same summary JSON. They agree when they show the same thing:

* the same forwards: for every (walk, node, rank, request), the same count and the same loop
  counter sequence;
* the same outcome (pass or fail) and the same outcome for every request;
* the same violations by check: for every check except ``drain``, the same set of (check, walk,
  node, rank, request) places. For ``drain`` only whether it fired is compared: what a request
  still holds when a rank tears it down, and which late message lands after a removal, depend on
  message timing, which a real run does not share with the simulation. Differences in ``drain``
  details are listed as notes.

Trace digests always differ (real timestamps) and are not compared.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, TextIO

from simharness.checks.base import rid_order
from simharness.report.summary import build_summary
from simharness.wording import plural

#: Checks whose details depend on message timing; compared by presence only.
TIMING_DEPENDENT = ("drain",)


def summarize(report: Any) -> dict[str, Any]:
    """A run's summary JSON plus how each request ended, which `compare` holds to agreement."""
    out = build_summary(report)
    out["request_outcomes"] = dict(report.result.outcomes)
    return out


def _forwards(summary: dict[str, Any]) -> dict[tuple[str, str, int, str], list[Any]]:
    return {(f["walk"], f["node"], f["rank"], f["request"]): f["loop_counters"]
            for f in summary["forwards"]}


def _outcomes(summary: dict[str, Any]) -> dict[str, str]:
    return dict(summary.get("request_outcomes", {}))


def _places(summary: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    return Counter((v["check"], v.get("walk"), v.get("node"), v.get("rank"), v.get("request"))
                   for v in summary["violations"] if v["check"] not in TIMING_DEPENDENT)


def compare(sim: dict[str, Any], real: dict[str, Any]) -> tuple[bool, list[dict[str, Any]]]:
    """(agree, differences). A difference with ``"note": true`` does not break agreement."""
    diffs: list[dict[str, Any]] = []
    fs, fr = _forwards(sim), _forwards(real)
    for key in sorted(set(fs) | set(fr), key=lambda k: (rid_order(k[3]), k[0], k[1], k[2])):
        walk, node, rank, rid = key
        a, b = fs.get(key, []), fr.get(key, [])
        if len(a) != len(b):
            diffs.append({"what": "forwards", "walk": walk, "node": node, "rank": rank,
                          "request": rid, "sim": len(a), "real": len(b)})
        elif a != b:
            diffs.append({"what": "loop_counters", "walk": walk, "node": node, "rank": rank,
                          "request": rid, "sim": a, "real": b})
    if sim["outcome"] != real["outcome"]:
        diffs.append({"what": "outcome", "sim": sim["outcome"], "real": real["outcome"]})
    os_, or_ = _outcomes(sim), _outcomes(real)
    for rid in sorted(set(os_) | set(or_), key=rid_order):
        if os_.get(rid) != or_.get(rid):
            diffs.append({"what": "request_outcome", "request": rid, "sim": os_.get(rid),
                          "real": or_.get(rid)})
    ps, pr = _places(sim), _places(real)
    for place in sorted(set(ps) | set(pr), key=lambda p: tuple(str(x) for x in p)):
        if ps[place] != pr[place]:
            check, walk, node, rank, rid = place
            diffs.append({"what": "violation", "check": check, "walk": walk, "node": node,
                          "rank": rank, "request": rid, "sim": ps[place], "real": pr[place]})
    for check in TIMING_DEPENDENT:
        n_sim = sum(1 for v in sim["violations"] if v["check"] == check)
        n_real = sum(1 for v in real["violations"] if v["check"] == check)
        if bool(n_sim) != bool(n_real):
            diffs.append({"what": "violation", "check": check, "sim": n_sim, "real": n_real})
        elif n_sim != n_real:
            diffs.append({"what": "violation", "check": check, "sim": n_sim, "real": n_real,
                          "note": True})
    agree = not any(not d.get("note") for d in diffs)
    return agree, diffs


def by_check(summary: dict[str, Any]) -> Counter[str]:
    return Counter(v["check"] for v in summary["violations"])


def render(sim: dict[str, Any], real: dict[str, Any], agree: bool, diffs: list[dict[str, Any]],
           out: TextIO) -> None:
    w = out.write
    w(f"simharness confirm · {sim['scenario']} · runtime {sim['runtime']} · seed {sim['seed']}\n")
    extra = real.get("device", "cpu")
    w(f"sim: simpy, {sim['sim_time_s']:.2f} s simulated in {sim['wall_s']:.2f} s wall · "
      f"real: zmq on {extra}, time scale {real.get('time_scale')}, "
      f"{real['sim_time_s']:.2f} s run in {real['wall_s']:.2f} s wall\n\n")
    fs, fr = _forwards(sim), _forwards(real)
    rows: dict[tuple[str, str, int], dict[str, tuple[int | None, int | None]]] = {}
    for key in set(fs) | set(fr):
        walk, node, rank, rid = key
        a = len(fs[key]) if key in fs else None
        b = len(fr[key]) if key in fr else None
        rows.setdefault((walk, node, rank), {})[rid] = (a, b)
    rids = sorted({rid for r in rows.values() for rid in r}, key=rid_order)
    order = {(f["walk"], f["node"], f["rank"]): i for i, f in enumerate(sim["forwards"] + real["forwards"])}
    keys = sorted(rows, key=lambda k: order.get(k, 10**9))
    from simharness.report.table import cell, line, render_table

    labels = [f"{k[0]}  {k[1]}@{k[2]}" for k in keys]
    if len(rids) <= 8:
        body = []
        # sim right-aligned and real left-aligned on the | so that the bars line up
        nw = max([len(_n(x)) for r in rows.values() for pair in r.values() for x in pair] + [1])
        for k, lab in zip(keys, labels, strict=True):
            cells: list[Any] = [lab]
            for rid in rids:
                a, b = rows[k].get(rid, (None, None))
                # sim|real; a pair that differs is marked with ! (and red on a terminal)
                cells.append(cell(f"{_n(a):>{nw}}|{_n(b)}{'' if a == b else '!'}",
                                  None if a == b else "bad"))
            body.append(cells)
        render_table(out, ["forwards (sim|real)", *rids], body)
    else:
        body = []
        for k, lab in zip(keys, labels, strict=True):
            ta = Counter(a for a, _ in rows[k].values() if a is not None)
            tb = Counter(b for _, b in rows[k].values() if b is not None)
            same = all(a == b for a, b in rows[k].values())
            body.append([lab, _tally(ta), _tally(tb), "" if same else cell("!", "bad")])
        render_table(out, ["forwards per request", "sim", "real", ""], body)
    w("\n")
    rs, rr = sim["requests"], real["requests"]
    outcome = [cell(x["outcome"], "good" if x["outcome"] == "pass" else "bad") for x in (sim, real)]
    body = [["outcome", *outcome], ["requests", _req(rs), _req(rr)]]
    cs, cr = by_check(sim), by_check(real)
    if cs or cr:
        body.append(["violations by check", "", ""])
    for check in sorted(set(cs) | set(cr)):
        body.append([f"  {check}", str(cs.get(check, 0)), str(cr.get(check, 0))])
    render_table(out, ["", "sim", "real"], body)
    w("\n")
    real_diffs = [d for d in diffs if not d.get("note")]
    notes = [d for d in diffs if d.get("note")]
    for d in real_diffs[:20]:
        w("  differs: " + _diff_text(d) + "\n")
    if len(real_diffs) > 20:
        w(f"  ... and {len(real_diffs) - 20} more (--json lists them all)\n")
    for d in notes:
        w("  note: " + _diff_text(d) + " (timing-dependent: compared by presence only)\n")
    if agree:
        line(out, "AGREE: the zmq backend shows what the simulation shows", "good")
    else:
        line(out, f"DISAGREE: {plural(len(real_diffs), 'difference')}", "bad")


def _n(x: int | None) -> str:
    return "-" if x is None else str(x)


def _tally(t: Counter[int]) -> str:
    return ", ".join(f"{n} x{m}" for n, m in sorted(t.items())) or "-"


def _req(r: dict[str, int]) -> str:
    return f"{r['completed']}/{r['submitted']} completed, {r['hung']} hung, {r['failed']} failed"


def _diff_text(d: dict[str, Any]) -> str:
    where = " ".join(str(x) for x in (d.get("request"), d.get("walk"),
                                      f"{d['node']}@{d['rank']}" if d.get("node") else None) if x)
    what = d["what"] if d["what"] != "violation" else f"{d['check']} violations"
    return f"{what} {where + ' ' if where else ''}sim {d['sim']} vs real {d['real']}"
