"""Importing simpy without its version lookup, which is about a tenth of a fresh run.

simpy's package ``__init__`` sets ``simpy.__version__`` from ``importlib.metadata.version``.
Importing ``importlib.metadata`` drags in email, zipfile, socket, csv and random, and the lookup
then scans the installed distributions: about 45 ms of wall time here, against 14 ms for the
rest of simpy, in a ``simharness run`` of about 0.4 s. Nothing on the run path needs simpy's
version (or any other use of ``importlib.metadata``), so `import_simpy` imports simpy while a
stand-in module answers the lookup with "not installed", which simpy's ``__init__`` already
handles by leaving ``__version__`` unset, and then hands ``simpy.__version__`` to a lazy module
attribute that does the real lookup on first access.

The stand-in is used only where ``importlib.metadata`` has not been imported yet (a fresh
command-line run; a test process or a Dask worker has long since imported it and imports simpy
plainly), and it is gone again before this function returns: a later ``import
importlib.metadata`` gets the real module. If simpy's ``__init__`` ever asks the stand-in for
anything else, the attempt is undone and simpy is imported plainly, so a newer simpy costs
time, not correctness. `tests/sim/test_startup_imports.py` holds a fresh run to not loading
``importlib.metadata`` and to the real ``simpy.__version__``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _NotInstalled(ModuleNotFoundError):
    """What the stand-in's ``version`` raises (simpy catches it by this name)."""


def _no_version(name: str) -> str:
    raise _NotInstalled(name)


def _real_version(attr: str) -> str:
    """``simpy.__version__`` on first access (PEP 562 module ``__getattr__``)."""
    if attr != "__version__":
        raise AttributeError(f"module 'simpy' has no attribute {attr!r}")
    from importlib.metadata import version

    simpy: Any = sys.modules["simpy"]
    v = simpy.__version__ = version("simpy")
    return v


def import_simpy() -> None:
    """Import simpy, skipping its ``importlib.metadata`` lookup when that module is not loaded."""
    if "simpy" in sys.modules or "importlib.metadata" in sys.modules:
        import simpy  # already paid for, or nothing to save

        return
    stand_in = types.ModuleType("importlib.metadata")
    stand_in.version = _no_version  # type: ignore[attr-defined]
    stand_in.PackageNotFoundError = _NotInstalled  # type: ignore[attr-defined]
    sys.modules["importlib.metadata"] = stand_in
    importlib.metadata = stand_in  # `import a.b` reads it off `a`
    try:
        import simpy
    except Exception:
        # Something this stand-in does not provide: forget the half-made import (below, it is
        # made again plainly and raises whatever a plain import raises).
        for name in [m for m in sys.modules if m == "simpy" or m.startswith("simpy.")]:
            del sys.modules[name]
        plainly = True
    else:
        plainly = False
    finally:
        del sys.modules["importlib.metadata"]
        if getattr(importlib, "metadata", None) is stand_in:
            del importlib.metadata
    if plainly:
        import simpy
    elif "__version__" not in vars(simpy):
        simpy.__getattr__ = _real_version  # type: ignore[method-assign]
