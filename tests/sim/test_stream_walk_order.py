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


def _consumer_and_helper(consumer_first: bool) -> dict:
    """A stream consumer k on rank 1 (gated each pass by a conductor input, as a real consumer
    is) and a node e on rank 2 in the same walk of the consumer partition: e after k (k hands
    on to it) or before it (e hands on to k)."""
    a = node("a", ["in0"], [("y_a", "client")])
    a["outputs"].append({"name": "st", "to": "k", "stream": True})
    if consumer_first:
        walk = [node("k", ["st", "trig"], [("y_k", "e")]), node("e", ["y_k"], [("y_e", "client")])]
    else:
        walk = [node("e", ["trig"], [("y_e", "k")]), node("k", ["st", "y_e"], [("y_k", "client")])]
    raw = raw_scenario(
        {"w0": a, "c": {"sequential": walk}},
        [{"node_names": ["a"], "ranks": [0]}, {"node_names": ["k"], "ranks": [1]},
         {"node_names": ["e"], "ranks": [2]}],
        requests={"r": {"inputs": ["in0", "trig"],
                        "partitions": {"main": ["w0"], "sink": [{"walk": "c", "until": "final_chunk"}]}}},
        workload=[{"request": "r", "count": 2, "concurrency": 1}],
    )
    raw["graph"]["partitions"] = {"main": ["w0"], "sink": ["c"]}
    raw["graph"]["streams"] = [{"from": "main", "to": "sink", "edge": "st",
                                "policy": {"fixed": {"chunk": 1}}}]
    return raw


def test_producer_done_goes_to_every_rank_of_the_consumer_partition():
    """mstar's conductor sends producer_done to every worker of the consumer partition's worker
    graphs (``_send_producer_done``), not only to the consumer's: here k consumes the stream on
    rank 1 and e runs before it on rank 2, so both ranks get it; k's pass on the final chunk
    completes the walk, and the run is clean."""
    report = run_scenario(build(_consumer_and_helper(consumer_first=False)), "mstar-python")
    sent = [e.ranks for e in report.result.events if type(e).__name__ == "ProducerDoneSent"]
    assert sent == [(1, 2), (1, 2)]
    assert report.violations == []


def test_only_the_report_that_completes_the_pass_ends_the_stream_partition():
    """mstar's Conductor ends a stream partition on the partition_done of the WORKER_GRAPHS_DONE
    that completes the pass (conductor.py:1373-1391), and only the rank whose batch consumed the
    final chunk sets it (worker.py:2383-2385). With e after the consumer, on another rank, e's
    report completes each pass and never carries it: the partition starts a pass after the
    final chunk, in which k waits for a chunk that never comes."""
    report = run_scenario(build(_consumer_and_helper(consumer_first=True)), "mstar-python")
    hangs = [v for v in report.violations if v.check == "liveness"]
    assert hangs and "k@1" in hangs[0].message and "waits for st" in hangs[0].message
    done = [e for e in report.result.events if type(e).__name__ == "PartitionDone"
            and e.partition == "sink"]
    assert done == []
