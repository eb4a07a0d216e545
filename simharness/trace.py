"""The event recorder: feeds observers, digests the trace, and keeps it when asked to.

Observers subscribe per event type (``on_<EventName>`` methods, e.g. ``on_Forward``); the
recorder resolves them once, so an event costs one call per interested observer. The digest is a
sha256 over the canonical text of every event: same scenario, seed and runtime give the same
digest, and any difference in what ran, when, or where changes it.

A run keeps its events in memory only when something needs them afterwards (a trace file, a
report, a diff of two runs): ``keep=True``. Otherwise the digest is computed as events happen
and memory does not grow with the length of the run; the digest is the same either way (events
are immutable tuples, so their text at emission is their text at the end).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from itertools import repeat
from pathlib import Path
from typing import Any, get_args

from simharness import events as ev
from simharness import fileio
from simharness.runtime.signals import Signal

#: every event type, as `events.Event` lists them
EVENT_TYPES: tuple[type, ...] = get_args(ev.Event)


#: events hashed per update when digesting as events happen (one update per block, not two
#: per event)
BLOCK = 4096

#: event type -> its name, the first part of its canonical text
_NAMES: dict[type, str] = {t: t.__name__ for t in EVENT_TYPES}


class Recorder:
    def __init__(self, observers: Iterable[Any] = (), keep: bool = True, digest: bool = True) -> None:
        #: every event, in order, when `keep`; else empty
        self.events: list[Any] = []
        self.keep = keep
        #: whether `digest()` can be asked for (digesting costs the canonical text of each event)
        self.digesting = digest
        self._handlers: dict[type, list[Callable[[Any], None]]] = {t: [] for t in EVENT_TYPES}
        # Without the events, the digest is fed as they happen: the events of the current block.
        self._hash = hashlib.sha256()
        self._pending: list[Any] = []
        for obs in observers:
            self.subscribe(obs)
        if not keep and digest:
            self.emit = self._emit_digesting  # type: ignore[method-assign]

    def subscribe(self, observer: Any) -> None:
        for t in EVENT_TYPES:
            fn = getattr(observer, f"on_{t.__name__}", None)
            if fn is not None:
                self._handlers[t].append(fn)

    def emit(self, event: Any) -> None:
        if self.keep:
            self.events.append(event)
        for fn in self._handlers[type(event)]:
            fn(event)

    def _emit_digesting(self, event: Any) -> None:
        pending = self._pending
        pending.append(event)
        if len(pending) >= BLOCK:
            self._flush()
        for fn in self._handlers[type(event)]:
            fn(event)

    def _flush(self) -> None:
        if self._pending:
            self._hash.update(block_text(self._pending))
            self._pending = []

    def digest(self) -> str:
        # Same bytes as hashing "canonical(e)\n" event by event, fed in blocks.
        if not self.keep:
            if not self.digesting:
                raise RuntimeError("this run neither kept its events nor digested them")
            self._flush()
            return "sha256:" + self._hash.copy().hexdigest()
        h = hashlib.sha256()
        events = self.events
        for i in range(0, len(events), BLOCK):
            h.update(block_text(events[i:i + BLOCK]))
        return "sha256:" + h.hexdigest()

    def write_jsonl(self, path: str | Path) -> None:
        if not self.keep:
            raise RuntimeError("this run did not keep its events (keep_trace=False)")
        with fileio.atomic_open(path, "w") as fh:
            for e in self.events:
                fh.write(json.dumps(to_json(e), separators=(",", ":")) + "\n")


def canonical(event: Any) -> str:
    # repr of floats is the shortest round-tripping form, identical on every run and platform;
    # signals print as their compact identity (see Signal.__repr__).
    return type(event).__name__ + tuple.__repr__(event)


def block_text(events: list[Any]) -> bytes:
    """``canonical(e) + "\\n"`` of every event, concatenated and encoded: what the digest hashes.

    The same text as calling `canonical` per event, built by C-level maps (no Python frame per
    event): on a loaded run this is most of what digesting costs.
    """
    names = map(_NAMES.__getitem__, map(type, events))
    texts = map(str.__add__, names, map(tuple.__repr__, events))
    return "".join(map(str.__add__, texts, repeat("\n"))).encode()


def to_json(event: Any) -> dict[str, Any]:
    def conv(v: Any) -> Any:
        if isinstance(v, Signal):
            return v.to_json()
        if hasattr(v, "_asdict"):
            return {k: conv(x) for k, x in v._asdict().items()}
        if isinstance(v, tuple | list):
            return [conv(x) for x in v]
        return v

    out = {"event": type(event).__name__}
    out.update({k: conv(v) for k, v in event._asdict().items()})
    return out
