"""``simharness fuzz``: a campaign of generated scenarios under one runtime, failures shrunk and
written to the corpus.

The campaign is `simharness.explore`'s; this module owns the verb's arguments, its checks of
them, its page, and its end. Unlike the other commands, fuzz catches SIGINT and SIGTERM itself:
what it found is a whole campaign summary, printed (and written with --report) as at any other
end, and then it ends with the same last line as every stopped command (`common.stopped`).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from simharness import interrupts
from simharness.commands import common
from simharness.errors import UsageError
from simharness.wording import plural

NAME = "fuzz"
HELP = "search generated layouts, schedules and faults for failures"
DESCRIPTION = ("A fuzz campaign: generated scenarios under one runtime; every failure is "
               "shrunk and written to the corpus as a scenario that replays exactly.")
EPILOG = ("Same --seed and --examples, same result. A --time campaign ends by then, "
          "shrinking included, and prints how many examples it ran. Exit codes: 0 no new "
          "failure, 1 new failures found (or known ones with --fail-on-known), 2 bad "
          f"usage, {common.EXIT_CODES_COMMON} What was found before a signal is kept.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime", metavar="NAME", default="mstar-python",
                   help="runtime under test (default: mstar-python)")
    p.add_argument("--against", metavar="NAME",
                   help="a second runtime as the oracle: every example runs under both, and a "
                        "divergence in forward counts, loop counters, routed edges or outcome is "
                        "a failure (diff:<kind>), whatever the checks say")
    p.add_argument("--schedule", choices=("pct",),
                   help="pct: every example that passes also runs under a few PCT schedules of "
                        "its deliveries (simharness explore); a failing one is kept with its "
                        "schedule, shrunk")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--time", type=float, metavar="S",
                        help="budget in seconds for the whole campaign, shrinking included "
                             "(default 60)")
    budget.add_argument("--examples", type=int, metavar="N", help="number of examples")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="campaign seed (default 0)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1, metavar="N",
                       help="Dask LocalCluster workers (default 1: in this process)")
    where.add_argument("--scheduler", metavar="ADDR", help="an existing Dask scheduler address")
    p.add_argument("--corpus", metavar="DIR",
                   help="where failing cases are written, and known ones are looked up (default: "
                        "the scenarios/corpus of the project the current folder belongs to: the "
                        "nearest one above it, else beside the nearest pyproject.toml or .git)")
    p.add_argument("--no-write", action="store_true", help="do not write corpus cases")
    p.add_argument("--fail-on-known", action="store_true",
                   help="exit 1 on failures the corpus already holds too (default: only new "
                        "failures fail the run, so a CI job gates on regressions)")
    p.add_argument("--no-shrink", action="store_true", help="keep failing examples as found")
    p.add_argument("--tolerated-only", action="store_true",
                   help="inject only faults the protocol tolerates (delays, a slow rank)")
    p.add_argument("--chunk-size", type=int, default=50, metavar="N",
                   help="examples per chunk, the unit of work and of determinism (default 50)")
    p.add_argument("--json", action="store_true", help="print the campaign summary JSON on stdout")
    common.report_argument(p, "fuzz.json and report.html", "fuzz-<runtime>-seed<N>")


def main(args: argparse.Namespace) -> int:
    import time

    started = time.perf_counter()  # --time counts from here: imports and set-up included

    from simharness.explore.campaign import (
        CampaignConfig,
        CampaignResult,
        keep_hypothesis_files_out_of_cwd,
        run_campaign,
    )
    from simharness.explore.report import CaseWriter, Progress, campaign_summary, known_cases, print_summary

    corpus, found = _check(args)
    if found:  # where the corpus was found, said once every argument is accepted
        print(found, file=sys.stderr)
    existed = corpus.is_dir()
    known = known_cases(corpus, args.runtime, args.against)
    cfg = CampaignConfig(args.runtime, seed=args.seed, examples=args.examples,
                         time_s=args.time if args.examples is None else None,
                         workers=args.workers, scheduler=args.scheduler,
                         chunk_size=args.chunk_size, tolerated_only=args.tolerated_only,
                         shrink=not args.no_shrink, known=frozenset(known), against=args.against,
                         schedule=args.schedule)
    common.check_report_target(args.report)
    keep_hypothesis_files_out_of_cwd()
    from simharness.report.progress import StatusLine

    writer = CaseWriter(None if args.no_write else corpus, known)
    if args.examples is None:  # a --time campaign (60 s by default): verdicts keep to it
        writer.until = started + (args.time or 60.0)
    progress = Progress(sys.stderr)
    shrinking = StatusLine(sys.stderr)
    result = CampaignResult(cfg)

    def on_shrink(done: int, total: int, sig: str | None) -> None:
        if sig is None:
            shrinking.done()
        else:
            shrinking.update(f"shrinking failure {done + 1} of {total}: {sig}", force=True)

    # SIGINT and SIGTERM both arrive as `interrupts.Interrupted` (installed by the command line).
    stop: interrupts.Interrupted | None = None
    interrupted = ""
    try:
        run_campaign(cfg, progress, writer, result, started, on_shrink=on_shrink)
    except KeyboardInterrupt as exc:
        stop = interrupts.as_interrupted(exc)
        interrupted = stop.name
        shrinking.done()
        # Failures not final yet are kept as found: a case that fails is worth more than none.
        writer.rest(result, "Not shrunk: the campaign was interrupted.")
    progress.done(result)
    if writer.paths and not existed:
        print(f"created the corpus {corpus} for the {plural(len(writer.paths), 'case')} found",
              file=sys.stderr)
    summary = campaign_summary(result, writer, interrupted)
    if args.report is not None:
        console = common.rendered(lambda out: print_summary(summary, out))
        arms = args.runtime if args.against is None else f"{args.runtime}-vs-{args.against}"
        common.emit_report(args.report, f"fuzz-{arms}-seed{args.seed}", "fuzz.json", summary,
                           page(summary, console))
    if args.json:
        common.print_json(summary)
    else:
        print_summary(summary, sys.stdout)
    if stop is not None:
        return common.stopped(stop)
    failing = summary["failures"] if args.fail_on_known else summary["new"]
    return common.EXIT_FAIL if failing else common.EXIT_PASS


def _check(args: argparse.Namespace) -> tuple[Path, str]:
    """Refuse bad arguments before any work; the corpus folder, and where it was found when no
    ``--corpus`` named it (a line to print; "" when one did)."""
    if args.examples is not None and args.examples < 1:
        raise UsageError(f"--examples must be >= 1, got {args.examples}")
    if args.time is not None and not (math.isfinite(args.time) and args.time > 0):
        raise UsageError(f"--time must be a finite number of seconds > 0, got {args.time:g}")
    if args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if args.chunk_size < 1:
        raise UsageError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.corpus is None:
        from simharness.explore.corpus import locate

        where = locate()
        corpus, found = where.path, where.describe()
    else:
        corpus, found = Path(args.corpus), ""
    if corpus.exists() and not corpus.is_dir():
        raise UsageError(f"--corpus {corpus}: exists and is not a directory (the corpus is a "
                         f"folder of case files)")
    if not args.no_write:
        common.check_creatable(corpus, "--corpus")
    common.check_runtime(args.runtime)
    if args.against is not None:
        common.check_runtime(args.against, flag="--against")
        if args.schedule is not None:
            raise UsageError("--schedule with --against: a searched schedule moves one runtime's "
                             "messages, which the other does not send alike; use one of the two")
        if args.against == args.runtime:
            raise UsageError(f"--against {args.against}: the same runtime as --runtime; a "
                             f"differential campaign compares two")
    return corpus, found


def page(summary: dict[str, Any], console: str) -> str:
    """The campaign's page: its parameters and outcome, the cases found, coverage per feature."""
    from html import escape

    from simharness.report import plots
    from simharness.report.page import console as console_section
    from simharness.report.page import img, outcome
    from simharness.report.page import page as html_page

    s = summary
    failures = "".join(
        f'<tr><td class="l">{escape(f["signature"])}</td><td>{f["count"]}</td><td>{f["nodes"]}</td>'
        f'<td>{f["ranks"]}</td><td class="l">{"known" if f["known"] else "new"}</td>'
        f'<td class="l">{escape(f.get("message", ""))}</td>'
        f'<td class="l">{escape((f.get("verdict") or {}).get("text", ""))}</td>'
        f'<td class="l"><code>{escape(f["replay"] or "(not written)")}</code></td></tr>'
        for f in s["failures"])
    cases = (f'<table><tr><th class="l">signature</th><th>found</th><th>nodes</th><th>ranks</th>'
             f'<th class="l">case</th><th class="l">message</th><th class="l">verdict</th>'
             f'<th class="l">replay</th></tr>{failures}</table>'
             if s["failures"] else '<p class="pass">No failure found.</p>')
    counts = "".join(f'<tr><td class="l">{escape(k)}</td><td>{n}</td></tr>' for k, n in s["outcomes"].items())
    arms = s.get("arms") or s["runtime"]
    body = [f'<section id="parameters"><h2>Parameters and outcome</h2><p>Runtime '
            f'<code>{escape(arms)}</code>, seed {s["seed"]}, {plural(s["examples"], "example")} '
            f'({s["examples_per_s"]}/s); {outcome("fail" if s["failures"] else "pass")}</p>'
            f'<table><tr><th class="l">outcome</th><th>examples</th></tr>{counts}</table>'
            f'<p>Reproduce: <code>{escape(s["reproduce"])}</code></p></section>',
            f'<section id="cases"><h2>Cases found</h2>{cases}</section>',
            f'<section id="coverage"><h2>Coverage ({escape(s["coverage"]["reached"])} features)</h2>'
            f'{img(plots.coverage_chart(s["coverage"]), "coverage per feature", "coverage-chart")}</section>',
            console_section(console)]
    return html_page(f"simharness fuzz · {s['runtime']} · seed {s['seed']}", body)
