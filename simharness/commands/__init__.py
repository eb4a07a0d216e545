"""The commands of ``simharness``: one module per verb, each owning its verb.

A command is a module (or any object) with:

* ``NAME``, the verb, and ``HELP``, its line in ``simharness --help``; optionally
  ``DESCRIPTION`` and ``EPILOG``, the top and the end of ``simharness VERB --help``;
* ``add_arguments(parser)``: its arguments, on a parser of its own;
* ``main(args) -> int``: its run, returning its exit code (`common.EXIT_PASS`, ...). A
  `UsageError` or `ScenarioError` it raises is said in one line, exit 2. ``args.command_line``
  is the command line as typed (``["simharness", VERB, ...]``: a rerun line keeps its flags);
* optionally ``partial(found, args)``: what it says when SIGINT or SIGTERM stopped it, `found`
  being what it had attached to the `interrupts.Interrupted` as ``partial`` (without one it says
  nothing). The command line then prints the one last line every stopped command ends with
  (`common.stopped`) and exits 130 or 143.

The shipped verbs are listed in `BUILTIN`, in the order ``simharness --help`` shows them; a
command from elsewhere (another package, a test) is added with `register` and comes after them.
`simharness.cli` builds its parser from `all_commands` (the reasons for a list rather than a
scan of this folder are in its docstring). Shared pieces: `common` (exit codes, the seed, files
to write, --report folders, JSON) and `real` (the zmq backend's options).
"""

from __future__ import annotations

import importlib
from typing import Any

#: the shipped commands (their module names here), in the order of ``simharness --help``
BUILTIN = ("run", "compare", "confirm", "runtimes", "layout", "fuzz", "explore", "import_mstar", "sweep",
           "replay", "export_test")
#: commands added with `register`: verb -> command
_added: dict[str, Any] = {}


def all_commands() -> list[Any]:
    """Every command, in the order of ``simharness --help``: the shipped ones, then the added."""
    return [importlib.import_module(f"{__name__}.{name}") for name in BUILTIN] + list(_added.values())


def register(command: Any) -> None:
    """Add `command` (see the module's docstring) to ``simharness``, after every other verb."""
    if any(c.NAME == command.NAME for c in all_commands()):
        raise ValueError(f"simharness already has a command {command.NAME!r}")
    _added[command.NAME] = command


def unregister(name: str) -> None:
    """Take the command added under verb `name` away again (a shipped one stays)."""
    _added.pop(name, None)
