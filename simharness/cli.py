"""The ``simharness`` command line: the parser built from the commands, and every way it ends.

Exit codes: 0 every check passed, 1 a check failed (violations found), 2 bad input or usage
(``sweep``: 1 when a run's verdict is not the expected one), 3 internal error (a bug in simharness
itself: one line, and the traceback saved to a file), 130 and 143 stopped by SIGINT and SIGTERM
(after printing what was found so far).
Bad input gets one line naming the file, the key path and what was expected; never a traceback.
With ``--json`` the only thing on stdout is the summary object; everything else goes to stderr.
A reader that closes stdout early (``--json | head``) ends the command quietly with 141.

Each verb is a module of `simharness.commands` that owns its arguments, its run, what it says
when a signal stops it, and its page; this module only builds the parser from them and turns
every end into an exit code: a usage error, a signal (`_interrupted`: the command's ``partial``,
then the one last line), a closed or full stdout, an internal error. A new verb is one new
module there and its line in the list of verbs (below), or a module elsewhere added with
`simharness.commands.register`; nothing here changes.

The parser is built from an ordered list of the verbs (`simharness.commands.BUILTIN`), not from
a scan of the commands' folder. The order of ``simharness --help`` is a choice, made in one
place: a scan would need an order number in every module and would list a module half-written.
The list costs one line per verb, and a test fails when a module that defines a verb is missing
from it. Commands from other packages come through `simharness.commands.register` rather than an
entry-point group, whose lookup loads importlib.metadata on every start (a tenth of a short run).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

from simharness import __version__, commands, interrupts
from simharness.commands.common import (
    EXIT_CODES_TEXT,
    EXIT_FAIL,
    EXIT_INTERNAL,
    EXIT_PASS,
    EXIT_USAGE,
    LateHelp,
    stopped,
)
from simharness.errors import ScenarioError, UsageError
from simharness.wording import hint

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAIL", "EXIT_INTERNAL", "EXIT_PASS", "EXIT_USAGE", "entry", "main"]

#: 128 + SIGPIPE, what a shell reports for a writer whose reader went away.
EXIT_BROKEN_PIPE = 141


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

    def format_help(self) -> str:
        # Help is being shown: finish the help texts that waited for it (the zmq options read
        # their defaults from real_backends, which nothing else imports at start-up).
        for action in self._actions:
            if isinstance(action.help, LateHelp):
                action.help = action.help.finish().replace("%", "%%")
        return super().format_help()

    def _command_parser(self, command: str | None) -> argparse.ArgumentParser:
        """The parser of `command` (this one without a command)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                return action.choices[command]
        return self


def _parser(verbs: Iterable[Any]) -> argparse.ArgumentParser:
    """The parser of ``simharness``: a sub-parser per command, each given its arguments by it."""
    p = _Parser(
        prog="simharness",
        description="Simulate a distributed graph-runtime layout (mstar first) and check it.",
        epilog=EXIT_CODES_TEXT,
    )
    p.add_argument("--version", action="version", version=f"simharness {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for command in verbs:
        command.add_arguments(sub.add_parser(command.NAME, help=command.HELP,
                                             description=getattr(command, "DESCRIPTION", None),
                                             epilog=getattr(command, "EPILOG", None)))
    return p


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
    verbs = {command.NAME: command for command in commands.all_commands()}
    parser = _parser(verbs.values())
    args = parser.parse_args(argv)
    command = verbs.get(args.command)
    if command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args.command_line = ["simharness", *(argv if argv is not None else sys.argv[1:])]
    with interrupts.interruptible():
        try:
            return command.main(args)
        except (ScenarioError, UsageError) as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt as exc:
            return _interrupted(command, args, interrupts.as_interrupted(exc))


def _interrupted(command: Any, args: argparse.Namespace, exc: interrupts.Interrupted) -> int:
    """SIGINT or SIGTERM stopped the command: it says what it had found (its ``partial``, given
    what it attached to the signal), then the one last line of every stopped command; 130, 143."""
    partial = getattr(command, "partial", None)
    if partial is not None and exc.partial is not None:
        partial(exc.partial, args)
    return stopped(exc)


def entry() -> None:
    """The ``simharness`` console command: `main`, then a prompt exit.

    Python's own shutdown frees every object one by one, which takes seconds after a large run
    (a Ctrl-C would seem ignored that long) and does nothing for us: every file is written and
    closed and every process reaped by the time `main` returns. So flush and leave at once.

    First, unless the user chose one, it fixes Python's string hashing (``PYTHONHASHSEED=0``)
    and starts again under it: the real mstar code iterates sets of names (requests, nodes,
    workers) where the order shows in what it does, and a run must repeat, digest for digest,
    from one process to the next. Our own code never depends on that order."""
    if os.environ.get("PYTHONHASHSEED") is None:
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "simharness.cli", *sys.argv[1:]])
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
