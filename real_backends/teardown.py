"""Tying a real run's processes to their launcher, so nothing of a run outlives it.

A run is a launcher, one OS process per rank plus the conductor, and a run folder holding the
config, the ipc socket files and the logs. However the launcher ends (it returns, raises, gets
SIGTERM, or is killed with SIGKILL and runs no code at all), the processes must go and the folder
must be removed. Three mechanisms, each covering what the one before cannot:

* **the lifeline** (`child_main`, the entry point of every rank and conductor process): before
  anything heavy is imported, the child asks Linux to SIGKILL it when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``), checks that the parent did not die already, and starts a
  watchdog thread that exits the process when the parent pid changes (for systems without
  prctl, and for a rank busy in torch work that does not look at its socket);
* **one process group** for all children of a run (`Group`), so the launcher stops them with one
  ``killpg`` and nothing a child started itself survives either;
* **the janitor** (`Janitor`, ``python -m real_backends.teardown janitor RUN_DIR``): a tiny
  process in its own session that holds the read end of a pipe from the launcher. When the pipe
  closes without the launcher having said ``done`` (the launcher died, even by SIGKILL), it kills
  the run's process group and removes the run folder.

This module imports only the standard library at the top: the lifeline runs before torch or pyzmq
are loaded, so a child whose parent is killed during its start-up goes within a second.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any

#: the environment variable through which a child learns its launcher's pid
PARENT_ENV = "SIMHARNESS_PARENT_PID"
#: how often the watchdog thread looks at the parent pid
WATCH_EVERY_S = 0.2
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Make this process end when `parent_pid` (its parent) ends, however that happens."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The parent may have died before prctl took effect: then we were already re-parented.
    if os.getppid() != parent_pid:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WATCH_EVERY_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def child_main(argv: list[str]) -> None:
    """A rank or the conductor: the lifeline first, then the process proper, then a prompt exit.

    Once `main` returns the process has handed its final state over and closed its sockets
    (lingering until every message left). Python's own shutdown (collecting every torch tensor
    and module) can then take seconds on a loaded machine, long enough for the launcher to take
    the process for stuck; nothing in it is needed, so the process leaves at once."""
    parent = os.environ.get(PARENT_ENV)
    if parent and parent.isdigit():
        die_with_parent(int(parent))
    from real_backends.process import main

    code = main(argv)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def child_command(args: list[str]) -> list[str]:
    """The command line of a run's child process with arguments `args`."""
    return [sys.executable, "-m", "real_backends.teardown", "child", *args]


class Group:
    """The process group all of a run's children join: the first child leads it."""

    def __init__(self) -> None:
        self.pgid: int | None = None

    def popen_kwargs(self) -> dict[str, Any]:
        # process_group=0 makes the child the leader of a new group (its pgid is its pid).
        return {"process_group": 0 if self.pgid is None else self.pgid}

    def joined(self, proc: subprocess.Popen) -> None:
        if self.pgid is None:
            self.pgid = proc.pid

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to every process of the group still alive."""
        if self.pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)


class Janitor:
    """The launcher's side of the janitor process (see the module docstring)."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "real_backends.teardown", "janitor", run_dir],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def watch_group(self, pgid: int) -> None:
        self._say(f"group {pgid}")

    def done(self) -> None:
        """The launcher cleaned up itself: let the janitor go without touching anything."""
        self._say("done")
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def dismiss(self) -> None:
        """Stop the janitor at once (the launcher has removed the folder and killed the group
        itself); `done` reaps it later."""
        with contextlib.suppress(OSError):
            self.proc.kill()

    def _say(self, line: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.write(f"{line}\n".encode())  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]


def janitor_main(run_dir: str) -> int:
    """Wait for the launcher's pipe to close; if it never said ``done``, clean up after it."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)  # only the pipe ends the janitor
    groups: list[int] = []
    finished = False
    for line in sys.stdin.buffer:
        word, _, arg = line.decode(errors="replace").strip().partition(" ")
        if word == "group" and arg.isdigit():
            groups.append(int(arg))
        elif word == "done":
            finished = True
    if not finished:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    role, rest = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if role == "child":
        child_main(rest)
    if role == "janitor" and len(rest) == 1:
        raise SystemExit(janitor_main(rest[0]))
    print("usage: python -m real_backends.teardown child ARGS... | janitor RUN_DIR", file=sys.stderr)
    raise SystemExit(2)
