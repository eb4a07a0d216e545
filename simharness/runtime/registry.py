"""Finding a runtime under test by name.

Every runtime goes the same way: a name in `BUILTIN` (the shipped ones, by import path, so that
nothing is imported until a runtime is asked for), in the ``simharness.runtimes`` entry-point
group (another package's), or ``module:Name`` (a runtime that is not installed as a package). A
built-in name is never shadowed by a plugin. A runtime class that needs something not installed
says so through its ``available()`` and ``install_hint``: it is listed, and asking for it is a
usage error naming the command that installs what it needs.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

from simharness.errors import UsageError
from simharness.runtime.protocol import Runtime
from simharness.wording import hint

GROUP = "simharness.runtimes"
#: the shipped runtimes: name -> ``module:Class``. The profiles are our model of mstar; ``mstar``
#: runs mstar-ai's real stack (its conductor, workers, scheduler and graph code) and
#: ``mstar-graph`` its graph code alone under our worker model; both import mstar-ai
#: (`simharness.mstar`), only when asked for.
BUILTIN: dict[str, str] = {
    "mstar-python": "simharness.runtime.profiles:MstarPython",
    "mstar-rust-prefix": "simharness.runtime.profiles:MstarRustPrefix",
    "mstar-rust": "simharness.runtime.profiles:MstarRust",
    "mstar": "simharness.mstar.stack.runtime:MstarStack",
    "mstar-graph": "simharness.mstar.runtime:MstarRuntime",
}
#: the profiles: pure models, always available (what fuzzing and the quick checks run)
PROFILES = ("mstar-python", "mstar-rust-prefix", "mstar-rust")

#: ``module.path:Attribute``, both sides identifiers (``':'`` or ``'.x:y'`` are not).
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def load_path(path: str) -> Any:
    """The attribute a ``module:Name`` path names (importing the module)."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def entry_points(group: str) -> Any:
    """The installed entry points of `group` (importlib.metadata, imported on first use)."""
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def available() -> dict[str, Any]:
    """name -> ``module:Class`` (a built-in) or entry point (a plugin), built-ins first."""
    found: dict[str, Any] = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def is_ready(cls: Any) -> bool:
    """Whether a runtime class can run here (a class without ``available`` always can)."""
    ready = getattr(cls, "available", None)
    return ready() if callable(ready) else True


def runnable() -> list[str]:
    """The built-in runtimes that can run here, in `BUILTIN` order (``mstar`` needs mstar-ai)."""
    return [name for name, path in BUILTIN.items() if is_ready(load_path(path))]


def describe(target: Any) -> str:
    """One line about a registered runtime, for ``simharness runtimes``."""
    path = target if isinstance(target, str) else target.value
    try:
        cls = load_path(path) if isinstance(target, str) else target.load()
    except Exception as exc:  # a broken plugin must not break the listing
        return f"cannot load {path}: {type(exc).__name__}: {exc}"
    desc = _own_description(cls) or path
    if not is_ready(cls):
        desc = f"not installed: {getattr(cls, 'install_hint', '')}"
    dist = None if isinstance(target, str) else getattr(getattr(target, "dist", None), "name", None)
    return desc if dist in (None, "simharness") else f"{desc} (plugin from {dist})"


def _own_description(obj: Any) -> str:
    """A class's own ``description``, else the first line of its docstring, else an inherited
    description (a subclass of a profile is not that profile)."""
    own = vars(obj).get("description") if isinstance(obj, type) else None
    doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    return own or (doc[0] if doc else "") or getattr(obj, "description", "") or ""


class OptionError(ValueError):
    """A runtime option (``runtime.options.KEY``) that the runtime does not take or refuses."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _check_options(name: str, obj: Any, options: dict[str, Any]) -> None:
    """Refuse an option the constructor of `obj` does not take, naming those it does (a
    TypeError would say ``__init__() got an unexpected keyword argument``)."""
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):  # no signature to read: the constructor will say
        return
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    known = [k for k, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for key in options:
        if key not in known:
            raise OptionError(key, f"unknown option{hint(key, known)} "
                                   f"(options of {name}: {', '.join(known) or 'none'})")


def resolve(name: str, options: dict[str, Any] | None = None) -> Any:
    """Build the runtime object for `name` (a registered name or ``module:Attr``)."""
    # A built-in wins over any plugin of the same name, so it needs no entry-point scan.
    registered = BUILTIN if name in BUILTIN else available()
    if name in registered:
        target = registered[name]
        try:
            obj = load_path(target) if isinstance(target, str) else target.load()
        except Exception as exc:  # a plugin that cannot be imported is the user's to fix
            where = target if isinstance(target, str) else target.value
            raise UsageError(f"cannot load runtime {name!r} ({where}): "
                             f"{type(exc).__name__}: {exc}") from None
    elif ":" in name:
        if not _IMPORT_PATH.fullmatch(name):
            raise UsageError(f"runtime {name!r}: expected a registered name or module:Name "
                             f"(a dotted module path, a colon, an attribute)")
        try:
            obj = load_path(name)
        except Exception as exc:  # whatever importing the user's module raises
            raise UsageError(f"cannot load runtime {name!r}: {type(exc).__name__}: {exc}") from None
    else:
        raise UsageError(f"unknown runtime {name!r}{hint(name, registered)} "
                         f"(known: {', '.join(sorted(registered))}; or module:Name)")
    if isinstance(obj, type) and not is_ready(obj):
        raise UsageError(f"runtime {name!r} cannot run here: install what it needs with: "
                         f"{getattr(obj, 'install_hint', '(no install hint given)')}")
    if options and isinstance(obj, type):
        _check_options(name, obj, options)
    try:
        runtime = obj(**(options or {})) if isinstance(obj, type) else obj
    except (TypeError, ValueError) as exc:
        if options:
            # The scenario's runtime.options do not fit: the caller names the key. A runtime's
            # refusal starts with the option's name ("batching must be one of ...").
            key = next((k for k in options if str(exc).startswith(f"{k} ")), None)
            if key is not None:
                raise OptionError(key, str(exc)[len(key) + 1:]) from None
            raise
        raise UsageError(f"runtime {name!r} cannot be built: {exc}") from None
    if not isinstance(runtime, Runtime):
        missing = [m for m in ("name", "policy", "notes", "build_worker", "build_conductor",
                               "build_client") if not hasattr(runtime, m)]
        raise UsageError(f"runtime {name!r} is not a runtime: it lacks {', '.join(missing)} "
                         f"(subclass simharness.runtime.assembly.ModelRuntime, or implement "
                         f"simharness.runtime.protocol.Runtime)")
    if not runtime.name or runtime.name in ("reference", "model"):
        runtime.name = name
    return runtime


__all__ = ["BUILTIN", "GROUP", "PROFILES", "available", "describe", "entry_points", "is_ready",
           "load_path", "resolve", "runnable"]
