"""One status line on stderr for the slow parts of a command: zmq start-up, fuzz shrinking.

On a terminal the line updates in place; elsewhere (CI logs, a file) each distinct status is
printed once, at most every few seconds, so a log shows progress without a flood. Nothing goes
to stdout: ``--json`` output stays the only thing there.
"""

from __future__ import annotations

import sys
import time
from typing import IO


class StatusLine:
    def __init__(self, stream: IO[str] | None = None, every_s: float = 0.2, log_every_s: float = 5.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every_s if self.tty else log_every_s
        self._last_t = -1e9
        self._last_text = ""
        self._shown = False

    def update(self, text: str, force: bool = False) -> None:
        """Show `text` now if the line is due (or `force`), else drop it."""
        now = time.monotonic()
        if text == self._last_text or (not force and now - self._last_t < self.every):
            return
        self._last_t, self._last_text = now, text
        if self.tty:
            self.stream.write("\r\x1b[K" + text[:200])
            self._shown = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self, text: str | None = None) -> None:
        """End the line: clear it on a terminal, then print `text` (if any) as a final line."""
        if self.tty and self._shown:
            self.stream.write("\r\x1b[K")
            self._shown = False
        if text:
            self.stream.write(text + "\n")
        self.stream.flush()
