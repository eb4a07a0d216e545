"""StreamBuffer and chunk policies, driven by hand."""

from __future__ import annotations

import pytest

from simharness.runtime.streams import StreamBuffer
from simharness.scenario.model import ChunkPolicySpec
from simharness.signals import Signal


def _items(n):
    return [Signal("tok", "c", False, False, 1, "p", 0, "w", 0, i, "node", i, True) for i in range(n)]


def _drain(buf, items, done_after=True):
    chunks = []
    for it in items:
        buf.put(it)
        while buf.chunk_ready():
            chunks.append(buf.pop(len(chunks)))
    if done_after:
        buf.producer_done = True
        while buf.chunk_ready() and len(chunks) < 1000:
            chunks.append(buf.pop(len(chunks)))
    return chunks


@pytest.mark.parametrize("n", [0, 1, 27, 28, 29, 34, 35, 121, 301])
def test_sliding_window_pass_count_and_a_single_final_flush(n):
    buf = StreamBuffer("r0", "tok", "c", "P", ChunkPolicySpec("sliding_window", window=28, stride=7))
    chunks = _drain(buf, _items(n))
    expected = ((n - 28) // 7 + 1 if n >= 28 else 0) + 1
    assert len(chunks) == expected
    assert [c.final for c in chunks] == [False] * (expected - 1) + [True]
    assert all(len(c.items) == 28 for c in chunks[:-1])
    assert chunks[-1].start + len(chunks[-1].items) == n


def test_left_context_keeps_the_first_chunk_as_context():
    buf = StreamBuffer("r0", "codec", "c", "P", ChunkPolicySpec("left_context", chunk=25, context=25))
    chunks = _drain(buf, _items(120))
    assert [len(c.items) for c in chunks[:3]] == [25, 50, 50]
    assert [c.start for c in chunks[:3]] == [0, 0, 25]
    assert chunks[-1].final and sum(c.final for c in chunks) == 1


def test_fixed_continue_after_done_keeps_producing_empty_chunks_and_none_is_final():
    buf = StreamBuffer("r0", "states", "c", "P", ChunkPolicySpec("fixed", chunk=1, continue_after_done=True))
    chunks = _drain(buf, _items(3), done_after=False)
    buf.producer_done = True
    extra = [buf.pop(10 + i) for i in range(3) if buf.chunk_ready()]
    assert len(chunks) == 3 and len(extra) == 3
    assert all(not c.items for c in extra) and not any(c.final for c in chunks + extra)


def test_fixed_without_continue_gives_one_empty_final_chunk_when_drained_before_done():
    buf = StreamBuffer("r0", "s", "c", "P", ChunkPolicySpec("fixed", chunk=2))
    chunks = _drain(buf, _items(4))
    assert [len(c.items) for c in chunks] == [2, 2, 0]
    assert [c.final for c in chunks] == [False, False, True]
    assert not buf.chunk_ready()


def test_items_of_two_links_compare_by_first_appearance_per_link():
    # A sliding window repeats items across chunks (and a chunk may repeat one): each item
    # counts once, where it first appears, and each producer rank's items keep its send order.
    from simharness.checks.streams import _each_link_in_order
    from simharness.events import ChunkPopped

    sent_from = {0: 0, 1: 1, 2: 0, 3: 1}

    def chunks(*items):
        return [ChunkPopped(0.0, 2, "r0", "tok", i, 0, tuple(c), False, "p") for i, c in enumerate(items)]

    interleaved = chunks([1, 0], [0, 1, 3], [3, 3, 2])
    assert _each_link_in_order([0, 1, 2, 3], interleaved, sent_from)
    assert not _each_link_in_order([0, 1, 2, 3], chunks([2, 1], [1, 0, 3]), sent_from)
    assert not _each_link_in_order([0, 1], chunks([0, 1, 2]), sent_from)
