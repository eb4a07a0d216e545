"""The digest hashes ``canonical(e) + "\\n"`` per event, however the recorder feeds it."""

from __future__ import annotations

import hashlib

from simharness import events as ev
from simharness.run import simulate
from simharness.trace import BLOCK, Recorder, block_text, canonical


def _events(bagel):
    result, _ = simulate(bagel, "mstar-rust-prefix")  # loops end, so Forwards carry SharedPairs
    return result.events


def test_block_text_is_each_events_canonical_text(bagel):
    events = _events(bagel)
    assert any(type(e) is ev.Forward and type(e.filtered) is ev.SharedPairs for e in events)
    want = "".join(canonical(e) + "\n" for e in events).encode()
    assert block_text(events) == want
    shared = next(e.filtered for e in events if type(e) is ev.Forward and e.filtered)
    assert repr(shared) == tuple.__repr__(shared) == repr(tuple(shared))


def test_a_kept_trace_and_a_streamed_one_give_the_digest_of_the_canonical_text(bagel):
    events = _events(bagel)
    assert len(events) > BLOCK  # more than one block, so the streamed digest flushes mid-run
    kept, streamed = Recorder(), Recorder(keep=False)
    for e in events:
        kept.emit(e)
        streamed.emit(e)
    want = "sha256:" + hashlib.sha256("".join(canonical(e) + "\n" for e in events).encode()).hexdigest()
    assert kept.digest() == streamed.digest() == want
