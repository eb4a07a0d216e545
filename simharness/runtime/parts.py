"""`WorkerParts`: the classes a model runtime's worker loop, conductor and ranks are built from.

A runtime that differs from mstar's reference semantics in one concern swaps one class:

    class FollowerRunsOwnOrder(MstarPython):
        parts = WorkerParts(lockstep=OwnOrderLockstep)

Each field is a class, or None for the standard one (`WorkerLoop`, `Lockstep`, `Speculation`,
`KvPulls`, `Teardown`, `Reports`, `StreamBuffer`, `Conductor`); the record names no class
itself, so every module of the runtime can read it without importing the others.
"""

from __future__ import annotations

from typing import Any

import msgspec


class WorkerParts(msgspec.Struct, frozen=True, kw_only=True):
    #: the worker loop (`runtime.worker_loop.WorkerLoop` or a subclass)
    worker_loop: Any = None
    #: its collaborators (`runtime.worker_parts`), each built with the loop's `LoopContext`
    lockstep: Any = None
    speculation: Any = None
    kv: Any = None
    teardown: Any = None
    reports: Any = None
    #: a rank's per-request stream buffer (`runtime.streams.StreamBuffer` or a subclass)
    stream_buffer: Any = None
    #: the conductor (`runtime.conductor.Conductor` or a subclass)
    conductor: Any = None

    def but(self, **changes: Any) -> WorkerParts:
        """These parts with some replaced (``MstarPython.parts.but(lockstep=...)``)."""
        return msgspec.structs.replace(self, **changes)


__all__ = ["WorkerParts"]
