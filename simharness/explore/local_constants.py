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
`tests/property/test_campaign.py` fails if a Hypothesis upgrade makes this ineffective, and a
campaign refuses to start, naming what is gone, when a patched name no longer exists.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from simharness.errors import UsageError

_lock = threading.Lock()
_depth = 0
_saved: Any = None


#: The names `without_local_constants` swaps or clears in ``hypothesis.internal.conjecture.
#: providers``: private to Hypothesis, present from 6.131 (pyproject.toml pins the range).
PATCHED = ("_get_local_constants", "Constants", "CONSTANTS_CACHE")


class HypothesisChanged(UsageError):
    """The installed Hypothesis lacks a name `without_local_constants` patches: campaigns would
    silently depend on what the process imported, so they refuse to run instead (one line,
    exit 2, as for any set-up the command cannot work with)."""


def _providers() -> Any:
    """Hypothesis's providers module, every name of `PATCHED` checked.

    A missing name is an error, not a silent no-op: a Hypothesis outside the range
    pyproject.toml pins may have moved its local-constants pool, and a campaign run without
    the patch would no longer replay from its seed alone.
    """
    import hypothesis

    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        missing = list(PATCHED)
    else:
        missing = [n for n in PATCHED if not hasattr(providers, n)]
    if missing:
        raise HypothesisChanged(
            f"hypothesis {hypothesis.__version__} has no providers.{', providers.'.join(missing)}: "
            f"simharness keeps local constants out of generation by patching them (supported: "
            f"the hypothesis range pinned in simharness's pyproject.toml)")
    return providers


@contextmanager
def without_local_constants() -> Iterator[None]:
    """Run the body with Hypothesis drawing no constants from the modules this process loaded."""
    global _depth, _saved
    providers = _providers()
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
