"""Human-readable output of a run: forwards per (walk, node, rank) per request, then violations.

With up to 12 requests, each request gets a column; beyond that a cell lists distinct counts
(``49 x98, 50 x2``). A count that the ``forwards`` check flagged is marked with ``*``.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from collections import Counter, defaultdict
from typing import Any, TextIO

from simharness.checks.base import rid_order
from simharness.report.summary import forward_counts, forward_order, request_counts
from simharness.report.table import cell, line, render_table
from simharness.ridmap import rid_number
from simharness.run import RunReport
from simharness.wording import plural

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
        groups.setdefault(fold_key(v), []).append(v.request or "")
    return list(groups.items())


def where_text(walk: str | None, node: str | None, rank: int | None) -> str:
    """Where a violation is, as the console and the page say it: ``walk node@rank``,
    ``walk rank N`` or ``walk node``."""
    at = (f"{node}@{rank}" if node is not None and rank is not None
          else (f"rank {rank}" if rank is not None else (node or "")))
    return " ".join(x for x in (walk or "", at) if x)


def fold_key(v: Any) -> tuple[str, str | None, str | None, int | None, str]:
    """What `group_violations` folds a violation by: where it is and what it says, the request
    id in its message made "the request"."""
    text = v.message
    if v.request:
        text = re.sub(rf"\b{re.escape(v.request)}\b", "the request", text)
        text = text[0].upper() + text[1:] if text.startswith("the request") else text
    return (v.check, v.walk, v.node, v.rank, text)


def _rids_text(rids: list[str]) -> str:
    rids = [r for r in rids if r]
    if not rids:
        return ""
    nums = [n for n in map(rid_number, rids) if n is not None]
    if len(nums) == len(rids) and len(rids) > 2 and nums == list(range(nums[0], nums[0] + len(nums))):
        return f"r{nums[0]}..r{nums[-1]}"
    if len(rids) > 4:
        return f"{', '.join(rids[:3])} +{len(rids) - 3} more"
    return ",".join(rids)


#: options that say where output goes, not what runs: left out of the rerun line
OUTPUT_OPTIONS = ("--report", "--trace", "--json")


def rerun_command(seed: int, command: list[str]) -> str:
    """The line that reruns `command` with the same seed, without its output options."""
    keep: list[str] = []
    skip_value = False
    for i, tok in enumerate(command):
        if skip_value:
            skip_value = False
            continue
        name = tok.split("=", 1)[0]
        if name in OUTPUT_OPTIONS:
            # --report takes an optional folder, --trace a file: drop the value that follows
            nxt = command[i + 1] if i + 1 < len(command) else None
            skip_value = "=" not in tok and name != "--json" and nxt is not None and not nxt.startswith("-")
            continue
        keep.append(tok)
    return f"SIMHARNESS_SEED={seed} {shlex.join(keep)}"


def render(report: RunReport, out: TextIO, command: list[str] | None = None, width: int = 100) -> None:
    sc = report.scenario
    w = out.write
    w(f"simharness · {sc.name} · runtime {report.runtime} · backend {report.backend} · seed {sc.seed}\n")
    w(f"fingerprint {sc.fingerprint[:23]}…  trace {report.trace_digest[:23]}…\n\n")

    # (a forwards violation names its walk, node, rank and request)
    flagged: set[tuple[Any, Any, Any, Any]] = {
        (v.walk, v.node, v.rank, v.request) for v in report.violations if v.check == "forwards"}
    rows: dict[tuple[str, str, int], dict[str, int]] = defaultdict(dict)
    for (walk, node, rank, rid), n in forward_counts(report):
        rows[(walk, node, rank)][rid] = n
    for walk, node, rank, rid in flagged:
        rows[(walk, node, rank)].setdefault(rid, 0)
    rids = sorted({rid for r in rows.values() for rid in r} | set(report.result.outcomes), key=rid_order)
    order = forward_order(sc)
    keys = sorted(rows, key=lambda k: order((k[0], k[1], k[2], "")))
    if keys:
        label = [f"{k[0]}  {k[1]}@{k[2]}" for k in keys]
        if len(rids) <= MAX_COLUMNS:
            body = []
            # Counts are right-aligned by hand within a left-aligned column so that a flagged
            # count's * sticks out to the right and the digits stay in line.
            nw = max(len(str(n)) for r in rows.values() for n in r.values())
            for k, lab in zip(keys, label, strict=True):
                cells: list = [lab]
                for rid in rids:
                    got = rows[k].get(rid)
                    bad = (k[0], k[1], k[2], rid) in flagged
                    cells.append(cell(f"{'-' if got is None else got:>{nw}}{'*' if bad else ''}",
                                      "bad" if bad else None))
                body.append(cells)
            ends = report.result.outcomes
            if any(ends.get(rid, "completed") != "completed" for rid in rids):
                # a request that did not complete has passes missing from its column: say so
                body.append(["request ended", *[cell(ends.get(rid, "-") if ends.get(rid) != "completed"
                                                     else "ok", None if ends.get(rid) == "completed"
                                                     else "bad") for rid in rids]])
            render_table(out, ["forwards per request", *rids], body)
        else:
            body = []
            for k, lab in zip(keys, label, strict=True):
                tally = Counter(rows[k].values())
                text = ", ".join(f"{n} x{m}" for n, m in sorted(tally.items()))
                n_bad = sum(1 for rid in rows[k] if (k[0], k[1], k[2], rid) in flagged)
                body.append([lab, cell(text, "bad" if n_bad else None),
                             f"({n_bad} flagged)" if n_bad else ""])
            render_table(out, ["forwards per request", "counts (x requests)", ""], body)
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
        from simharness.checks import causes_and_symptoms, symptoms

        causes, effects = causes_and_symptoms(report.violations)
        groups = group_violations(causes)
        symptom_groups = group_violations(effects)
        n = len(groups) + len(symptom_groups)
        w(f"\nviolations ({len(report.violations)}, {n} distinct):\n")

        # a long explanation (a hang's) is shown by its headline; --json and --report keep it
        headlines = {fold_key(v): v.headline for v in report.violations if v.headline}

        def show(found: list[Group], indent: int) -> None:
            for key, rids in found:
                check, v_walk, v_node, v_rank, text = key
                text = headlines.get(key, text)
                where = where_text(v_walk, v_node, v_rank)
                who = _rids_text(rids)
                head = f"{' ' * indent}{check:<10} {who + ' ' if who else ''}{where}: "
                wrapped = textwrap.wrap(text, width=max(40, width - 4 - indent),
                                        initial_indent=head, subsequent_indent=" " * (indent + 11))
                w("\n".join(wrapped) + "\n")

        show(groups[:MAX_VIOLATIONS], 2)
        if symptom_groups:
            explained = sorted({report.violations[i].check for i in symptoms(report.violations)
                                if i is not None})
            w(f"  symptoms, explained by the {' and '.join(explained)} violation"
              f"{'s' if len(causes) > 1 else ''} above ({len(effects)}):\n")
            show(symptom_groups[:max(0, MAX_VIOLATIONS - len(groups))], 4)
        if n > MAX_VIOLATIONS:
            w(f"  ... and {n - MAX_VIOLATIONS} more (--json lists them all)\n")
        if headlines:
            w("  (each hang's whole explanation: --json, or the --report page)\n")
        by_check = Counter(v.check for v in report.violations)
        w("\n")
        line(out, f"FAIL: {plural(len(report.violations), 'violation')} ("
             + ", ".join(f"{c} {n}" for c, n in by_check.items()) + ")", "bad")
        if command:
            w(f"rerun: {rerun_command(sc.seed, command)}\n")
    else:
        from simharness.checks import CHECK_NAMES
        names = [c for c in CHECK_NAMES if c != "determinism" or "determinism" in report.extra]
        w("\n")
        line(out, f"PASS: every check holds ({', '.join(names)})", "good")
