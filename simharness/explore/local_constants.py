"""Keep what the process has imported out of generation: Hypothesis's local constants, off.

Since 6.131, Hypothesis now and then (about one draw in twenty) draws a literal that appears in
the source of a *local* module, one loaded in this process from outside the standard library
and site-packages and not a test file. The pool is read from `sys.modules` and grows as modules
are imported, so an example can depend on what else the process imported: importing
`real_backends.transport` (a test module under ``tests/real`` does) adds its port and queue
limits to the pool and turns a 30 pass / 4 fail / 6 fault_induced campaign into 33 / 4 / 3. It
also depends on how simharness is installed: an editable install is "local", a wheel is not.

A campaign's result must depend on its seed and arguments alone, so chunks run, and failures
shrink, with the local pool empty: Hypothesis's built-in constants stay (they are fixed by its
version), the literals of whatever happens to be imported do not. There is no public setting
for this, so `without_local_constants` swaps Hypothesis's pool lookup for an empty one while a
campaign's test runs and restores it after. It is reference-counted under a lock, so nested or
concurrent campaigns in one process (threads of a Dask worker) restore it only once the last
one ends. While it is on, other Hypothesis tests in the process see no local constants either.
`tests/property/test_campaign.py` fails if a Hypothesis upgrade makes this ineffective.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_depth = 0
_saved: Any = None


def _providers() -> Any:
    """Hypothesis's providers module when it has a local-constants pool (6.131 on), else None."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - an older Hypothesis has no such module
        return None
    if not hasattr(providers, "_get_local_constants") or not hasattr(providers, "Constants"):
        return None  # pragma: no cover - an older Hypothesis: nothing local to keep out
    return providers


@contextmanager
def without_local_constants() -> Iterator[None]:
    """Run the body with Hypothesis drawing no constants from the modules this process loaded."""
    global _depth, _saved
    providers = _providers()
    if providers is None:  # pragma: no cover - see _providers
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = providers._get_local_constants
            providers._get_local_constants = providers.Constants
            # The allowed-constants cache may hold local literals from an earlier test.
            providers.CONSTANTS_CACHE.cache.clear()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                providers._get_local_constants = _saved
                _saved = None
                # ... and now holds empty local pools, which later tests must not inherit.
                providers.CONSTANTS_CACHE.cache.clear()
