"""Three behaviours mstar's own graph tests show, each run under our model and the real code.

* a loop member whose only inputs are streams (`gaps/streaming_loop_member.yaml`): mstar-ai
  0.2.1 lets it take one chunk per pass, so the request hangs after the first iteration, and
  `liveness` must say so;
* a conductor-seeded nested loop (`gaps/nested_loop_seed.yaml`, mstar's test_nested_loops): the
  inner loop's first `latents` comes from the walk's start, though a node after the inner loop
  sends it back for later outer iterations;
* a loop output the body never produces (`gaps/loop_output_unproduced.yaml`): mstar's `Loop`
  drops it; the scenario loads with a note naming it, and neither runtime emits it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simharness.errors import ScenarioError
from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.fidelity.agreement import disagreements
from tests.helpers import needs_mstar

GAPS = Path(__file__).parent / "gaps"
_MARKS = needs_mstar()


def _mstar(fn):
    for mark in _MARKS:
        fn = mark(fn)
    return fn


def both(name: str, overrides=()):
    sc = load_scenario(GAPS / name, overrides)
    model, real = run_scenario(sc, "mstar-python"), run_scenario(sc, "mstar-graph")
    assert disagreements(model, real) == []
    assert model.trace_digest == real.trace_digest
    return sc, model


@_mstar
def test_a_streaming_only_loop_member_hangs_as_in_mstar():
    _, model = both("streaming_loop_member.yaml")
    sink = [e for e in model.result.events if type(e).__name__ == "Forward" and e.node == "sink"]
    assert len(sink) == 1  # the first iteration only
    hangs = [v for v in model.violations if v.check == "liveness"]
    assert hangs and hangs[0].node == "sink" and "tok" in hangs[0].message
    # The missing input is a stream: the message names the partition that streams it.
    assert "waits for tok (from the stream from partition P)" in hangs[0].message


@_mstar
def test_the_old_streaming_readiness_is_told_from_mstar():
    sc = load_scenario(GAPS / "streaming_loop_member.yaml")
    old = run_scenario(sc, "tests.fidelity.wrong:ModelStreamingReadyEveryIteration")
    assert disagreements(old, run_scenario(sc, "mstar-graph"))


@_mstar
def test_a_conductor_seeded_nested_loop_runs_as_in_mstar():
    sc, model = both("nested_loop_seed.yaml")
    assert model.outcome == "pass"
    assert ("latents", "denoiser") in sc.walk_facts["refine"].seeds


@_mstar
def test_the_derived_seed_alone_also_starts_the_nested_loop():
    # Without the kind's {name: latents, to: denoiser} the derived seed does the same.
    _, model = both("nested_loop_seed.yaml", ["graph.requests.gen.inputs=[]"])
    assert model.outcome == "pass"


def test_a_walk_start_pair_no_node_can_take_is_refused():
    with pytest.raises(ScenarioError) as err:
        load_scenario(GAPS / "nested_loop_seed.yaml",
                      ["graph.requests.gen.inputs=[{name: noise, to: denoiser}]"])
    assert err.value.path == "graph.requests.gen.inputs[0]"
    assert "can never be taken: node 'denoiser' has no input 'noise'" in err.value.message


@_mstar
def test_a_loop_output_the_body_never_produces_is_dropped_with_a_note():
    sc, model = both("loop_output_unproduced.yaml")
    assert model.outcome == "pass"
    assert any("'debug'" in n or "debug that no node" in n for n in sc.notes)
    emitted = [e for e in model.result.events if type(e).__name__ == "Emitted"]
    assert emitted and {e.signal.name for e in emitted} == {"image"}
