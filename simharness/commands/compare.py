"""``simharness compare``: one scenario and seed under several runtimes, side by side.

The runs and the differences are `simharness.compare`'s; this module owns the verb's arguments,
what it prints, its page, and what it says of the arms that finished before a signal.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from simharness.commands import common
from simharness.errors import UsageError

NAME = "compare"
HELP = "run a scenario under several runtimes and show the differences"
DESCRIPTION = ("Run every runtime (arm) on the same scenario and seed; print forwards per "
               "(walk, node) per request side by side, each arm's outcome and violations, "
               "and the first event where an arm's trace leaves the first arm's.")
EPILOG = ("Exit codes: 0 the arms agree on forward counts and outcome, 1 they differ, "
          f"2 bad input or usage, {common.EXIT_CODES_COMMON}")
#: the run page's sections this page says its own way, for all arms at once
OWN_SECTIONS = ("parameters", "forwards", "console")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--runtime", dest="runtimes", action="append", default=[], metavar="NAME",
                   help="an arm (repeat, at least twice); the first is the baseline")
    p.add_argument("--seed", type=int, metavar="N", help=common.SEED_HELP)
    common.set_argument(p)
    p.add_argument("--json", action="store_true",
                   help='print {"arms": [summary, ...], "differences": [...]} on stdout')
    common.report_argument(p, "compare.json and report.html", "<scenario>-compare-seed<N>")


def main(args: argparse.Namespace) -> int:
    from simharness.compare import compare_runtimes, render
    from simharness.scenario.loader import load_scenario

    if len(args.runtimes) < 2:
        raise UsageError(f"compare needs at least two --runtime arms, got {len(args.runtimes)}")
    common.refuse_repeated_runtime("compare", args.runtimes)
    scenario = load_scenario(args.scenario, args.overrides, allow_large=args.allow_large)
    for name in args.runtimes:
        common.check_runtime(name, scenario)
    common.check_report_target(args.report)
    cmp = compare_runtimes(scenario, args.runtimes, common.seed(args))
    # A scenario's notes come with every arm; say each once, naming the arms when not all have it.
    arms_of: dict[str, list[str]] = {}
    for rep in cmp.reports:
        for note in rep.result.notes:
            arms_of.setdefault(note, []).append(rep.runtime)
    for note, arms in arms_of.items():
        who = "" if len(arms) == len(cmp.reports) else f" ({', '.join(arms)})"
        print(f"note{who}: {note}", file=sys.stderr)
    doc = cmp.to_json() if args.json or args.report is not None else None
    if args.report is not None:
        common.emit_report(args.report, f"{cmp.scenario.name}-compare-seed{cmp.scenario.seed}",
                           "compare.json", doc, page(cmp, args.command_line))
    if args.json:
        common.print_json(doc)
    else:
        render(cmp, sys.stdout)
    return cmp.exit_code


def partial(found: list, args: argparse.Namespace) -> None:
    """The arms that finished before the signal (a list of their `RunReport`s)."""
    for report in found:
        common.finished_run(f"arm {report.runtime}", report)


def page(cmp: Any, command: list[str] | None = None) -> str:
    """The comparison's page: forwards per (walk, node) with one column per arm, each arm's
    outcome, and the sections of every arm that has violations."""
    from html import escape

    from simharness.compare import compact
    from simharness.compare import render as render_console
    from simharness.report.html import run_sections
    from simharness.report.page import console, outcome
    from simharness.report.page import page as html_page
    from simharness.report.story import build_story

    names = cmp.names
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    rows = []
    for (walk, node), per_arm in cmp.counts.items():
        cells = [compact(arm) for arm in per_arm]
        base = per_arm[0]
        tds = []
        for arm, cell in zip(per_arm, cells, strict=True):
            cls = ""
            if arm != base:
                cls = ' class="extra"' if sum(arm.values()) > sum(base.values()) else ' class="missing"'
            tds.append(f"<td{cls}>{escape(cell)}</td>")
        mark = "≠" if len(set(cells)) > 1 else ""
        rows.append(f'<tr><td class="l">{escape(walk)}</td><td class="l">{escape(node)}</td>'
                    f"{''.join(tds)}<td>{mark}</td></tr>")
    outcomes = "".join(f"<td>{outcome(r.outcome)}</td>" for r in cmp.reports)
    viol = "".join(f"<td>{len(r.violations)}</td>" for r in cmp.reports)
    body = [f'<section id="parameters"><h2>Parameters and outcome</h2><p>Scenario '
            f'<code>{escape(cmp.scenario.name)}</code>, seed {cmp.scenario.seed}, '
            f'{len(names)} arms: {"<b class=fail>DIFFER</b>" if cmp.differ else "<b class=pass>SAME</b>"}'
            f'</p></section>',
            f'<section id="forwards"><h2>Forwards per request, one column per arm</h2>'
            f'<p class="caption">A cell differing from the first arm ({escape(names[0])}) is red when it '
            f'has more forwards, yellow when fewer.</p><table><tr><th class="l">walk</th>'
            f'<th class="l">node</th>{head}<th></th></tr>{"".join(rows)}'
            f'<tr><td class="l" colspan="2">outcome</td>{outcomes}<td></td></tr>'
            f'<tr><td class="l" colspan="2">violations</td>{viol}<td></td></tr></table></section>']
    for r in cmp.reports:
        if r.violations:
            body.append(f'<h2>Arm {escape(r.runtime)}</h2>')
            body.extend(run_sections(build_story(r, command), leave_out=OWN_SECTIONS))
    body.append(console(common.rendered(lambda out: render_console(cmp, out))))
    return html_page(f"simharness compare · {cmp.scenario.name} · seed {cmp.scenario.seed}", body)

