"""Atomic file writes: a reader sees the old file or the whole new one, never half of one.

Every file simharness writes for a user (reports, traces, corpus cases, scenarios) goes through
here: the bytes go to a temporary file in the destination's own folder (so the final rename
stays on one filesystem), are flushed and synced, and then replace the destination with
`os.replace`, which is atomic on POSIX. A failure or a signal before the rename leaves the old
file untouched and removes the temporary one. A destination that exists and is not a regular
file (``/dev/stdout``, a named pipe) is written in place: there is no file to replace.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside `path` for writing; on a clean exit it becomes `path`."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', not {mode!r}")
    target = Path(path)
    if target.exists() and not target.is_file():
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(target))
        # A device or a pipe (/dev/stdout, a fifo): nothing to replace, and renaming over it
        # would replace the device node itself. Write into it as it is.
        with open(target, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        # mkstemp makes the file private (0600); a report or a scenario is an ordinary file, so it
        # gets the mode the file it replaces had, or what the umask gives a new file.
        os.fchmod(fd, _mode_for(target))
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def is_temporary(name: str) -> bool:
    """Whether `name` is one of `atomic_open`'s temporary files (left by a killed process)."""
    return name.startswith(".") and name.endswith(".tmp")


def safe_name(text: str) -> str:
    """`text` as one plain file name: letters, digits, ``.``, ``_``, ``-`` kept, anything else
    (a ``/``, a ``..`` prefix, spaces, control characters) replaced by ``_``."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip(".")
    return name[:200] or "_"


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` atomically."""
    with atomic_open(path, "w", encoding=encoding) as fh:
        fh.write(text)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
