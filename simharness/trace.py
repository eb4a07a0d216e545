"""The event recorder: feeds observers, digests the trace, and keeps it when asked to.

Observers subscribe per event type (``on_<EventName>`` methods, e.g. ``on_Forward``); the
recorder resolves them once, so an event costs one call per interested observer. A hook that is
None or `no_op_hook` (the default of every `checks.Check` hook) is not subscribed: an observer
pays only for the events it looks at. The digest is a sha256 over a binary encoding of every
event: same scenario, seed and runtime give the same digest, and any difference in what ran,
when, or where changes it.

**Digest scheme v2** (``v2-sha256:<hex>``): each event is its type name and its fields, encoded
as one msgpack array by msgspec, in C: ``[name, [field values...]]``; a signal inside is the
array of all its fields (`Signal` is a msgspec array-like Struct; a stream chunk adds its own).
Floats are msgpack float64, integers their shortest msgpack form, so the bytes are the same on
every platform. The digest hashes those encodings back to back. Scheme v1 (``sha256:``) hashed
the Python text (``repr``) of every event: rendering that text was about a fifth of a loaded run,
the encoding costs about a fifth of what the text did, and it covers every field of a signal
where the text held only its identity. Corpus files record the scheme with the digest; `replay`
names a digest of another scheme instead of reporting it as a changed trace.

A run keeps its events in memory only when something needs them afterwards (a trace file, a
report, a diff of two runs): ``keep=True``. Otherwise the digest is computed as events happen
and memory does not grow with the length of the run; the digest is the same either way (events
are immutable records of immutable values, so their encoding at emission is their encoding at
the end).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from simharness import events as ev
from simharness import fileio
from simharness.signals import Signal

#: every event type (`events.EVENT_TYPES`)
EVENT_TYPES = ev.EVENT_TYPES


#: events hashed per update when digesting as events happen (one update per block, not two
#: per event). Small on purpose: a pending event keeps its signals alive, and a block of
#: thousands kept megabytes of them out of cache; 64 measured 6 to 10% faster than 4,096 on a
#: loaded bagel_cfg (docs/performance.md). The digest does not depend on it.
BLOCK = 64

#: the scheme of the digests this version makes: the prefix of every digest (see above)
DIGEST_SCHEME = "v2-sha256"
_PREFIX = DIGEST_SCHEME + ":"

#: event type -> its name, the first item of its encoding
_NAMES: dict[type, str] = {t: t.__name__ for t in EVENT_TYPES}
# No enc_hook: everything inside an event is msgpack data or a msgspec Struct (signals), so an
# object of any other type is refused (TypeError) rather than encoded by a guess.
_ENCODER = msgspec.msgpack.Encoder()


def no_op_hook(self: Any, event: Any) -> None:
    """A hook that does nothing, which the recorder never subscribes: the default of an
    ``on_<Event>`` an observer class declares only to say it may be overridden."""


class Recorder:
    def __init__(self, observers: Iterable[Any] = (), keep: bool = True, digest: bool = True) -> None:
        #: every event, in order, when `keep`; else empty
        self.events: list[Any] = []
        self.keep = keep
        #: whether `digest()` can be asked for (digesting costs the encoding of each event)
        self.digesting = digest
        self._handlers: dict[type, list[Callable[[Any], None]]] = {t: [] for t in EVENT_TYPES}
        # Without the events, the digest is fed as they happen: the events of the current block.
        self._hash = hashlib.sha256()
        self._pending: list[Any] = []
        #: the buffer each block is encoded into, reused: it keeps its memory from block to
        #: block, where a fresh encoding grew a new one every time
        self._buf = bytearray()
        for obs in observers:
            self.subscribe(obs)

    def subscribe(self, observer: Any) -> None:
        for t in EVENT_TYPES:
            fn = getattr(observer, f"on_{t.__name__}", None)
            # a hook the observer did not override (or set to None) costs no call per event
            if fn is not None and getattr(fn, "__func__", None) is not no_op_hook:
                self._handlers[t].append(fn)

    def emit(self, event: Any) -> None:
        """One event: `emit_all` of it alone."""
        self.emit_all((event,))

    def emit_all(self, events: Sequence[Any]) -> None:
        """Record `events`, in order: keep them (``keep``) or digest them (in blocks of
        `BLOCK`), and hand each to the observers of its type. A driver calls this with the
        events of one `Effects`: one call for all of them."""
        if self.keep:
            self.events.extend(events)
        elif self.digesting:
            pending = self._pending
            pending.extend(events)
            if len(pending) >= BLOCK:
                self._flush()
        handlers = self._handlers
        for event in events:
            for fn in handlers[type(event)]:
                fn(event)

    def _flush(self) -> None:
        if self._pending:
            hash_block(self._hash, self._pending, self._buf)
            self._pending = []

    def digest(self) -> str:
        # Same bytes as hashing event_bytes(e) event by event, fed in blocks.
        if not self.keep:
            if not self.digesting:
                raise RuntimeError("this run neither kept its events nor digested them")
            self._flush()
            return _PREFIX + self._hash.copy().hexdigest()
        h = hashlib.sha256()
        events = self.events
        buf = bytearray()
        for i in range(0, len(events), BLOCK):
            hash_block(h, events[i:i + BLOCK], buf)
        return _PREFIX + h.hexdigest()

    def write_jsonl(self, path: str | Path) -> None:
        if not self.keep:
            raise RuntimeError("this run did not keep its events (keep_trace=False)")
        with fileio.atomic_open(path, "w") as fh:
            for e in self.events:
                fh.write(json.dumps(to_json(e), separators=(",", ":")) + "\n")


def other_scheme(digest: str) -> str | None:
    """The scheme `digest` was made under when it is not this version's (``sha256`` for scheme
    v1, ``unnamed`` for a digest without one); None when it is this version's: whoever compares
    a recorded digest asks this first, since digests of two schemes never match."""
    scheme = digest.rpartition(":")[0]
    return None if scheme == DIGEST_SCHEME else scheme or "unnamed"


def canonical(event: Any) -> str:
    """An event as one line of text, for people (diffs, messages); the digest does not hash it.
    Signals print as their compact identity (see `Signal.__repr__`)."""
    return type(event).__name__ + repr(msgspec.structs.astuple(event))


def event_bytes(event: Any) -> bytes:
    """What the digest hashes for one event: ``[type name, [fields...]]`` as msgpack."""
    return _ENCODER.encode((_NAMES[type(event)], event))


def block_bytes(events: list[Any]) -> memoryview:
    """`event_bytes` of every event of `events`, back to back: what the digest hashes per block.

    One encoder call for the block (no Python frame per event): the block is encoded as one
    msgpack array of the ``[name, event]`` pairs and the array's header is cut off, which leaves
    exactly the concatenated encodings, so a digest does not depend on where blocks begin.
    """
    buf = bytearray()
    start = _encode_block(events, buf)
    return memoryview(buf)[start:]


def hash_block(h: Any, events: list[Any], buf: bytearray) -> None:
    """Feed `h` the `block_bytes` of `events`, encoded into `buf`: a bytearray the caller keeps
    from block to block, so that no block allocates and grows a buffer of its own."""
    start = _encode_block(events, buf)
    with memoryview(buf) as view:  # released at once: `buf` cannot be resized while viewed
        h.update(view[start:])


def _encode_block(events: list[Any], buf: bytearray) -> int:
    """Encode the ``[name, event]`` pairs of `events` into `buf` (replacing what it held) as
    one msgpack array; return where the concatenated encodings begin (after its header)."""
    pairs = list(zip(map(_NAMES.__getitem__, map(type, events)), events, strict=True))
    _ENCODER.encode_into(pairs, buf)
    return _array_header_size(len(pairs))


def _array_header_size(n: int) -> int:
    """Bytes of the msgpack header of an array of `n` items (fixarray, array 16, array 32)."""
    return 1 if n < 16 else 3 if n < 0x10000 else 5


def to_json(event: Any) -> dict[str, Any]:
    def conv(v: Any) -> Any:
        if isinstance(v, Signal):
            return v.to_json()
        if isinstance(v, msgspec.Struct):  # a record inside an event (`BlockedNode`)
            return {k: conv(x) for k, x in msgspec.structs.asdict(v).items()}
        if isinstance(v, tuple | list):
            return [conv(x) for x in v]
        return v

    out = {"event": type(event).__name__}
    out.update({k: conv(v) for k, v in msgspec.structs.asdict(event).items()})
    return out
