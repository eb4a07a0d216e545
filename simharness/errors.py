"""Errors a user can cause, each naming where the problem is.

`ScenarioError` is raised at the one boundary where user input enters the harness (the scenario
loader, `--set` overrides, the CLI). It carries the file, the key path inside the file and what
was expected, so the CLI can print one line and exit with code 2 instead of a traceback.
"""

from __future__ import annotations


class ScenarioError(Exception):
    """A scenario (or an override of one) is not what the schema expects.

    `path` is a key path such as ``graph.walks.decode.loop.max_iters``; `source` is the file the
    scenario came from (or a description such as ``--set``).
    """

    def __init__(self, path: str, message: str, source: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.source = source

    def with_source(self, source: str) -> ScenarioError:
        if self.source is None:
            self.source = source
        return self

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        key = f"{self.path}: " if self.path else ""
        return f"{where}{key}{self.message}"


class UsageError(Exception):
    """The command line itself is wrong (unknown runtime, bad flag combination)."""


class RuntimeRefused(UsageError):
    """The runtime cannot run this scenario at all: the real code it wraps refuses the layout
    before any request (mstar-ai's Conductor raising while it derives its workers). One line,
    exit 2; a differential example counts it as incomparable, naming mstar's error."""
