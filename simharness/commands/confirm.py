"""``simharness confirm``: one scenario in the simulation and on real processes, side by side.

The comparison is `real_backends.confirm`'s (imported only when the command runs: it needs
pyzmq and torch); this module owns the verb's arguments, its page, and what it says when a
signal stops it (the simulation may have finished while the real run had not).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from simharness import interrupts
from simharness.commands import common, real
from simharness.wording import plural

NAME = "confirm"
HELP = "run the simulation and the zmq backend on a scenario, side by side"
DESCRIPTION = ("Run a scenario in the simulation and on real processes (zmq backend) and "
               "compare forwards per node per request, outcomes and violations by check.")
EPILOG = ("Exit codes: 0 the two agree, 1 they disagree, 2 bad input or usage, "
          f"{common.EXIT_CODES_COMMON} SIMHARNESS_SEED gives the seed when --seed is absent.")
#: the run page's sections this page says its own way, for both runs at once
OWN_SECTIONS = ("parameters", "forwards", "console")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--runtime", metavar="NAME", help="runtime under test (default: the scenario's)")
    p.add_argument("--seed", type=int, metavar="N", help=common.SEED_HELP)
    common.set_argument(p)
    p.add_argument("--json", action="store_true",
                   help='print {"sim": ..., "real": ..., "agree": ..., "differences": [...]}')
    common.report_argument(p, "confirm.json and report.html", "<scenario>-confirm-<runtime>-seed<N>")
    real.add_arguments(p)


def main(args: argparse.Namespace) -> int:
    from simharness.run import run_scenario
    from simharness.scenario.loader import load_scenario

    scenario = load_scenario(args.scenario, args.overrides, allow_large=args.allow_large)
    common.check_runtime(args.runtime, scenario)
    args.runtime = common.corpus_runtime(scenario, args.runtime)
    seed = common.seed(args)
    real.options(args)  # fail on a missing dependency before simulating anything
    from real_backends.confirm import compare, render, summarize
    from real_backends.launcher import refuse_perturbations

    refuse_perturbations(scenario, "confirm")  # before the simulation, not after it

    common.check_report_target(args.report)
    # the real run's deadline and the report read the simulation's events: keep them
    sim = run_scenario(scenario, args.runtime, seed, keep_trace=True)
    try:
        got = real.run(scenario, args, seed, sim_report=sim)
    except interrupts.Interrupted as exc:
        exc.partial = {"sim": sim, "real": exc.partial}
        raise
    a, b = summarize(sim), summarize(got)
    agree, diffs = compare(a, b)
    doc = {"sim": a, "real": b, "agree": agree, "differences": diffs}
    if args.report is not None:
        console = common.rendered(lambda out: render(a, b, agree, diffs, out))
        common.emit_report(args.report,
                           f"{sim.scenario.name}-confirm-{sim.runtime}-seed{sim.scenario.seed}",
                           "confirm.json", doc,
                           page(sim, got, a, b, agree, diffs, console, args.command_line))
    if args.json:
        common.print_json(doc)
    else:
        render(a, b, agree, diffs, sys.stdout)
    return common.EXIT_PASS if agree else common.EXIT_FAIL


def partial(found: Any, args: argparse.Namespace) -> None:
    """What was done: the simulation cut short (a `RunReport`), or the simulation finished and
    the real run cut short (``{"sim": ..., "real": ...}``, the real run None before it began)."""
    if isinstance(found, dict):
        common.finished_run("the simulation", found["sim"])
        found = found["real"]
    if found is not None:
        common.stopped_run(found)


def page(sim: Any, got: Any, a: dict, b: dict, agree: bool, diffs: list[dict], console: str,
         command: list[str] | None = None) -> str:
    """Both runs' page: forwards per (request, walk, node, rank), sim against real, then each
    run's sections."""
    from html import escape

    from simharness.checks.base import rid_order
    from simharness.report.html import run_sections
    from simharness.report.page import console as console_section
    from simharness.report.page import page as html_page
    from simharness.report.story import build_story

    fs = {(f["walk"], f["node"], f["rank"], f["request"]): f["count"] for f in a["forwards"]}
    fr = {(f["walk"], f["node"], f["rank"], f["request"]): f["count"] for f in b["forwards"]}
    rows = []
    for key in sorted(set(fs) | set(fr), key=lambda k: (rid_order(k[3]), k[0], k[1], k[2])):
        x, y = fs.get(key, 0), fr.get(key, 0)
        cls = "" if x == y else (' class="extra"' if y > x else ' class="missing"')
        rows.append(f'<tr><td class="l">{escape(key[3])}</td><td class="l">{escape(key[0])}</td>'
                    f'<td class="l">{escape(key[1])}</td><td>{key[2]}</td><td>{x}</td><td{cls}>{y}</td></tr>')
    verdict = '<b class="pass">AGREE</b>' if agree else '<b class="fail">DISAGREE</b>'
    body = [f'<section id="parameters"><h2>Parameters and outcome</h2><p>Scenario '
            f'<code>{escape(sim.scenario.name)}</code> under {escape(sim.runtime)}, seed '
            f'{sim.scenario.seed}: sim and real {verdict}'
            f' ({plural(len([d for d in diffs if not d.get("note")]), "difference")})</p></section>',
            '<section id="forwards"><h2>Forwards, sim | real</h2><p class="caption">A real count above '
            'the simulation is red, below it yellow.</p><table><tr><th class="l">request</th>'
            '<th class="l">walk</th><th class="l">node</th><th>rank</th><th>sim</th><th>real</th></tr>'
            + "".join(rows) + "</table></section>"]
    for label, rep in (("simulation", sim), ("real processes", got)):
        body.append(f"<h2>{escape(label)}</h2>")
        body.extend(run_sections(build_story(rep, command), leave_out=OWN_SECTIONS))
    body.append(console_section(console))
    return html_page(f"simharness confirm · {sim.scenario.name} · seed {sim.scenario.seed}", body)
