"""The zmq backend's options (``run --backend zmq`` and ``confirm``), made from `RealOptions`.

Each option sets one field of `real_backends.options.RealOptions`. `OPTIONS` says which, with
what only the command line knows: the flag, how to read what was typed, a sentence of help. No
default is written here: an option left out leaves the dataclass's default in place, and the
default a help text shows is read from the dataclass (`real_backends.options.default_text`) when
the help is shown. The parser is built on every start, and real_backends is imported only when
a run needs it or its help is read (`LateHelp`), never at start-up.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simharness.commands.common import LateHelp
from simharness.errors import UsageError
from simharness.wording import plural


def _rank_and_time(text: str) -> tuple[int, float]:
    """--kill-rank RANK:SECONDS as (rank, seconds)."""
    r, _, t = text.partition(":")
    try:
        kill = (int(r), float(t))
    except ValueError:
        raise UsageError(f"--kill-rank {text!r}: expected RANK:SECONDS, e.g. 1:2.5") from None
    if kill[0] < 0 or not (math.isfinite(kill[1]) and kill[1] >= 0):
        raise UsageError(f"--kill-rank {text!r}: expected a rank >= 0 and a time in seconds >= 0, "
                         f"e.g. 1:2.5")
    return kill


@dataclass(frozen=True)
class Option:
    """One zmq option: the `RealOptions` field it sets and how the command line offers it."""

    #: the `RealOptions` field it sets
    field: str
    flag: str
    #: its help; ``{default}`` stands for how `RealOptions` names the field's default
    help: str
    metavar: str | None = None
    #: argparse's `type`: what a typed value must parse as
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    #: turns the parsed value into the field's value (raising `UsageError` on a bad one)
    read: Callable[[Any], Any] | None = None

    @property
    def dest(self) -> str:
        """Its attribute on the parsed arguments (argparse's name for the flag)."""
        return self.flag.removeprefix("--").replace("-", "_")

    def finished_help(self) -> str:
        """The help with the default filled in from `RealOptions` (imported now: help is shown)."""
        try:
            from real_backends.options import default_text
        except ImportError:
            return self.help.format(default="set by the zmq backend, which is not installed")
        return self.help.format(default=default_text(self.field))


#: In the order of ``--help``.
OPTIONS = (
    Option("device", "--device", choices=("cpu", "cuda"),
           help="where ranks do their tensor work; cuda puts rank r on cuda:(r mod device count) "
                "(default: {default})"),
    Option("time_scale", "--time-scale", metavar="X", type=float,
           help="wall seconds per scenario second: a batch's budget is its service time times X "
                "(default: {default})"),
    Option("compute_share", "--compute-share", metavar="F", type=float,
           help="part of a batch's budget spent in torch work, the rest slept (default: {default})"),
    Option("endpoints", "--endpoints", metavar="SPEC",
           help="ipc (default: {default}) or tcp://HOST:PORT (launcher at PORT, conductor PORT+1, "
                "rank r PORT+10+r)"),
    Option("deadline_s", "--deadline", metavar="S", type=float,
           help="run deadline in seconds (default: {default})"),
    Option("kill", "--kill-rank", metavar="RANK:SECONDS", read=_rank_and_time,
           help="fault injection: kill rank RANK with SIGKILL SECONDS after the start"),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The "zmq backend" group of options, each None unless given."""
    g = p.add_argument_group("zmq backend")
    for o in OPTIONS:
        shape: dict[str, Any] = {k: v for k, v in (("metavar", o.metavar), ("type", o.type),
                                                   ("choices", o.choices)) if v is not None}
        g.add_argument(o.flag, default=None, help=LateHelp(o.help, o.finished_help), **shape)


def given(args: argparse.Namespace) -> list[str]:
    """The zmq options given, as flags."""
    return [o.flag for o in OPTIONS if getattr(args, o.dest) is not None]


def options(args: argparse.Namespace) -> Any:
    """Import the real backend (only now: it needs pyzmq and torch) and build its options from
    the ones given."""
    try:
        import real_backends
    except ImportError:
        raise UsageError("the zmq backend is not installed (the real_backends package is "
                         "missing): pip install 'simharness[real]'") from None
    try:
        real_backends.require()
    except real_backends.MissingDependency as exc:
        raise UsageError(str(exc)) from None
    from real_backends.options import RealOptions

    values = {o.field: o.read(raw) if o.read else raw
              for o in OPTIONS if (raw := getattr(args, o.dest)) is not None}
    opts = RealOptions(**values)
    try:
        opts.check()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return opts


def run(scenario: Any, args: argparse.Namespace, seed: int | None, sim_report: Any = None) -> Any:
    """Run `scenario` on the zmq backend with the options given, saying how start-up goes."""
    opts = options(args)
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

    opts.progress = progress
    try:
        return run_real(scenario, args.runtime, seed, opts, sim_report=sim_report)
    except RealBackendError as exc:
        raise UsageError(f"zmq backend: {exc}") from None
    finally:
        status.done()
