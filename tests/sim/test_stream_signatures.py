"""A `streams` failure's signature says what went wrong, so the corpus keeps kinds apart.

All of them used to be `streams:other`: a known case of mstar's final-chunk race (quirk Q7,
producer_done overtaking the last item) would then have made a link that reorders items, or a
lost item, known too, and a campaign would not have failed on them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simharness.explore.execute import signature
from simharness.run import simulate
from simharness.scenario.loader import load_scenario

ROOT = Path(__file__).parent.parent.parent


@pytest.mark.parametrize("runtime,key", [
    ("broken_streams:SkipsChunkIndex", "order"),
    ("broken_streams:DropsMiddleItem", "order"),
    ("broken:DuplicatesFinalChunk", "finals"),
    ("broken_streams:ChunkAfterFinal", "finals"),
    ("broken:LosesFinalItem", "unconsumed"),
    ("broken_streams:ReplaysChunks", "passes"),
])
def test_each_kind_of_stream_failure_has_its_key(runtime, key):
    sc = load_scenario(ROOT / "scenarios" / "orpheus.yaml")
    violations = [v for v in simulate(sc, "tests.quality." + runtime, keep_trace=False)[1]
                  if v.check == "streams"]
    assert signature(violations, sc) == ("streams", key)


def test_the_final_chunk_race_on_a_tp_follower_is_streams_finals():
    # producer_done reaches a follower of the consumer's TP instance before the last item: an
    # empty final chunk, then a second one (quirk Q7; a corpus case for every profile).
    sc = load_scenario(ROOT / "scenarios" / "corpus" / "mstar-python__streams-finals.yaml")
    assert signature(simulate(sc, "mstar-python", keep_trace=False)[1], sc) == ("streams", "finals")


def test_items_of_two_producer_ranks_out_of_send_order_are_their_own_kind():
    # A rank's own stream item enters its buffer at once; another rank's waits until the rank
    # handles its messages. Nothing orders two producers (a corpus case for every profile), so
    # this is not `streams:order`, which stays the key of a link that reorders.
    sc = load_scenario(ROOT / "scenarios" / "corpus" / "mstar-python__streams-order-across-ranks.yaml")
    violations = simulate(sc, "mstar-python", keep_trace=False)[1]
    assert signature(violations, sc) == ("streams", "order-across-ranks")
    assert any("items from ranks 0, 1 arrived in another order" in v.message for v in violations)
