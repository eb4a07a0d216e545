"""Finding a runtime under test by name.

Runtimes register under the ``simharness.runtimes`` entry-point group (the shipped ones do so in
our own pyproject), so another package can add its own. ``module:Name`` also works, for a runtime
that is not installed as a package. The built-in profiles are always available, even when the
package metadata is missing (running from a source tree), and so is ``mstar`` (the adapter for
the real mstar code) when the mstar-ai package can be imported; asking for ``mstar`` without it
is a usage error that names the pip command.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

from simharness.errors import UsageError
from simharness.runtime.profiles import MstarPython, MstarRust, MstarRustPrefix
from simharness.wording import hint

GROUP = "simharness.runtimes"
#: the reference profiles; always available and never shadowed by a plugin
PROFILES: dict[str, type] = {cls.name: cls for cls in (MstarPython, MstarRustPrefix, MstarRust)}


def _mstar_adapter():
    # Imported when asked for: the adapter imports the mstar package, and the entry-point scan
    # imports importlib.metadata; a run of a reference profile needs neither (start-up time).
    from simharness.runtime import mstar_adapter

    return mstar_adapter


def builtin() -> dict[str, type]:
    """The built-in runtimes: the profiles, and ``mstar`` when the mstar-ai package imports."""
    found = dict(PROFILES)
    adapter = _mstar_adapter()
    if adapter.is_available():
        found[adapter.MstarRuntime.name] = adapter.MstarRuntime
    return found


def entry_points(group: str) -> Any:
    """The installed entry points of `group` (importlib.metadata, imported on first use)."""
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def available() -> dict[str, Any]:
    """name -> entry point or class, built-ins first."""
    found: dict[str, Any] = builtin()
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def describe(target: Any) -> str:
    """One line about a registered runtime, for ``simharness runtimes``."""
    if isinstance(target, type):
        return _own_description(target)
    try:
        cls = target.load()
    except Exception as exc:  # a broken plugin must not break the listing
        return f"cannot load {target.value}: {type(exc).__name__}: {exc}"
    dist = getattr(getattr(target, "dist", None), "name", None)
    desc = _own_description(cls) or target.value
    adapter = _mstar_adapter()
    if cls is adapter.MstarRuntime and not adapter.is_available():
        desc = f"not installed: {adapter.PIP_INSTALL}"
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


#: ``module.path:Attribute``, both sides identifiers (``':'`` or ``'.x:y'`` are not).
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def resolve(name: str, options: dict[str, Any] | None = None) -> Any:
    """Build the runtime object for `name` (a registered name or ``module:Attr``)."""
    # A profile wins over any plugin of the same name, so it needs no entry-point scan.
    registered = PROFILES if name in PROFILES else available()
    if name in registered:
        target = registered[name]
        try:
            obj = target if isinstance(target, type) else target.load()
        except Exception as exc:  # a plugin that cannot be imported is the user's to fix
            raise UsageError(f"cannot load runtime {name!r} ({target.value}): "
                             f"{type(exc).__name__}: {exc}") from None
    elif ":" in name:
        if not _IMPORT_PATH.fullmatch(name):
            raise UsageError(f"runtime {name!r}: expected a registered name or module:Name "
                             f"(a dotted module path, a colon, an attribute)")
        module, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(module), attr)
        except Exception as exc:  # whatever importing the user's module raises
            raise UsageError(f"cannot load runtime {name!r}: {type(exc).__name__}: {exc}") from None
    elif name == "mstar":
        obj = _mstar_adapter().MstarRuntime  # its constructor names the pip command
    else:
        raise UsageError(f"unknown runtime {name!r}{hint(name, [*registered, 'mstar'])} "
                         f"(known: {', '.join(sorted({*registered, 'mstar'}))}; or module:Name)")
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
    if not hasattr(runtime, "build_rank"):
        raise UsageError(f"runtime {name!r} has no build_rank(rank, layout) method")
    if not getattr(runtime, "name", None) or getattr(runtime, "name", None) == "reference":
        runtime.name = name
    return runtime
