"""``simharness sweep``: scenarios x seeds x runtimes, in parallel, every verdict against the
expected one.

The matrix, the runs and the table are `simharness.sweep`'s; this module owns the verb's
arguments and what it says of the runs that finished before a signal.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from simharness.commands import common
from simharness.errors import UsageError
from simharness.wording import plural

NAME = "sweep"
HELP = "run scenarios x seeds x runtimes in parallel and tabulate the verdicts"
DESCRIPTION = ("Run every scenario under every runtime for every seed, each run with every "
               "built-in check, on this process or Dask workers; print one line per "
               "(scenario, runtime) and every run whose verdict is not the expected one. "
               "Expected: the --baseline file's verdict for that run, else a corpus case's "
               "recorded failure under its runtime while open, else pass.")
EPILOG = ("Exit codes: 0 every run as expected, 1 a run was not (or the harness raised), "
          f"2 bad input or usage, {common.EXIT_CODES_COMMON}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="scenario YAML file(s)")
    p.add_argument("--seeds", metavar="A..B",
                   help="seeds A to B, both included, or one seed N (default: each scenario's)")
    p.add_argument("--runtime", dest="runtimes", action="append", default=[], metavar="NAME",
                   help="a runtime (repeatable; default: each scenario's own)")
    common.set_argument(p, allow_large=False)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1, metavar="N",
                       help="Dask LocalCluster workers (default 1: in this process)")
    where.add_argument("--scheduler", metavar="ADDR", help="an existing Dask scheduler address")
    p.add_argument("--baseline", metavar="FILE",
                   help="the --json output of an earlier sweep: each run is expected to keep "
                        "its verdict there")
    p.add_argument("--strict", action="store_true",
                   help="with --baseline, a run whose trace digest changed is unexpected too")
    p.add_argument("--expect-fail", dest="expect_fail", action="append", default=[], metavar="NAME",
                   help="a runtime known to fail (repeatable): its runs are expected to fail "
                        "some check, and one that passes is unexpected")
    p.add_argument("--json", action="store_true",
                   help="print {rows, cells, unexpected, ...} on stdout")


def main(args: argparse.Namespace) -> int:
    from simharness.sweep import parse_seeds, plan, render, run_sweep

    if args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if args.strict and not args.baseline:
        raise UsageError("--strict compares trace digests with a --baseline; give one")
    common.refuse_repeated_runtime("sweep", args.runtimes)
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    cells = plan(args.scenarios, args.overrides, args.runtimes, seeds)
    total = len(cells)
    done = [0]

    def progress(cell: Any) -> None:
        done[0] += 1
        if not args.json and (done[0] % 50 == 0 or done[0] == total):
            print(f"sweep: {done[0]}/{total} runs", file=sys.stderr)

    for name in args.expect_fail:
        if name not in args.runtimes:
            raise UsageError(f"--expect-fail {name}: not a --runtime of this sweep "
                             f"({', '.join(args.runtimes) or 'none given'})")
    result = run_sweep(cells, args.workers, args.scheduler, args.baseline, args.strict, progress,
                       frozenset(args.expect_fail))
    if args.json:
        common.print_json(result.to_json())
    else:
        render(result, sys.stdout)
    return result.exit_code


def partial(found: Any, args: argparse.Namespace) -> None:
    """The runs that finished before the signal (a `SweepResult`), and the unexpected ones."""
    bad = len(found.unexpected)
    print(f"the sweep was stopped after {plural(len(found.cells), 'run')} "
          f"({bad} unexpected)" + (f": {', '.join(_cell_name(c) for c in found.unexpected[:5])}"
                                   if bad else ""), file=sys.stderr)


def _cell_name(c: Any) -> str:
    return f"{c.scenario} {c.runtime} seed {c.seed}"
