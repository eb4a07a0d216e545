"""The ``simharness`` command line.

Exit codes: 0 every check passed, 1 a check failed (violations found), 2 bad input or usage
(``sweep``: 1 when a run's verdict is not the expected one), 3 internal error (a bug in simharness
itself: one line, and the traceback saved to a file), 130 and 143 stopped by SIGINT and SIGTERM
(after printing what was found so far).
Bad input gets one line naming the file, the key path and what was expected; never a traceback.
With ``--json`` the only thing on stdout is the summary object; everything else goes to stderr.
A reader that closes stdout early (``--json | head``) ends the command quietly with 141.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

from simharness import __version__, interrupts
from simharness.errors import ScenarioError, UsageError
from simharness.wording import hint, plural

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
#: 128 + SIGPIPE, what a shell reports for a writer whose reader went away.
EXIT_BROKEN_PIPE = 141
#: How every epilog ends: the two exit codes all commands share.
EXIT_CODES_COMMON = "3 internal error (traceback saved to a file), 130/143 interrupted."
EXIT_CODES_TEXT = f"Exit codes: 0 pass, 1 violations found, 2 bad input or usage, {EXIT_CODES_COMMON}"
#: --seed of run, compare and confirm (`_seed`)
SEED_HELP = "root seed (default: SIMHARNESS_SEED, else the scenario's)"


class _Parser(argparse.ArgumentParser):
    """argparse, with "did you mean" added to an invalid choice (a verb, --backend, --device)
    and to an unrecognized option, which is refused with its command's usage."""

    def error(self, message: str) -> NoReturn:
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2))
            message += hint(m.group(1), choices)
        super().error(message)

    def parse_args(self, args=None, namespace=None):
        # argparse leaves a command's unknown options to the top parser, which shows its own
        # usage (COMMAND ...): refuse them here, from the command's parser and with its options.
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            sub = self._command_parser(getattr(ns, "command", None))
            message = f"unrecognized arguments: {' '.join(extras)}"
            flag = next((a.partition("=")[0] for a in extras if a.startswith("--")), None)
            if flag:
                message += hint(flag, sub._option_string_actions)
            sub.error(message)
        return ns

    def _command_parser(self, command: str | None) -> argparse.ArgumentParser:
        """The parser of `command` (this one without a command)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                return action.choices[command]
        return self


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="simharness",
        description="Simulate a distributed graph-runtime layout (mstar first) and check it.",
        epilog=EXIT_CODES_TEXT,
    )
    p.add_argument("--version", action="version", version=f"simharness {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run", help="run a scenario and check it",
        description="Run a scenario as a deterministic simulation and check every invariant.",
        epilog="Environment: SIMHARNESS_SEED (seed when --seed is absent), "
               "SIMHARNESS_CHECK_DETERMINISM=1 (same as --check-determinism). " + EXIT_CODES_TEXT,
    )
    run.add_argument("scenario", help="scenario YAML file")
    run.add_argument("--runtime", metavar="NAME",
                     help="runtime under test (default: the scenario's); see 'simharness runtimes'")
    run.add_argument("--seed", type=int, metavar="N", help=SEED_HELP)
    _set_argument(run)
    run.add_argument("--backend", choices=["sim", "zmq"], default="sim",
                     help="driver: sim (simpy, virtual time) or zmq (one OS process per rank, "
                          "ZMQ sockets, torch work; needs pip install 'simharness[real]')")
    _real_arguments(run)
    run.add_argument("--json", action="store_true", help="print the summary JSON on stdout")
    _report_argument(run, "summary.json, trace.jsonl, a Perfetto trace and report.html",
                     "<scenario>-<runtime>-seed<N>")
    run.add_argument("--trace", metavar="FILE",
                     help="FILE.json: a Chrome trace-event file for ui.perfetto.dev (a track per "
                          "node per rank, message arrows, violation markers); FILE.jsonl: every "
                          "event as a JSON line")
    run.add_argument("--check-determinism", action="store_true",
                     help="run twice and fail if the trace digests differ")

    cmp = sub.add_parser(
        "compare", help="run a scenario under several runtimes and show the differences",
        description="Run every runtime (arm) on the same scenario and seed; print forwards per "
                    "(walk, node) per request side by side, each arm's outcome and violations, "
                    "and the first event where an arm's trace leaves the first arm's.",
        epilog="Exit codes: 0 the arms agree on forward counts and outcome, 1 they differ, "
               f"2 bad input or usage, {EXIT_CODES_COMMON}",
    )
    cmp.add_argument("scenario", help="scenario YAML file")
    cmp.add_argument("--runtime", dest="runtimes", action="append", default=[], metavar="NAME",
                     help="an arm (repeat, at least twice); the first is the baseline")
    cmp.add_argument("--seed", type=int, metavar="N", help=SEED_HELP)
    _set_argument(cmp)
    cmp.add_argument("--json", action="store_true",
                     help='print {"arms": [summary, ...], "differences": [...]} on stdout')
    _report_argument(cmp, "compare.json and report.html", "<scenario>-compare-seed<N>")
    conf = sub.add_parser(
        "confirm", help="run the simulation and the zmq backend on a scenario, side by side",
        description="Run a scenario in the simulation and on real processes (zmq backend) and "
                    "compare forwards per node per request, outcomes and violations by check.",
        epilog="Exit codes: 0 the two agree, 1 they disagree, 2 bad input or usage, "
               f"{EXIT_CODES_COMMON} SIMHARNESS_SEED gives the seed when --seed is absent.",
    )
    conf.add_argument("scenario", help="scenario YAML file")
    conf.add_argument("--runtime", metavar="NAME", help="runtime under test (default: the scenario's)")
    conf.add_argument("--seed", type=int, metavar="N", help=SEED_HELP)
    _set_argument(conf)
    conf.add_argument("--json", action="store_true",
                      help='print {"sim": ..., "real": ..., "agree": ..., "differences": [...]}')
    _report_argument(conf, "confirm.json and report.html", "<scenario>-confirm-<runtime>-seed<N>")
    _real_arguments(conf)

    rts = sub.add_parser("runtimes", help="list the runtimes under test")
    rts.set_defaults(command="runtimes")

    lay = sub.add_parser("layout", help="show how a scenario's walks split into worker graphs")
    lay.add_argument("scenario", help="scenario YAML file")
    _set_argument(lay)

    fz = sub.add_parser(
        "fuzz", help="search generated layouts, schedules and faults for failures",
        description="A fuzz campaign: generated scenarios under one runtime; every failure is "
                    "shrunk and written to the corpus as a scenario that replays exactly.",
        epilog="Same --seed and --examples, same result. A --time campaign ends by then, "
               "shrinking included, and prints how many examples it ran. Exit codes: 0 no new "
               "failure, 1 new failures found (or known ones with --fail-on-known), 2 bad "
               f"usage, {EXIT_CODES_COMMON} What was found before a signal is kept.")
    fz.add_argument("--runtime", metavar="NAME", default="mstar-python",
                    help="runtime under test (default: mstar-python)")
    budget = fz.add_mutually_exclusive_group()
    budget.add_argument("--time", type=float, metavar="S",
                        help="budget in seconds for the whole campaign, shrinking included "
                             "(default 60)")
    budget.add_argument("--examples", type=int, metavar="N", help="number of examples")
    fz.add_argument("--seed", type=int, default=0, metavar="N", help="campaign seed (default 0)")
    where = fz.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1, metavar="N",
                       help="Dask LocalCluster workers (default 1: in this process)")
    where.add_argument("--scheduler", metavar="ADDR", help="an existing Dask scheduler address")
    fz.add_argument("--corpus", metavar="DIR", default="scenarios/corpus",
                    help="where failing cases are written, and known ones are looked up "
                         "(default scenarios/corpus)")
    fz.add_argument("--no-write", action="store_true", help="do not write corpus cases")
    fz.add_argument("--fail-on-known", action="store_true",
                    help="exit 1 on failures the corpus already holds too (default: only new "
                         "failures fail the run, so a CI job gates on regressions)")
    fz.add_argument("--no-shrink", action="store_true", help="keep failing examples as found")
    fz.add_argument("--tolerated-only", action="store_true",
                    help="inject only faults the protocol tolerates (delays, a slow rank)")
    fz.add_argument("--chunk-size", type=int, default=50, metavar="N",
                    help="examples per chunk, the unit of work and of determinism (default 50)")
    fz.add_argument("--json", action="store_true", help="print the campaign summary JSON on stdout")
    _report_argument(fz, "fuzz.json and report.html", "fuzz-<runtime>-seed<N>")

    imp = sub.add_parser(
        "import-mstar", help="write a scenario from an mstar config and the model's own graphs",
        description="Build a scenario from mstar's own model code: the config's model, created "
                    "without weights, gives its walks, partitions and streams; the config gives "
                    "the node groups. Request kinds and dynamic-loop lengths, which the model "
                    "decides at run time, are marked defaults to edit.",
        epilog="CONFIG is a config file or the name of a config shipped with mstar-ai "
               "(e.g. bagel_cfg_parallel). Exit codes: 0 written, 2 bad input or usage, "
               f"{EXIT_CODES_COMMON}")
    imp.add_argument("config", help="mstar config YAML, or the name of one in mstar's default_configs")
    imp.add_argument("-o", "--output", metavar="SCENARIO.yaml",
                     help="where to write the scenario (default: <CONFIG's name>.yaml in the "
                          "current directory; '-' prints it to stdout)")
    imp.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="model.FIELD=VALUE sets a field of the model's config class (e.g. "
                          "model.num_timesteps=11); any other key sets a key of the written "
                          "scenario (e.g. workload[0].count=10); repeatable")
    imp.add_argument("--force", action="store_true", help="replace an existing output file")

    sw = sub.add_parser(
        "sweep", help="run scenarios x seeds x runtimes in parallel and tabulate the verdicts",
        description="Run every scenario under every runtime for every seed, each run with every "
                    "built-in check, on this process or Dask workers; print one line per "
                    "(scenario, runtime) and every run whose verdict is not the expected one. "
                    "Expected: the --baseline file's verdict for that run, else a corpus case's "
                    "recorded failure under its runtime while open, else pass.",
        epilog="Exit codes: 0 every run as expected, 1 a run was not (or the harness raised), "
               f"2 bad input or usage, {EXIT_CODES_COMMON}")
    sw.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="scenario YAML file(s)")
    sw.add_argument("--seeds", metavar="A..B",
                    help="seeds A to B, both included, or one seed N (default: each scenario's)")
    sw.add_argument("--runtime", dest="runtimes", action="append", default=[], metavar="NAME",
                    help="a runtime (repeatable; default: each scenario's own)")
    _set_argument(sw, allow_large=False)
    sw_where = sw.add_mutually_exclusive_group()
    sw_where.add_argument("--workers", type=int, default=1, metavar="N",
                          help="Dask LocalCluster workers (default 1: in this process)")
    sw_where.add_argument("--scheduler", metavar="ADDR", help="an existing Dask scheduler address")
    sw.add_argument("--baseline", metavar="FILE",
                    help="the --json output of an earlier sweep: each run is expected to keep "
                         "its verdict there")
    sw.add_argument("--strict", action="store_true",
                    help="with --baseline, a run whose trace digest changed is unexpected too")
    sw.add_argument("--json", action="store_true",
                    help="print {rows, cells, unexpected, ...} on stdout")

    rp = sub.add_parser("replay", help="replay a corpus case and check it behaves as recorded",
                        epilog=f"Exit codes: 0 as recorded, 1 diverged, 2 bad input, {EXIT_CODES_COMMON}")
    rp.add_argument("case", nargs="+", help="corpus case YAML file(s)")
    rp.add_argument("--update", action="store_true",
                    help="record the new trace digest of cases that still behave as recorded")
    rp.add_argument("--json", action="store_true", help="print one JSON object per case")
    _report_argument(rp, "replay.json and report.html", "replay-<case>")
    return p


def _report_argument(p: argparse.ArgumentParser, what: str, default: str) -> None:
    p.add_argument("--report", nargs="?", const="", metavar="DIR",
                   help=f"write {what} (a self-contained page with pictures) to DIR "
                        f"(default: reports/{default})")


def _set_argument(p: argparse.ArgumentParser, allow_large: bool = True) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key, e.g. --set workload[0].count=10 (repeatable)")
    if allow_large:
        p.add_argument("--allow-large", action="store_true",
                       help="run a scenario whose estimated size (ranks, requests, node forwards) "
                            "is above the limits that are otherwise refused up front")


def _print_json(obj: object) -> None:
    """The one JSON document a --json command prints on stdout."""
    # NaN and Infinity are not JSON; the loader keeps them out, and this keeps it honest.
    json.dump(obj, sys.stdout, allow_nan=False)
    sys.stdout.write("\n")


def _real_arguments(p: argparse.ArgumentParser) -> None:
    """Options of the zmq backend (``run --backend zmq`` and ``confirm``)."""
    g = p.add_argument_group("zmq backend")
    g.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="where ranks do their tensor work; cuda puts rank r on cuda:(r mod "
                        "device count) (default: cpu)")
    g.add_argument("--time-scale", type=float, default=None, metavar="X",
                   help="wall seconds per scenario second: a batch's budget is its service time "
                        "times X (default: 0.2)")
    g.add_argument("--compute-share", type=float, default=None, metavar="F",
                   help="part of a batch's budget spent in torch work, the rest slept "
                        "(default: 0.5 on cpu, 1 on cuda)")
    g.add_argument("--endpoints", default=None, metavar="SPEC",
                   help="ipc (default: sockets in a temporary directory) or tcp://HOST:PORT "
                        "(launcher at PORT, conductor PORT+1, rank r PORT+10+r)")
    g.add_argument("--deadline", type=float, default=None, metavar="S",
                   help="run deadline in seconds (default: derived from a simulation of the "
                        "scenario, capped by limits.request_timeout_s)")
    g.add_argument("--kill-rank", default=None, metavar="RANK:SECONDS",
                   help="fault injection: kill rank RANK with SIGKILL SECONDS after the start")


REAL_FLAGS = ("device", "time_scale", "compute_share", "endpoints", "deadline", "kill_rank")


def _real_options(args: argparse.Namespace):
    """Import the real backend (only now: it needs pyzmq and torch) and build its options."""
    try:
        import real_backends
    except ImportError:
        raise UsageError("the zmq backend is not installed (the real_backends package is "
                         "missing): pip install 'simharness[real]'") from None
    try:
        real_backends.require()
    except real_backends.MissingDependency as exc:
        raise UsageError(str(exc)) from None
    from real_backends.launcher import RealOptions

    kill = None
    if args.kill_rank is not None:
        r, _, t = args.kill_rank.partition(":")
        try:
            kill = (int(r), float(t))
        except ValueError:
            raise UsageError(f"--kill-rank {args.kill_rank!r}: expected RANK:SECONDS, "
                             f"e.g. 1:2.5") from None
        if kill[0] < 0 or not (math.isfinite(kill[1]) and kill[1] >= 0):
            raise UsageError(f"--kill-rank {args.kill_rank!r}: expected a rank >= 0 and a time "
                             f"in seconds >= 0, e.g. 1:2.5")
    opts = RealOptions(device=args.device or "cpu", compute_share=args.compute_share,
                       endpoints=args.endpoints or "ipc", deadline_s=args.deadline, kill=kill)
    if args.time_scale is not None:
        opts.time_scale = args.time_scale
    try:
        opts.check()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return opts


def main(argv: list[str] | None = None) -> int:
    """Run one command. The one place that turns every failure into an exit code and one line."""
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)
    try:
        code = _main(argv)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        # The reader of stdout went away (`--json | head -c 10`): nothing left to say to it.
        _detach_stdout(stdout)
        return EXIT_BROKEN_PIPE
    except _StdoutError as exc:
        _detach_stdout(stdout)
        print(f"error: cannot write to standard output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # anything else is a harness bug: exit 3, not 1
        return _internal_error(exc)
    finally:
        sys.stdout = stdout


class _StdoutError(OSError):
    """Standard output cannot be written (``> /dev/full``): the user's target, not a harness bug."""


class _GuardedStdout:
    """sys.stdout, with a failed write told apart from every other OSError."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _StdoutError(exc.errno, exc.strerror) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _StdoutError(exc.errno, exc.strerror) from exc

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _detach_stdout(stream) -> None:
    """Point stdout at /dev/null so that the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (a test's capture): nothing will flush it at exit


def _internal_error(exc: BaseException) -> int:
    """One line naming the failure and where its traceback was saved; exit 3."""
    import tempfile  # here, not at import: a run that does not fail never needs them
    import traceback

    text = "".join(traceback.format_exception(exc))
    saved = ""
    try:
        fd, path = tempfile.mkstemp(prefix="simharness-internal-error-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        saved = f"; traceback saved to {path}"
    except OSError:
        saved = "; the traceback could not be saved"
    first = (str(exc).splitlines() or [""])[0][:200]
    print(f"error: internal error in simharness ({type(exc).__name__}: {first}){saved}; "
          f"please report it (exit 3 means a harness bug, not a runtime bug)", file=sys.stderr)
    return EXIT_INTERNAL


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    with interrupts.interruptible():
        try:
            return _dispatch(args, argv)
        except KeyboardInterrupt as exc:
            return _interrupted(args, interrupts.as_interrupted(exc))


def entry() -> None:
    """The ``simharness`` console command: `main`, then a prompt exit.

    Python's own shutdown frees every object one by one, which takes seconds after a large run
    (a Ctrl-C would seem ignored that long) and does nothing for us: every file is written and
    closed and every process reaped by the time `main` returns. So flush and leave at once."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


def _dispatch(args: argparse.Namespace, argv: list[str] | None) -> int:
    argv = argv if argv is not None else sys.argv[1:]
    try:
        if args.command == "run":
            return _run(args, argv)
        if args.command == "compare":
            return _compare(args, argv)
        if args.command == "confirm":
            return _confirm(args, argv)
        if args.command == "runtimes":
            return _runtimes()
        if args.command == "layout":
            return _layout(args)
        if args.command == "fuzz":
            return _fuzz(args)
        if args.command == "replay":
            return _replay(args)
        if args.command == "import-mstar":
            return _import_mstar(args)
        if args.command == "sweep":
            return _sweep(args)
        _parser().print_help(sys.stderr)
        return EXIT_USAGE
    except (ScenarioError, UsageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


def _interrupted(args: argparse.Namespace, exc: interrupts.Interrupted) -> int:
    """SIGINT or SIGTERM stopped the command: print what it had found, exit 130 or 143."""
    from simharness.run import RunReport

    found = exc.partial
    if isinstance(found, dict):  # confirm: the simulation finished, the real run did not
        sim = found.get("sim")
        if sim is not None:
            print(f"the simulation had finished: {sim.outcome.upper()} "
                  f"({plural(len(sim.violations), 'violation')})", file=sys.stderr)
        found = found.get("real")
    from simharness.sweep import SweepResult

    if isinstance(found, RunReport):
        from simharness.report.summary import build_summary, request_counts

        real = found.backend != "sim"
        if real and getattr(args, "json", False) and args.command == "run":
            _print_json(build_summary(found))
        rc = request_counts(found)
        # A simulation cut short was never judged: its checks run only on a finished run.
        judged = f", {plural(len(found.violations), 'violation')} so far" if real else ""
        when = (f"at t={found.result.sim_time_s:.2f} s: {rc['completed']} of "
                f"{plural(rc['submitted'], 'request')} completed{judged}"
                if rc["submitted"] else "during its start-up, before any request")
        after = "; its processes are stopped and its run folder removed" if real else ""
        print(f"the {found.backend} run was stopped {when}{after}", file=sys.stderr)
    elif isinstance(found, SweepResult):
        bad = len(found.unexpected)
        print(f"the sweep was stopped after {plural(len(found.cells), 'run')} "
              f"({bad} unexpected)" + (f": {', '.join(_cell_name(c) for c in found.unexpected[:5])}"
                                       if bad else ""), file=sys.stderr)
    elif isinstance(found, list) and found:  # compare: the arms that finished; replay: the cases
        for done in found:
            if isinstance(done, RunReport):
                print(f"arm {done.runtime} had finished: {done.outcome.upper()} "
                      f"({plural(len(done.violations), 'violation')})", file=sys.stderr)
            else:
                print(f"{'ok ' if done.ok else 'DIVERGED'} {done.path} [{done.status}, "
                      f"{done.runtime}]: {done.message}", file=sys.stderr)
    return _stopped(exc)


def _stopped(exc: interrupts.Interrupted) -> int:
    """The last line of every command a signal stopped, and its exit code (130, 143)."""
    print(f"interrupted by {exc.name}; no file was left half-written", file=sys.stderr)
    return exc.exit_code


def _cell_name(c) -> str:
    return f"{c.scenario} {c.runtime} seed {c.seed}"


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    from simharness.report.console import render
    from simharness.report.summary import build_summary
    from simharness.run import run_scenario
    from simharness.scenario.loader import load_scenario

    _check_trace_name(args.trace)
    _check_report_target(args.report)
    scenario = load_scenario(args.scenario, args.overrides, allow_large=args.allow_large)
    _check_runtime(args.runtime, scenario)
    args.runtime = _corpus_runtime(scenario, args.runtime)
    seed = _seed(args)
    _check_output(args.trace, "--trace")
    determinism = args.check_determinism or os.environ.get("SIMHARNESS_CHECK_DETERMINISM") == "1"
    if args.backend == "zmq":
        if args.check_determinism:
            raise UsageError("--check-determinism needs --backend sim: real runs are not "
                             "deterministic in time")
        report = _run_real(scenario, args, seed)
    else:
        given = [f"--{f.replace('_', '-')}" for f in REAL_FLAGS if getattr(args, f) is not None]
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
        _writing(path, "--trace", lambda: _write_trace(report, path))
    if args.report is not None:
        _write_report(report, summary, args.report, ["simharness", *argv])

    if args.json:
        _print_json(summary)
    else:
        render(report, sys.stdout, command=["simharness", *argv])
    return report.exit_code


def _corpus_runtime(scenario, runtime: str | None) -> str | None:
    """A corpus case runs under the runtime it was recorded with, not the scenario's own; say so,
    and what was recorded, since a plain run does not compare against the record (replay does)."""
    meta = scenario.corpus
    if meta is None:
        return runtime
    from simharness.runtime import registry

    recorded, status, sig = meta.runtime, meta.status, meta.signature
    record = (f"recorded failing with {sig} under {recorded}" if status == "open"
              else f"fixed: recorded as passing under {recorded} (it once failed with {sig})")
    if runtime is None:
        try:
            registry.resolve(recorded)
        except (ScenarioError, UsageError) as exc:
            raise UsageError(f"{scenario.source} is a corpus case recorded under runtime "
                             f"{recorded!r}, which cannot run here ({exc}); pass --runtime to run it "
                             f"under another") from None
        runtime = recorded
    print(f"note: {scenario.source} is a corpus case (status {status}: {record}); running under "
          f"{runtime}{'' if runtime == recorded else f' instead of {recorded}'}; "
          f"'simharness replay {scenario.source}' checks it against its record", file=sys.stderr)
    return runtime


def _check_output(target: str | None, flag: str) -> None:
    """Refuse, before any work, a file to write that cannot be written (no folder, a folder)."""
    if not target:
        return
    p = Path(target)
    if p.is_dir():
        raise UsageError(f"{flag} {target}: is a directory; expected a file path")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{flag} {target}: folder {parent} does not exist" if not parent.exists()
                         else f"{flag} {target}: {parent} is not a folder")


def _check_creatable(folder: Path, flag: str) -> None:
    """Refuse, before any work, a folder to write into that cannot be made or written: its
    nearest existing ancestor (itself, if it exists) is not a folder, or is not writable.
    Nothing is created here (a campaign that finds nothing writes nothing)."""
    here = folder
    while not here.exists() and here != here.parent:
        here = here.parent
    if here.exists() and not here.is_dir():
        raise UsageError(f"{flag} {folder}: cannot create: {here} is not a folder")
    if not os.access(here, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {folder}: cannot write: {here} is not writable")


def _writing(path: Path, flag: str, write) -> None:
    """Run `write` (an atomic write of `path`); an OS error is one line naming the flag."""
    try:
        write()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write: {exc.strerror or exc}") from None


def _seed(args: argparse.Namespace) -> int | None:
    """--seed, else SIMHARNESS_SEED, else None (the scenario's); an error names the one used."""
    from simharness.scenario.sections import MAX_SEED

    seed, source = args.seed, "--seed"
    if seed is None and os.environ.get("SIMHARNESS_SEED"):
        source = "SIMHARNESS_SEED"
        try:
            seed = int(os.environ["SIMHARNESS_SEED"])
        except ValueError:
            raise UsageError(f"SIMHARNESS_SEED must be an integer, got "
                             f"{os.environ['SIMHARNESS_SEED']!r}") from None
    if seed is not None and seed < 0:
        raise UsageError(f"{source} must be >= 0, got {seed}")
    if seed is not None and seed > MAX_SEED:
        # the bound of a scenario's own seed (`seed:`), which a seed given here replaces
        raise UsageError(f"{source} must be <= {MAX_SEED}, got {seed}")
    return seed


def _compare(args: argparse.Namespace, argv: list[str]) -> int:
    from simharness.compare import compare_runtimes, render
    from simharness.scenario.loader import load_scenario

    if len(args.runtimes) < 2:
        raise UsageError(f"compare needs at least two --runtime arms, got {len(args.runtimes)}")
    _refuse_repeated_runtime("compare", args.runtimes)
    scenario = load_scenario(args.scenario, args.overrides, allow_large=args.allow_large)
    for name in args.runtimes:
        _check_runtime(name, scenario)
    _check_report_target(args.report)
    cmp = compare_runtimes(scenario, args.runtimes, _seed(args))
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
        from simharness.report.html import compare_page

        _emit_report(args.report, f"{cmp.scenario.name}-compare-seed{cmp.scenario.seed}",
                     "compare.json", doc, compare_page(cmp, ["simharness", *argv]))
    if args.json:
        _print_json(doc)
    else:
        render(cmp, sys.stdout)
    return cmp.exit_code


def _check_runtime(name: str | None, scenario=None) -> None:
    """Refuse an unknown --runtime before any work, in one line naming the flag. With the
    scenario: say when that runtime leaves out the scenario's runtime.options (they belong to
    the runtime the scenario names)."""
    if name is None:
        return
    from simharness.runtime import registry

    try:
        registry.resolve(name)
    except UsageError as exc:
        raise UsageError(f"--runtime {name}: {exc}") from None
    if scenario is not None and scenario.runtime.options and name != scenario.runtime.name:
        print(f"note: runtime.options of {scenario.source} ({', '.join(scenario.runtime.options)}) "
              f"are for {scenario.runtime.name}: not applied to --runtime {name}", file=sys.stderr)


def _refuse_repeated_runtime(command: str, runtimes: list[str]) -> None:
    dup = sorted({r for r in runtimes if runtimes.count(r) > 1})
    if dup:
        raise UsageError(f"{command}: runtime {dup[0]!r} is given twice")


def _run_real(scenario, args: argparse.Namespace, seed: int | None, sim_report=None):
    options = _real_options(args)
    from real_backends.launcher import RealBackendError, run_real
    from simharness.report.progress import StatusLine

    status = StatusLine(sys.stderr)

    def progress(ready: int, total: int, elapsed: float) -> None:
        # Start-up imports torch in every process: tens of seconds on a busy CPU.
        if ready < total:
            status.update(f"zmq: starting {total} processes (a conductor and {plural(total - 1, 'rank')}): "
                          f"{ready} ready after {elapsed:.0f} s")
        else:
            status.done(f"zmq: {total} processes ready in {elapsed:.1f} s; running")

    options.progress = progress
    try:
        return run_real(scenario, args.runtime, seed, options, sim_report=sim_report)
    except RealBackendError as exc:
        raise UsageError(f"zmq backend: {exc}") from None
    finally:
        status.done()


def _confirm(args: argparse.Namespace, argv: list[str]) -> int:
    from simharness.run import run_scenario
    from simharness.scenario.loader import load_scenario

    scenario = load_scenario(args.scenario, args.overrides, allow_large=args.allow_large)
    _check_runtime(args.runtime, scenario)
    args.runtime = _corpus_runtime(scenario, args.runtime)
    seed = _seed(args)
    _real_options(args)  # fail on a missing dependency before simulating anything
    from real_backends.confirm import compare, render, summarize
    from real_backends.launcher import refuse_perturbations

    refuse_perturbations(scenario, "confirm")  # before the simulation, not after it

    _check_report_target(args.report)
    # the real run's deadline and the report read the simulation's events: keep them
    sim = run_scenario(scenario, args.runtime, seed, keep_trace=True)
    try:
        real = _run_real(scenario, args, seed, sim_report=sim)
    except interrupts.Interrupted as exc:
        exc.partial = {"sim": sim, "real": exc.partial}
        raise
    a, b = summarize(sim), summarize(real)
    agree, diffs = compare(a, b)
    doc = {"sim": a, "real": b, "agree": agree, "differences": diffs}
    if args.report is not None:
        from simharness.report.html import confirm_page

        console = _rendered(lambda out: render(a, b, agree, diffs, out))
        _emit_report(args.report, f"{sim.scenario.name}-confirm-{sim.runtime}-seed{sim.scenario.seed}",
                     "confirm.json", doc,
                     confirm_page(sim, real, a, b, agree, diffs, console, ["simharness", *argv]))
    if args.json:
        _print_json(doc)
    else:
        render(a, b, agree, diffs, sys.stdout)
    return EXIT_PASS if agree else EXIT_FAIL


def _check_report_target(target: str | None) -> None:
    """Refuse a --report folder that is not ours before any work is done."""
    if target:
        from simharness.report.writer import report_dir

        report_dir(target, "")


def _emit_report(target: str, default_name: str, doc_name: str, doc: object, page: str,
                 more: dict | None = None) -> None:
    """Write a --report folder: `doc` as the command's JSON file `doc_name`, then `more` files
    (name -> text or a writer taking the path), then the page; say where it is, or fail in one
    line. Every command's report goes through here, so each names, writes and announces its
    folder the same way."""
    from simharness.report.writer import REPORT_FILES, json_text, report_dir, write_report

    files = {doc_name: json_text(doc), **(more or {}), "report.html": page}
    out = report_dir(target, default_name, [*files, *REPORT_FILES])
    try:
        names = write_report(out, files)
    except OSError as exc:
        raise UsageError(f"--report {out}: cannot write: {exc.strerror or exc}"
                         + (f" ({exc.filename})" if exc.filename else "")) from None
    print(f"report written to {out}/ ({', '.join(names)}); open {out / 'report.html'}", file=sys.stderr)


def _rendered(render) -> str:
    """What `render(stream)` prints, as text (the console section of a report page)."""
    import io

    buf = io.StringIO()
    render(buf)
    return buf.getvalue()


def _write_report(report, summary: dict | None, target: str, command: list[str] | None = None) -> None:
    from simharness.report.html import run_page
    from simharness.report.perfetto import write_perfetto
    from simharness.report.story import build_story

    sc = report.scenario
    story = build_story(report)
    _emit_report(target, f"{sc.name}-{report.runtime}-seed{sc.seed}", "summary.json", summary,
                 run_page(report, command, story), {
                     "trace.jsonl": report.result.recorder.write_jsonl,
                     "trace.perfetto.json": lambda path: write_perfetto(story, path),
                 })


TRACE_SUFFIXES = (".json", ".jsonl")


def _check_trace_name(name: str | None) -> None:
    if name and not name.endswith(TRACE_SUFFIXES):
        raise UsageError(f"--trace {name}: expected FILE.json (a Chrome trace-event file for "
                         f"ui.perfetto.dev) or FILE.jsonl (every event as a JSON line)")


def _write_trace(report, path: Path) -> None:
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



def _runtimes() -> int:
    from simharness.runtime import registry

    for name, target in sorted(registry.available().items()):
        print(f"{name:<20} {registry.describe(target)}")
    return EXIT_PASS


def _layout(args: argparse.Namespace) -> int:
    from simharness.placement.layout import Layout
    from simharness.scenario.loader import load_scenario

    scenario = load_scenario(args.scenario, args.overrides, allow_large=args.allow_large)
    for note in scenario.notes:  # what run says about the layout, layout says too
        print(f"note: {note}", file=sys.stderr)
    print(f"{scenario.name}: {plural(len(scenario.walks), 'walk')} on "
          f"{plural(scenario.placement.num_ranks, 'rank')}")
    for line in Layout.build(scenario).describe():
        print(line)
    return EXIT_PASS


def _fuzz(args: argparse.Namespace) -> int:
    import time

    started = time.perf_counter()  # --time counts from here: imports and set-up included

    from simharness.explore.campaign import (
        CampaignConfig,
        CampaignResult,
        keep_hypothesis_files_out_of_cwd,
        run_campaign,
    )
    from simharness.explore.report import CaseWriter, Progress, campaign_summary, known_cases, print_summary

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
    corpus = Path(args.corpus)
    if corpus.exists() and not corpus.is_dir():
        raise UsageError(f"--corpus {corpus}: exists and is not a directory (the corpus is a "
                         f"folder of case files)")
    if not args.no_write:
        _check_creatable(corpus, "--corpus")
    _check_runtime(args.runtime)
    known = known_cases(corpus, args.runtime)
    cfg = CampaignConfig(args.runtime, seed=args.seed, examples=args.examples,
                         time_s=args.time if args.examples is None else None,
                         workers=args.workers, scheduler=args.scheduler,
                         chunk_size=args.chunk_size, tolerated_only=args.tolerated_only,
                         shrink=not args.no_shrink, known=frozenset(known))
    _check_report_target(args.report)
    keep_hypothesis_files_out_of_cwd()
    from simharness.report.progress import StatusLine

    writer = CaseWriter(None if args.no_write else corpus, known)
    progress = Progress(sys.stderr)
    shrinking = StatusLine(sys.stderr)
    result = CampaignResult(cfg)

    def on_shrink(done: int, total: int, sig: str | None) -> None:
        if sig is None:
            shrinking.done()
        else:
            shrinking.update(f"shrinking failure {done + 1} of {total}: {sig}", force=True)

    # SIGINT and SIGTERM both arrive as `interrupts.Interrupted` (installed by `_main`).
    # Unlike the other commands, fuzz catches the signal itself: what it found is a whole
    # campaign summary, printed (and written with --report) as at any other end.
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
    summary = campaign_summary(result, writer, interrupted)
    if args.report is not None:
        from simharness.report.html import fuzz_page

        console = _rendered(lambda out: print_summary(summary, out))
        _emit_report(args.report, f"fuzz-{args.runtime}-seed{args.seed}", "fuzz.json", summary,
                     fuzz_page(summary, console))
    if args.json:
        _print_json(summary)
    else:
        print_summary(summary, sys.stdout)
    if stop is not None:
        return _stopped(stop)
    failing = summary["failures"] if args.fail_on_known else summary["new"]
    return EXIT_FAIL if failing else EXIT_PASS


def _sweep(args: argparse.Namespace) -> int:
    from simharness.sweep import parse_seeds, plan, render, run_sweep

    if args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if args.strict and not args.baseline:
        raise UsageError("--strict compares trace digests with a --baseline; give one")
    _refuse_repeated_runtime("sweep", args.runtimes)
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    cells = plan(args.scenarios, args.overrides, args.runtimes, seeds)
    total = len(cells)
    done = [0]

    def progress(cell) -> None:
        done[0] += 1
        if not args.json and (done[0] % 50 == 0 or done[0] == total):
            print(f"sweep: {done[0]}/{total} runs", file=sys.stderr)

    result = run_sweep(cells, args.workers, args.scheduler, args.baseline, args.strict, progress)
    if args.json:
        _print_json(result.to_json())
    else:
        render(result, sys.stdout)
    return result.exit_code


def _replay(args: argparse.Namespace) -> int:
    from simharness.explore.corpus import replay

    _check_report_target(args.report)
    worst = EXIT_PASS
    done: list[tuple[Any, dict[str, Any]]] = []  # (the replay, its JSON document)
    for path in args.case:
        # The report page shows each case's run: the replay's own, its events kept for it.
        try:
            r = replay(path, update=args.update, keep_trace=args.report is not None)
        except KeyboardInterrupt as exc:
            stop = interrupts.as_interrupted(exc)
            stop.partial = [r for r, _ in done]  # the cases replayed before the signal
            raise stop from None
        doc = {"case": str(r.path), "runtime": r.runtime, "status": r.status,
               "expected": r.expected, "got": r.got, "trace_digest": r.digest,
               "recorded_digest": r.expected_digest, "ok": r.ok, "message": r.message}
        done.append((r, doc))
        if args.json:
            _print_json(doc)
        else:
            print(f"{'ok ' if r.ok else 'DIVERGED'} {r.path} [{r.status}, {r.runtime}]: {r.message}")
        if not r.ok:
            worst = EXIT_FAIL
    if args.report is not None:
        from simharness.report.html import replay_page

        _emit_report(args.report, f"replay-{Path(args.case[0]).stem}", "replay.json",
                     [doc for _, doc in done], replay_page([(r, r.run) for r, _ in done]))
    return worst


def _import_mstar(args: argparse.Namespace) -> int:
    from simharness.fileio import write_text
    from simharness.mstar.build import import_config
    from simharness.scenario.loader import attribute, parse_scenario
    from simharness.scenario.overrides import apply_overrides
    from simharness.scenario.reading import read_value

    options: dict[str, object] = {}
    scenario_sets: list[str] = []
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--set {item}: expected KEY=VALUE")
        key = key.strip()
        if key.startswith("model."):
            # read as a scenario's --set value is: the same YAML limits, one line on an error
            options[key[len("model."):]] = read_value(value, key) if value.strip() else ""
        else:
            scenario_sets.append(item)
    target = args.output or f"{Path(args.config).stem}.yaml"
    if target != "-":
        # before the import's work: a path that cannot be written is refused now, not after it
        _check_output(target, "-o")
        if Path(target).exists() and not args.force:
            raise UsageError(f"{target} exists; pass --force to replace it (nothing was written)")
    try:
        imported = import_config(args.config, options)
    except ScenarioError as err:
        raise (err.with_source("--set") if err.path.startswith("model.") else err) from None
    raw, applied = apply_overrides(imported.raw, scenario_sets)
    imported.raw = raw
    # What is written must load: check it here, not at the user's first run.
    try:
        parse_scenario(raw, source=target, default_name=Path(target).stem,
                       base_dir=Path(target).parent if target != "-" else Path.cwd())
    except ScenarioError as err:
        raise attribute(err, applied).with_source(f"{target} (as imported)") from None
    text = imported.yaml_text()
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    if target == "-":
        sys.stdout.write(text)
    else:
        _writing(Path(target), "-o", lambda: write_text(target, text))
        print(f"wrote {target}: model {imported.model!r}, {plural(len(raw['graph']['walks']), 'walk')}, "
              f"{plural(imported.worker_graphs, 'worker graph')}"
              + (f"; defaults to edit: {', '.join(imported.defaulted)}" if imported.defaulted else ""),
              file=sys.stderr)
    return EXIT_PASS


if __name__ == "__main__":
    entry()
