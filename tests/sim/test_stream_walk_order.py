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
from tests.helpers import caught

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
