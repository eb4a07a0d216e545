"""Each of mstar's chunk policies becomes the scenario's ``policy`` block with the sizes it was
built with (``simharness.mstar.convert.chunk_policy``), whatever it has read so far."""

from __future__ import annotations

import pytest

from simharness.mstar.convert import chunk_policy
from tests.helpers import needs_mstar

pytestmark = needs_mstar()


def _policies():
    from mstar.streaming.chunk_policy import (
        FixedChunkPolicy,
        LeftContextChunkPolicy,
        SlidingWindowChunkPolicy,
    )

    return [
        (SlidingWindowChunkPolicy(window=28, stride=7), {"sliding_window": {"window": 28, "stride": 7}}),
        (LeftContextChunkPolicy(chunk=25, left_context=10), {"left_context": {"chunk": 25, "context": 10}}),
        (FixedChunkPolicy(4), {"fixed": {"chunk": 4}}),
        (FixedChunkPolicy(1, continue_after_done=True), {"fixed": {"chunk": 1, "continue_after_done": True}}),
    ]


@pytest.mark.parametrize("read_first", [False, True], ids=["fresh", "after-a-chunk"])
def test_each_policy_converts_to_the_sizes_it_was_built_with(read_first):
    for policy, want in _policies():
        if read_first:  # a left-context policy's window changes after its first chunk
            policy.register_chunk(policy.next_chunk_size(policy.window_size()))
        assert chunk_policy(policy) == want, type(policy).__name__


def test_an_unknown_policy_is_refused():
    with pytest.raises(TypeError, match="unknown mstar chunk policy"):
        chunk_policy(object())
