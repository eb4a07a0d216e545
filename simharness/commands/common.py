"""What every command shares: exit codes, common arguments, the seed, checks of the files it will
write, its --report folder, its JSON, and the last line of a command a signal stopped.

Each helper here is written once so that every command words the same thing the same way: a
refusal names the flag and what was typed, a report folder is named, written and announced alike,
and the line ``interrupted by SIGINT; no file was left half-written`` ends every stopped command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simharness import interrupts
from simharness.errors import ScenarioError, UsageError
from simharness.wording import plural

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
#: How every epilog ends: the two exit codes all commands share.
EXIT_CODES_COMMON = "3 internal error (traceback saved to a file), 130/143 interrupted."
EXIT_CODES_TEXT = f"Exit codes: 0 pass, 1 violations found, 2 bad input or usage, {EXIT_CODES_COMMON}"
#: --seed of run, compare and confirm (`seed`)
SEED_HELP = "root seed (default: SIMHARNESS_SEED, else the scenario's)"


class LateHelp(str):
    """A help text finished only when help is shown (``--help``): `finish` returns the whole
    text. The zmq options take their defaults from ``real_backends``, which a command imports
    only when it needs it; the parser is built on every start, so their help waits until read."""

    finish: Callable[[], str]

    def __new__(cls, draft: str, finish: Callable[[], str]) -> LateHelp:
        text = super().__new__(cls, draft)
        text.finish = finish
        return text


# ----------------------------------------------------------------------------- arguments


def report_argument(p: argparse.ArgumentParser, what: str, default: str) -> None:
    """--report [DIR]: `what` the folder holds; `default` the folder's name under reports/."""
    p.add_argument("--report", nargs="?", const="", metavar="DIR",
                   help=f"write {what} (a self-contained page with pictures) to DIR "
                        f"(default: reports/{default})")


def set_argument(p: argparse.ArgumentParser, allow_large: bool = True) -> None:
    """--set KEY=VALUE (repeatable) and, unless refused, --allow-large."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key, e.g. --set workload[0].count=10 (repeatable)")
    if allow_large:
        p.add_argument("--allow-large", action="store_true",
                       help="run a scenario whose estimated size (ranks, requests, node forwards) "
                            "is above the limits that are otherwise refused up front")


# ----------------------------------------------------------------------------- input


def seed(args: argparse.Namespace) -> int | None:
    """--seed, else SIMHARNESS_SEED, else None (the scenario's); an error names the one used."""
    from simharness.scenario.sections import MAX_SEED

    value, source = args.seed, "--seed"
    if value is None and os.environ.get("SIMHARNESS_SEED"):
        source = "SIMHARNESS_SEED"
        try:
            value = int(os.environ["SIMHARNESS_SEED"])
        except ValueError:
            raise UsageError(f"SIMHARNESS_SEED must be an integer, got "
                             f"{os.environ['SIMHARNESS_SEED']!r}") from None
    if value is not None and value < 0:
        raise UsageError(f"{source} must be >= 0, got {value}")
    if value is not None and value > MAX_SEED:
        # the bound of a scenario's own seed (`seed:`), which a seed given here replaces
        raise UsageError(f"{source} must be <= {MAX_SEED}, got {value}")
    return value


def check_runtime(name: str | None, scenario: Any = None, flag: str = "--runtime") -> None:
    """Refuse an unknown --runtime before any work, in one line naming the flag. With the
    scenario: say when that runtime leaves out the scenario's runtime.options (they belong to
    the runtime the scenario names)."""
    if name is None:
        return
    from simharness.runtime import registry

    try:
        registry.resolve(name)
    except UsageError as exc:
        raise UsageError(f"{flag} {name}: {exc}") from None
    if scenario is not None and scenario.runtime.options and name != scenario.runtime.name:
        print(f"note: runtime.options of {scenario.source} ({', '.join(scenario.runtime.options)}) "
              f"are for {scenario.runtime.name}: not applied to --runtime {name}", file=sys.stderr)


def refuse_repeated_runtime(command: str, runtimes: list[str]) -> None:
    dup = sorted({r for r in runtimes if runtimes.count(r) > 1})
    if dup:
        raise UsageError(f"{command}: runtime {dup[0]!r} is given twice")


def corpus_runtime(scenario: Any, runtime: str | None) -> str | None:
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


# ----------------------------------------------------------------------------- output files


def check_output(target: str | None, flag: str) -> None:
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


def check_creatable(folder: Path, flag: str) -> None:
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


def writing(path: Path, flag: str, write: Callable[[], Any]) -> None:
    """Run `write` (an atomic write of `path`); an OS error is one line naming the flag."""
    try:
        write()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write: {exc.strerror or exc}") from None


# ----------------------------------------------------------------------------- reports


def check_report_target(target: str | None) -> None:
    """Refuse a --report folder that is not ours before any work is done."""
    if target:
        from simharness.report.writer import report_dir

        report_dir(target, "")


def emit_report(target: str, default_name: str, doc_name: str, doc: object, page: str,
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


def rendered(render: Callable[[Any], Any]) -> str:
    """What `render(stream)` prints, as text (the console section of a report page)."""
    import io

    buf = io.StringIO()
    render(buf)
    return buf.getvalue()


def print_json(obj: object) -> None:
    """The one JSON document a --json command prints on stdout."""
    # NaN and Infinity are not JSON; the loader keeps them out, and this keeps it honest.
    json.dump(obj, sys.stdout, allow_nan=False)
    sys.stdout.write("\n")


# ----------------------------------------------------------------------------- interrupts


def stopped_run(found: Any) -> None:
    """Where a run (a `RunReport` a signal cut short, sim or zmq) had got to, on stderr."""
    from simharness.report.summary import request_counts

    real = found.backend != "sim"
    rc = request_counts(found)
    # A simulation cut short was never judged: its checks run only on a finished run.
    judged = f", {plural(len(found.violations), 'violation')} so far" if real else ""
    when = (f"at t={found.result.sim_time_s:.2f} s: {rc['completed']} of "
            f"{plural(rc['submitted'], 'request')} completed{judged}"
            if rc["submitted"] else "during its start-up, before any request")
    after = "; its processes are stopped and its run folder removed" if real else ""
    print(f"the {found.backend} run was stopped {when}{after}", file=sys.stderr)


def finished_run(label: str, report: Any) -> None:
    """One line for a run that finished before the signal (an arm of compare, confirm's sim)."""
    print(f"{label} had finished: {report.outcome.upper()} "
          f"({plural(len(report.violations), 'violation')})", file=sys.stderr)


def stopped(exc: interrupts.Interrupted) -> int:
    """The last line of every command a signal stopped, and its exit code (130, 143)."""
    print(f"interrupted by {exc.name}; no file was left half-written", file=sys.stderr)
    return exc.exit_code
