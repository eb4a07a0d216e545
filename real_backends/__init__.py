"""Real backends: the same scenarios on real OS processes, ZMQ sockets and torch tensors.

This package is the only place in the project that imports pyzmq and torch. The command line
imports it lazily, only for ``simharness run --backend zmq`` and ``simharness confirm``, and calls
`require` first so that a missing dependency is one line, not a traceback. Their ``--help`` reads
the options' defaults from `options`, which needs nothing beyond the standard library.

Modules: `options` (`RealOptions`: how a run goes), `wire` (message frames), `control` (the
driver's own messages), `transport` (sockets), `tensors` (payloads and the fake nodes' torch
work), `process` (a rank or the conductor as an OS process), `teardown` (what ties a run's
processes and folder to its launcher), `launcher` (the run: processes, workload, hang and crash
detection, the merged trace), `confirm` (the simulation and the real run side by side).
"""

from __future__ import annotations

import importlib.util

PIP_HINT = "pip install 'simharness[real]'  (pyzmq, msgpack and torch==2.13.0)"


class MissingDependency(RuntimeError):
    pass


def require(*, torch: bool = True) -> None:
    """Raise `MissingDependency` naming the pip command when pyzmq, msgpack (or torch) is not
    installed. msgspec is a dependency of simharness itself."""
    missing = [name for name, need in (("zmq", True), ("msgpack", True), ("torch", torch))
               if need and importlib.util.find_spec(name) is None]
    if missing:
        names = " and ".join("pyzmq" if m == "zmq" else m for m in missing)
        raise MissingDependency(f"the zmq backend needs {names}: {PIP_HINT}")
