"""A hang behind TP lockstep is reported as one: the corpus case where a leader waits in the
collective of a batch its follower cannot run, named from the follower's side under every
runtime, with the model's and the real mstar graph code alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from simharness.explore.execute import signature
from simharness.run import run_scenario
from simharness.scenario import load_scenario

CORPUS = Path(__file__).parent.parent.parent / "scenarios" / "corpus"
CASE = CORPUS / "mstar-python__liveness-hang-lockstep.yaml"


@pytest.mark.parametrize("runtime", ["mstar-python", "mstar-rust-prefix", "mstar-rust", "mstar-graph"])
def test_the_follower_names_the_leaders_batch_it_cannot_run(runtime):
    sc = load_scenario(CASE)
    report = run_scenario(sc, runtime)
    hangs = {v.request: v for v in report.violations if v.check == "liveness"}
    assert sorted(hangs) == ["r0", "r1"]
    # r0's extra pass of b: the leader took it into a batch and waits in its collective for the
    # follower, which has no chunk left for it (the real stack hangs in that pass too)
    assert ("b@0 holds every input but TP lockstep holds it: rank 0 took b for r0 into batch 5 "
            "of its TP instance and waits in that batch's collective for rank 1") in hangs["r0"].message
    # r1's b is ready on the follower, but the follower's next batch from its leader is r0's
    # extra pass of b, which it has no ready b for: the leader waits in that batch's collective.
    text = hangs["r1"].message
    assert ("b@1 holds every input but TP lockstep holds it: rank 1 runs rank 0's batches in "
            "order, and the next one, b for r0 (rank 0's batch 5), cannot run here (b is not "
            "ready for r0 on rank 1), so rank 0 waits in its collective") in text
    assert not any("never run" in v.message for v in hangs.values())
    assert (hangs["r1"].node, hangs["r1"].rank) == ("b", 1)
    assert signature(report.violations, sc) == ("liveness", "hang-lockstep")
