"""The lines of mstar-ai's code that the stack restates instead of calling, pinned by hash.

`StackWorker.main` and `StackConductor` restate loops that cannot be called (they block, start
threads, poll sockets); the stack's client restates what the API server does with a request's
outputs. Each restated span is pinned here: its file in the mstar package, its first and last
line, and the SHA-256 of those lines (trailing spaces stripped, joined by newlines). The pins
test (``tests/fidelity/test_mstar_stack_pins.py``) recomputes them against the installed
mstar-ai, so an upgrade that moves or changes a restated line fails loudly, naming the span,
instead of letting the stack drift from the code it stands for. Restate, re-read, then re-pin.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import NamedTuple

#: the mstar-ai version the pins were taken from
MSTAR_VERSION = "0.2.1"


class Pin(NamedTuple):
    #: the file, relative to the ``mstar`` package
    path: str
    first: int
    last: int
    sha256: str
    #: what restates it
    what: str


PINS: tuple[Pin, ...] = (
    Pin("worker/worker.py", 2608, 3139,
        "3e79c2391b587fc50be57557332e0e89c622fec72e1c213fb0e985dadfa57363",
        "Worker.run: restated by StackWorker.main"),
    Pin("conductor/conductor.py", 1334, 1408,
        "b8cb8eca61d51416dd232658c81020459fc44e9aa97ccfc3f06f7e0b409522c2",
        "Conductor.run: its loop body restated by StackConductor._iteration"),
    Pin("conductor/conductor.py", 1314, 1332,
        "153740b93caf6101a57e269ace1e821847e9345442cb0264abaaef5f0365d306",
        "Conductor._wait_for_workers_ready: restated by StackConductor.startup"),
    Pin("api_server/data_worker.py", 173, 187,
        "aeadd9b22d8b3464d03aafff07a02b9d52fc7bf4ae39b187aef01a4a3971963a",
        "received_final_chunks: the API server's per-name final-output check (the stack's client)"),
    Pin("api_server/data_worker.py", 524, 549,
        "27f7b967a0c3522d62e87f3549e0c6ca43ed73ebb8e0c6fcee41aef8b0fcb4a6",
        "DataWorker._process_messages: the preprocess worker's handling the stack restates"),
    Pin("api_server/entrypoint.py", 314, 320,
        "f8e12081cab78802aa3bfa5dc3b4bc49bfcd0f61b4ce44dba7255f4946169acf",
        "the API server's request TTL the stack's client restates"),
)


def digest(package_root: Path, pin: Pin) -> str:
    """The SHA-256 of the pinned span as installed now."""
    lines = (package_root / pin.path).read_text().splitlines()[pin.first - 1:pin.last]
    return hashlib.sha256("\n".join(line.rstrip() for line in lines).encode()).hexdigest()
