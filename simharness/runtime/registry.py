"""Finding a runtime under test by name.

Runtimes register under the ``simharness.runtimes`` entry-point group (the shipped ones do so in
our own pyproject), so another package can add its own. ``module:Name`` also works, for a runtime
that is not installed as a package. The built-in profiles are always available, even when the
package metadata is missing (running from a source tree).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from simharness.errors import UsageError
from simharness.runtime.profiles import MstarPython, MstarRust, MstarRustPrefix

GROUP = "simharness.runtimes"
BUILTIN = {cls.name: cls for cls in (MstarPython, MstarRustPrefix, MstarRust)}


def available() -> dict[str, Any]:
    """name -> entry point or class, built-ins first."""
    found: dict[str, Any] = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def resolve(name: str, options: dict[str, Any] | None = None) -> Any:
    """Build the runtime object for `name` (a registered name or ``module:Attr``)."""
    registered = available()
    if name in registered:
        target = registered[name]
        obj = target if isinstance(target, type) else target.load()
    elif ":" in name:
        module, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"cannot load runtime {name!r}: {exc}") from None
    else:
        raise UsageError(f"unknown runtime {name!r} (known: {', '.join(sorted(registered))}; "
                         f"or module:Name)")
    runtime = obj(**(options or {})) if isinstance(obj, type) else obj
    if not hasattr(runtime, "build_rank"):
        raise UsageError(f"runtime {name!r} has no build_rank(rank, layout) method")
    if not getattr(runtime, "name", None) or getattr(runtime, "name", None) == "reference":
        runtime.name = name
    return runtime
