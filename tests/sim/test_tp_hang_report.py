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
    hangs = [v for v in report.violations if v.check == "liveness"]
    assert len(hangs) == 1
    text = hangs[0].message
    # r1's b is ready on the follower, but the follower's next batch from its leader is r0's
    # extra pass of b, which it has no ready b for: the leader waits in that batch's collective.
    assert ("b@1 holds every input but TP lockstep holds it: rank 1 runs rank 0's batches in "
            "order, and the next one, b for r0 (rank 0's batch 5), cannot run here (b is not "
            "ready for r0 on rank 1), so rank 0 waits in its collective") in text
    assert "never run" not in text
    assert (hangs[0].request, hangs[0].node, hangs[0].rank) == ("r1", "b", 1)
    assert signature(report.violations, sc) == ("liveness", "hang-lockstep")
