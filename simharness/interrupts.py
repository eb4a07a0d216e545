"""Ctrl-C and SIGTERM as one exception, so every command can stop cleanly and say what it found.

Python turns SIGINT into `KeyboardInterrupt` but lets SIGTERM kill the process on the spot:
no ``finally`` runs, so a real run's rank processes and its run folder would be left behind.
`interruptible` installs one handler for both signals that raises `Interrupted` (a
`KeyboardInterrupt`, so code that already lets Ctrl-C through lets SIGTERM through too). The
command line catches it at the top, prints what was found so far (a command may attach it as
``partial``) and exits with the shell's code for the signal: 130 for SIGINT, 143 for SIGTERM.

`polled` notes the first signal and lets the block raise it where it chooses (a fuzz campaign:
between two examples); a second signal raises at once.

`deferred` holds both signals off during a short critical section (tearing a run down): a
second Ctrl-C while the rank processes are being stopped would otherwise abort the teardown
half way; the signal is raised once the section ends instead.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: the signals a command treats as "stop now, keep what you found"
HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A command was stopped by a signal; `partial` holds what it had found, if anything."""

    def __init__(self, signum: int | str = signal.SIGINT, partial: Any = None) -> None:
        # Code that copies an exception rebuilds it from its ``args``, which hold the name
        # (simpy does, to re-raise a process's failure): take the name back as well.
        signum = signal_number(signum) if isinstance(signum, str) else signum
        super().__init__(signal_name(signum))
        self.signum = int(signum)
        self.partial = partial

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.signum, self.partial))

    @property
    def name(self) -> str:
        return signal_name(self.signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def signal_number(name: str) -> int:
    """The number of a signal named as `signal_name` names it (``SIGTERM``, ``signal 64``)."""
    if name.startswith("signal "):
        return int(name.removeprefix("signal "))
    return int(signal.Signals[name])


def as_interrupted(exc: KeyboardInterrupt) -> Interrupted:
    """A bare KeyboardInterrupt (raised before our handler was installed) as an `Interrupted`."""
    return exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)


def _raise(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise `Interrupted`; the old handlers come back after.

    Only the main thread can own signal handlers; elsewhere this does nothing."""
    if not _main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in HANDLED}
    for s in HANDLED:
        signal.signal(s, _raise)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM off for the block; the first one that came is raised after it."""
    if not _main_thread():
        yield
        return
    pending: list[int] = []
    old = {s: signal.getsignal(s) for s in HANDLED}
    for s in HANDLED:
        signal.signal(s, lambda signum, _frame: pending.append(signum))
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if pending:
        # Deliver it again, now that the old handler is back (ours raises `Interrupted`).
        signal.raise_signal(pending[0])


#: the signals noted by each open `polled` block, innermost last
_noted: list[list[int]] = []


@contextlib.contextmanager
def polled() -> Iterator[None]:
    """Within the block the first SIGINT or SIGTERM is only noted; `check` raises it, as
    `Interrupted`, at the next point the block chooses, and the block's end raises it if no check
    did. A second signal raises at once, so a stuck block still stops.

    For loops whose steps must not be cut half way: an exception raised asynchronously inside
    Hypothesis's engine can trip its own assertions (an internal error, exit 3) where a raise
    from the test function between examples is a clean stop."""
    if not _main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, _frame: Any) -> None:
        if noted:
            raise Interrupted(noted[0])
        noted.append(signum)

    old = {s: signal.getsignal(s) for s in HANDLED}
    for s in HANDLED:
        signal.signal(s, note)
    _noted.append(noted)
    try:
        yield
    finally:
        _noted.pop()
        for s, h in old.items():
            signal.signal(s, h)
    if noted:
        raise Interrupted(noted[0])


def check() -> None:
    """Raise the signal the innermost `polled` block noted, if any; outside one, nothing."""
    if _noted and _noted[-1]:
        raise Interrupted(_noted[-1][0])


__all__ = ["HANDLED", "Interrupted", "as_interrupted", "check", "deferred", "interruptible",
           "polled", "signal_name", "signal_number"]
