"""The digest (scheme v2) hashes each event's msgpack encoding, however the recorder feeds it."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from simharness import events as ev
from simharness.run import simulate
from simharness.testing import signal
from simharness.trace import (
    BLOCK,
    DIGEST_SCHEME,
    Recorder,
    block_bytes,
    event_bytes,
    hash_block,
    other_scheme,
)


def _events(bagel):
    result, _ = simulate(bagel, "mstar-rust-prefix")  # loops end, so Forwards carry dropped pairs
    return result.events


def _hashed(events) -> str:
    return DIGEST_SCHEME + ":" + hashlib.sha256(b"".join(map(event_bytes, events))).hexdigest()


def test_a_block_is_its_events_encodings_back_to_back_wherever_it_is_cut(bagel):
    events = _events(bagel)
    want = b"".join(map(event_bytes, events))
    assert bytes(block_bytes(events)) == want
    # the array header cut off a block is 1, 3 or 5 bytes: blocks of every size give the same bytes
    for n in (1, 15, 16, 17, 1000):
        cut = b"".join(bytes(block_bytes(events[i:i + n])) for i in range(0, len(events), n))
        assert cut == want
    many = [events[0]] * 70_000  # an array 32 header
    assert bytes(block_bytes(many)) == event_bytes(events[0]) * len(many)
    assert bytes(block_bytes([])) == b""


def test_a_reused_buffer_hashes_each_block_alone(bagel):
    # The streamed digest encodes every block into one bytearray: a short block after a long
    # one must hash only its own bytes, not the long one's tail left in the buffer.
    events = _events(bagel)
    buf = bytearray()
    h = hashlib.sha256()
    blocks = [events[:500], events[500:503], events[503:], []]
    for block in blocks:
        hash_block(h, block, buf)
    assert h.hexdigest() == hashlib.sha256(b"".join(map(event_bytes, events))).hexdigest()


def test_a_kept_trace_and_a_streamed_one_give_the_same_digest(bagel):
    events = _events(bagel)
    assert len(events) > BLOCK  # more than one block, so the streamed digest flushes mid-run
    kept, streamed = Recorder(), Recorder(keep=False)
    for e in events:
        kept.emit(e)
        streamed.emit(e)
    assert kept.digest() == streamed.digest() == _hashed(events)
    assert DIGEST_SCHEME == "v2-sha256" and kept.digest().startswith("v2-sha256:")
    assert other_scheme(kept.digest()) is None
    assert other_scheme("sha256:" + "0" * 64) == "sha256"
    assert other_scheme("0" * 64) == "unnamed"


def test_an_event_is_its_type_name_and_every_field_including_each_signals():
    sig = signal("latents", "LLM", nbytes=8, src_node="combine_cfg", src_rank=2)
    e = ev.Delivered(0.25, 1, "r0", "w", 0, 2, ((sig, "w#0", "slot"),))
    name, fields = msgspec.msgpack.decode(event_bytes(e))
    assert name == "Delivered"
    assert fields[:6] == [0.25, 1, "r0", "w", 0, 2]
    assert fields[6] == [[[getattr(sig, f) for f in sig.__struct_fields__], "w#0", "slot"]]
    # any field of a signal changes the encoding, not only the identity its repr shows
    for f, v in (("nbytes", 9), ("counter", 3), ("origin", "node"), ("persist", True)):
        other = msgspec.structs.replace(sig, **{f: v})
        assert event_bytes(msgspec.structs.replace(e, outcomes=((other, "w#0", "slot"),))) != event_bytes(e)
    # two event types with equal field values encode differently
    assert event_bytes(ev.WalkStarted(0.0, "r0", "w", 1)) != event_bytes(ev.RequestEnded(0.0, "r0", "w", 1))


def test_an_object_the_encoding_does_not_know_is_refused():
    class Opaque:
        pass

    with pytest.raises(TypeError, match="nsupported"):
        event_bytes(ev.Submitted(0.0, Opaque(), "t2i"))  # type: ignore[arg-type]
