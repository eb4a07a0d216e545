"""``simharness run``: run a scenario, check it, print the verdict (and write a trace or a report).

The simulation is the default driver; ``--backend zmq`` runs the same scenario on real processes
(`simharness.commands.real`). A run a signal stops says where it had got to (`partial`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from simharness.commands import common, real
from simharness.errors import UsageError

NAME = "run"
HELP = "run a scenario and check it"
DESCRIPTION = "Run a scenario as a deterministic simulation and check every invariant."
EPILOG = ("Environment: SIMHARNESS_SEED (seed when --seed is absent), "
          "SIMHARNESS_CHECK_DETERMINISM=1 (same as --check-determinism). " + common.EXIT_CODES_TEXT)
TRACE_SUFFIXES = (".json", ".jsonl")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--runtime", metavar="NAME",
                   help="runtime under test (default: the scenario's); see 'simharness runtimes'")
    p.add_argument("--seed", type=int, metavar="N", help=common.SEED_HELP)
    common.set_argument(p)
    p.add_argument("--backend", choices=["sim", "zmq"], default="sim",
                   help="driver: sim (simpy, virtual time) or zmq (one OS process per rank, "
                        "ZMQ sockets, torch work; needs pip install 'simharness[real]')")
    real.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print the summary JSON on stdout")
    common.report_argument(p, "summary.json, trace.jsonl, a Perfetto trace and report.html",
                           "<scenario>-<runtime>-seed<N>")
    p.add_argument("--trace", metavar="FILE",
                   help="FILE.json: a Chrome trace-event file for ui.perfetto.dev (a track per "
                        "node per rank, message arrows, violation markers); FILE.jsonl: every "
                        "event as a JSON line")
    p.add_argument("--check-determinism", action="store_true",
                   help="run twice and fail if the trace digests differ")


def main(args: argparse.Namespace) -> int:
    from simharness.report.console import render
    from simharness.report.summary import build_summary
    from simharness.run import run_scenario
    from simharness.scenario.loader import load_scenario

    _check_trace_name(args.trace)
    common.check_report_target(args.report)
    scenario = load_scenario(args.scenario, args.overrides, allow_large=args.allow_large)
    common.check_runtime(args.runtime, scenario)
    args.runtime = common.corpus_runtime(scenario, args.runtime)
    seed = common.seed(args)
    common.check_output(args.trace, "--trace")
    determinism = args.check_determinism or os.environ.get("SIMHARNESS_CHECK_DETERMINISM") == "1"
    if args.backend == "zmq":
        if args.check_determinism:
            raise UsageError("--check-determinism needs --backend sim: real runs are not "
                             "deterministic in time")
        report = real.run(scenario, args, seed)
    else:
        given = real.given(args)
        if given:
            raise UsageError(f"{', '.join(given)} only {'applies' if len(given) == 1 else 'apply'} "
                             f"to --backend zmq")
        # Events stay in memory only for what writes them out; otherwise memory stays flat in
        # finished requests (a soak of many requests) and the digest is computed as events happen.
        keep = bool(args.trace) or args.report is not None
        report = run_scenario(scenario, args.runtime, seed, check_determinism=determinism,
                              keep_trace=keep)
    for note in report.result.notes:
        print(f"note: {note}", file=sys.stderr)
    summary = build_summary(report) if args.json or args.report is not None else None

    if args.trace:
        path = Path(args.trace)
        common.writing(path, "--trace", lambda: _write_trace(report, path))
    if args.report is not None:
        _write_report(report, summary, args.report, args.command_line)

    if args.json:
        common.print_json(summary)
    else:
        render(report, sys.stdout, command=args.command_line)
    return report.exit_code


def partial(found: Any, args: argparse.Namespace) -> None:
    """Where the run had got to. A real run was judged as far as it went: with --json its
    summary still goes to stdout."""
    if found.backend != "sim" and args.json:
        from simharness.report.summary import build_summary

        common.print_json(build_summary(found))
    common.stopped_run(found)


def _check_trace_name(name: str | None) -> None:
    if name and not name.endswith(TRACE_SUFFIXES):
        raise UsageError(f"--trace {name}: expected FILE.json (a Chrome trace-event file for "
                         f"ui.perfetto.dev) or FILE.jsonl (every event as a JSON line)")


def _write_trace(report: Any, path: Path) -> None:
    if path.is_file():
        print(f"note: replacing existing {path}", file=sys.stderr)
    if path.suffix == ".jsonl":
        report.result.recorder.write_jsonl(path)
        print(f"trace written to {path} (event log, one JSON object per line)", file=sys.stderr)
    else:
        from simharness.report.perfetto import write_perfetto

        write_perfetto(report, path)
        print(f"trace written to {path} (Chrome trace-event format: open it at ui.perfetto.dev)",
              file=sys.stderr)


def _write_report(report: Any, summary: dict | None, target: str, command: list[str]) -> None:
    import dataclasses

    from simharness.report.html import run_page
    from simharness.report.perfetto import write_perfetto
    from simharness.report.story import build_story

    sc = report.scenario
    story = dataclasses.replace(build_story(report, command), trace_file="trace.perfetto.json")
    common.emit_report(target, f"{sc.name}-{report.runtime}-seed{sc.seed}", "summary.json", summary,
                       run_page(report, command, story), {
                           "trace.jsonl": report.result.recorder.write_jsonl,
                           "trace.perfetto.json": lambda path: write_perfetto(story, path),
                       })
