"""A stream chunk of an earlier walk must not turn its producer partition's walk back.

mstar learns a partition's current walk only from non-stream INPUT_SIGNALS. When a chunk from
walk w0 of partition `main` reaches a rank together with the walk-start input of `main`'s next
walk w1 and is handled second (shuffled ties), the rank must still run w1's node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.helpers import build, caught, node, raw_scenario

CASE = Path(__file__).parent.parent / "scenarios" / "stream_chunk_after_next_walk.yaml"


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_a_late_chunk_leaves_the_next_walk_running(seed):
    report = run_scenario(load_scenario(CASE), "mstar-python", seed=seed)
    assert report.violations == []


def test_a_runtime_whose_chunks_set_the_walk_hangs_and_liveness_names_the_stream():
    sc = load_scenario(CASE)
    hangs = caught(sc, "tests.quality.broken:StreamTurnsWalkBack", "liveness")
    text = hangs[0].message
    assert "d@0 is ready but was never run" in text
    # e waits in the sink partition's walk: its input comes from main's stream, not "nobody".
    assert "e@0 waits for st (from the stream from partition main)" in text


def test_producer_done_goes_to_every_rank_of_the_consumer_partition():
    """mstar's conductor sends producer_done to every worker of the consumer partition's worker
    graphs (``_send_producer_done``), not only to the consumer's: here k consumes the stream on
    rank 1 (gated each pass by a conductor input, as a real consumer is) and hands on to e on
    rank 2, so both ranks get it, and the run is clean."""
    a = node("a", ["in0"], [("y_a", "client")])
    a["outputs"].append({"name": "st", "to": "k", "stream": True})
    raw = raw_scenario(
        {"w0": a,
         "c": {"sequential": [node("k", ["st", "trig"], [("y_k", "e")]),
                              node("e", ["y_k"], [("y_e", "client")])]}},
        [{"node_names": ["a"], "ranks": [0]}, {"node_names": ["k"], "ranks": [1]},
         {"node_names": ["e"], "ranks": [2]}],
        requests={"r": {"inputs": ["in0", "trig"],
                        "partitions": {"main": ["w0"], "sink": [{"walk": "c", "until": "final_chunk"}]}}},
        workload=[{"request": "r", "count": 2, "concurrency": 1}],
    )
    raw["graph"]["partitions"] = {"main": ["w0"], "sink": ["c"]}
    raw["graph"]["streams"] = [{"from": "main", "to": "sink", "edge": "st",
                                "policy": {"fixed": {"chunk": 1}}}]
    report = run_scenario(build(raw), "mstar-python")
    sent = [e.ranks for e in report.result.events if type(e).__name__ == "ProducerDoneSent"]
    assert sent == [(1, 2), (1, 2)]
    assert report.violations == []
