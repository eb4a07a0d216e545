"""Human-readable output of a run: forwards per (walk, node, rank) per request, then violations.

With up to 12 requests, each request gets a column; beyond that a cell lists distinct counts
(``49 x98, 50 x2``). A count that the ``forwards`` check flagged is marked with ``*``.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from collections import Counter, defaultdict
from typing import TextIO

from simharness.checks.base import rid_order
from simharness.report.summary import collect_forwards, forward_order, request_counts
from simharness.run import RunReport

MAX_COLUMNS = 12
MAX_VIOLATIONS = 40

Group = tuple[tuple[str, str | None, str | None, int | None, str], list[str]]


def group_violations(violations: list) -> list[Group]:
    """Violations that say the same thing about different requests, folded into one line.

    The request id inside a message is replaced by "the request" for the comparison, so
    ``r0 was removed ...`` and ``r1 was removed ...`` fold together.
    """
    groups: dict[tuple, list[str]] = {}
    for v in violations:
        text = v.message
        if v.request:
            text = re.sub(rf"\b{re.escape(v.request)}\b", "the request", text)
            text = text[0].upper() + text[1:] if text.startswith("the request") else text
        key = (v.check, v.walk, v.node, v.rank, text)
        groups.setdefault(key, []).append(v.request or "")
    return list(groups.items())


def _rids_text(rids: list[str]) -> str:
    rids = [r for r in rids if r]
    if not rids:
        return ""
    nums = [int(r[1:]) for r in rids if r[1:].isdigit()]
    if len(nums) == len(rids) and len(rids) > 2 and nums == list(range(nums[0], nums[0] + len(nums))):
        return f"r{nums[0]}..r{nums[-1]}"
    if len(rids) > 4:
        return f"{', '.join(rids[:3])} +{len(rids) - 3} more"
    return ",".join(rids)


def render(report: RunReport, out: TextIO, command: list[str] | None = None, width: int = 100) -> None:
    sc = report.scenario
    w = out.write
    w(f"simharness · {sc.name} · runtime {report.runtime} · backend {report.backend} · seed {sc.seed}\n")
    w(f"fingerprint {sc.fingerprint[:23]}…  trace {report.trace_digest[:23]}…\n\n")

    forwards = collect_forwards(report.result.events)
    flagged = {(v.walk, v.node, v.rank, v.request) for v in report.violations if v.check == "forwards"}
    rows: dict[tuple[str, str, int], dict[str, int]] = defaultdict(dict)
    for (walk, node, rank, rid), counters in forwards.items():
        rows[(walk, node, rank)][rid] = len(counters)
    for walk, node, rank, rid in flagged:
        rows[(walk, node, rank)].setdefault(rid, 0)
    rids = sorted({rid for r in rows.values() for rid in r} | set(report.result.outcomes), key=rid_order)
    order = forward_order(sc)
    keys = sorted(rows, key=lambda k: order((k[0], k[1], k[2], "")))
    label_w = max([len(f"{wk}  {n}@{r}") for wk, n, r in keys] + [24])
    if keys:
        if len(rids) <= MAX_COLUMNS:
            w(f"{'forwards per request':<{label_w}}" + "".join(f"{rid:>6}" for rid in rids) + "\n")
            for k in keys:
                cells = []
                for rid in rids:
                    n = rows[k].get(rid)
                    mark = "*" if (k[0], k[1], k[2], rid) in flagged else " "
                    cells.append(f"{'-' if n is None else n:>5}{mark}")
                w(f"{k[0] + '  ' + k[1] + '@' + str(k[2]):<{label_w}}" + "".join(cells) + "\n")
        else:
            w(f"{'forwards per request':<{label_w}}  counts (x requests)\n")
            for k in keys:
                tally = Counter(rows[k].values())
                cell = ", ".join(f"{n} x{m}" for n, m in sorted(tally.items()))
                bad = sum(1 for rid in rows[k] if (k[0], k[1], k[2], rid) in flagged)
                note = f"   ({bad} flagged)" if bad else ""
                w(f"{k[0] + '  ' + k[1] + '@' + str(k[2]):<{label_w}}  {cell}{note}\n")
    rc = request_counts(report)
    if report.backend == "sim":
        ran = f"simulated {report.result.sim_time_s:.2f} s in {report.wall_s:.2f} s wall"
    else:
        x = report.extra
        ran = (f"ran {report.result.sim_time_s:.2f} s on {x.get('device', '?')} (time scale "
               f"{x.get('time_scale', '?')}), {report.wall_s:.2f} s wall with start-up")
    w(f"\nrequests: {rc['submitted']} submitted, {rc['completed']} completed, {rc['hung']} hung, "
      f"{rc['failed']} failed · {ran}\n")

    if report.violations:
        groups = group_violations(report.violations)
        w(f"\nviolations ({len(report.violations)}, {len(groups)} distinct):\n")
        for (check, walk, node, rank, text), rids in groups[:MAX_VIOLATIONS]:
            where = " ".join(x for x in (
                walk or "",
                f"{node}@{rank}" if node is not None and rank is not None
                else (f"rank {rank}" if rank is not None else (node or "")),
            ) if x)
            who = _rids_text(rids)
            head = f"  {check:<10} {who + ' ' if who else ''}{where}: "
            body = textwrap.wrap(text, width=max(40, width - 6),
                                 initial_indent=head, subsequent_indent=" " * 13)
            w("\n".join(body) + "\n")
        if len(groups) > MAX_VIOLATIONS:
            w(f"  ... and {len(groups) - MAX_VIOLATIONS} more (--json lists them all)\n")
        by_check = Counter(v.check for v in report.violations)
        w(f"\nFAIL: {len(report.violations)} violation{'s' if len(report.violations) != 1 else ''} ("
          + ", ".join(f"{c} {n}" for c, n in by_check.items()) + ")\n")
        if command:
            w(f"rerun: SIMHARNESS_SEED={sc.seed} {shlex.join(command)}\n")
    else:
        from simharness.checks import CHECK_NAMES
        names = [c for c in CHECK_NAMES if c != "determinism" or "determinism" in report.extra]
        w(f"\nPASS: every check holds ({', '.join(names)})\n")
