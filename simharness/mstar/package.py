"""The mstar-ai package: which version the harness is tested against, how to install it, and
how to reach its modules. Every fact about the package is written here once.

Nothing here imports mstar at import time: `graph_module` and `mstar_divider` import it when
first asked, and the shipped configs are found through the import system without importing it.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from simharness.errors import UsageError
from simharness.wording import hint

#: the mstar-ai release the harness is tested against
PINNED = "0.2.1"
#: mstar-ai declares Python 3.12 and a GPU serving stack; the code the harness runs is plain
#: Python, so the package is installed alone
PIP_INSTALL = f"pip install --no-deps --ignore-requires-python mstar-ai=={PINNED}"
#: what mstar's model code (``mstar.model.base``) imports besides the package: torch, triton,
#: pyzmq, msgpack (the ``mstar`` extra of simharness)
EXTRA_INSTALL = "pip install 'simharness[mstar]'"

_GRAPH: Any = None
_DIVIDE: tuple[Any, str] | None = None


def graph_module() -> Any:
    """``mstar.graph.graph_io`` (which re-exports ``mstar.graph.base``), or a UsageError."""
    global _GRAPH
    if _GRAPH is None:
        try:
            _GRAPH = importlib.import_module("mstar.graph.graph_io")
        except ImportError as exc:
            raise UsageError(f"runtime 'mstar' needs the mstar-ai package ({exc}); install it "
                             f"with: {PIP_INSTALL}") from None
    return _GRAPH


def is_available() -> bool:
    try:
        graph_module()
    except UsageError:
        return False
    return True


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mstar-ai")
    except PackageNotFoundError:
        return None


def mstar_divider() -> tuple[Any, str]:
    """(mstar's ``Model`` class, "") when ``mstar.model.base`` imports, else (None, why not)."""
    global _DIVIDE
    if _DIVIDE is None:
        try:
            base = importlib.import_module("mstar.model.base")
            _DIVIDE = (base.Model, "")
        except Exception as exc:  # an ImportError, or anything the heavy imports raise
            _DIVIDE = (None, f"{type(exc).__name__}: {exc}")
    return _DIVIDE


# -- the configs shipped in mstar's default_configs -------------------------------------------


def _default_configs() -> Path | None:
    """The folder of mstar's shipped configs, found without importing mstar; None without it."""
    try:
        spec = importlib.util.find_spec("mstar.default_configs")
    except ImportError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def default_configs_dir() -> Path:
    found = _default_configs()
    if found is None:
        raise UsageError(f"mstar-ai is not installed; install it with: {PIP_INSTALL}")
    return found


def default_config_names() -> list[str]:
    return sorted(p.stem for p in default_configs_dir().glob("*.yaml"))


def shipped_config_names() -> list[str]:
    """The names of the configs shipped with mstar-ai; none when it is not installed."""
    folder = _default_configs()
    return [] if folder is None else sorted(p.stem for p in folder.glob("*.yaml"))


def shipped_config(name: str) -> Path | None:
    """The config shipped with mstar-ai under `name` (with or without ``.yaml``); None when
    there is none, or mstar-ai is not installed."""
    folder = _default_configs()
    if folder is None or "/" in name or "\\" in name:
        return None
    path = folder / (name if name.endswith(".yaml") else name + ".yaml")
    return path if path.is_file() else None


def resolve_config(config: str) -> Path:
    """A config file path, or the name of a config shipped in mstar's ``default_configs``."""
    path = Path(config)
    if path.is_file():
        return path
    shipped = shipped_config(config)
    if shipped is not None:
        return shipped
    names = default_config_names()
    raise UsageError(f"{config!r}: neither a config file nor a config shipped with mstar-ai"
                     f"{hint(config.removesuffix('.yaml'), names)} (shipped: {', '.join(names)})")


__all__ = ["EXTRA_INSTALL", "PINNED", "PIP_INSTALL", "default_config_names", "default_configs_dir",
           "graph_module", "installed_version", "is_available", "mstar_divider", "resolve_config",
           "shipped_config", "shipped_config_names"]
