"""The event recorder: keeps the trace, feeds observers, and digests it.

Observers subscribe per event type (``on_<EventName>`` methods, e.g. ``on_Forward``); the
recorder resolves them once, so an event costs one list append plus one call per interested
observer. The digest is a sha256 over the canonical text of every event: same scenario, seed and
runtime give the same digest, and any difference in what ran, when, or where changes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, get_args

from simharness import events as ev
from simharness.runtime.signals import Signal

#: every event type, as `events.Event` lists them
EVENT_TYPES: tuple[type, ...] = get_args(ev.Event)


class Recorder:
    def __init__(self, observers: Iterable[Any] = (), keep: bool = True) -> None:
        self.events: list[Any] = []
        self.keep = keep
        self._handlers: dict[type, list[Callable[[Any], None]]] = {t: [] for t in EVENT_TYPES}
        for obs in observers:
            self.subscribe(obs)

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

    def digest(self) -> str:
        # Same bytes as hashing "canonical(e)\n" event by event, fed in blocks: one update per
        # block instead of two per event.
        h = hashlib.sha256()
        events, block = self.events, 4096
        for i in range(0, len(events), block):
            h.update("".join([canonical(e) + "\n" for e in events[i:i + block]]).encode())
        return "sha256:" + h.hexdigest()

    def write_jsonl(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            for e in self.events:
                fh.write(json.dumps(to_json(e), separators=(",", ":")) + "\n")


def canonical(event: Any) -> str:
    # repr of floats is the shortest round-tripping form, identical on every run and platform;
    # signals print as their compact identity (see Signal.__repr__).
    return type(event).__name__ + tuple.__repr__(event)


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
