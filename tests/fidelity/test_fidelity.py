"""The model agrees with the real mstar graph code, and the comparison can tell when it does not.

For every shipped scenario and for generated layouts (`layouts.layout`), the ``mstar-python``
profile (our model) and the ``mstar`` adapter (mstar-ai's own ``WorkerGraphIO``, divided by
mstar's own ``_divide_into_worker_graphs`` where it imports) must agree on every forward count,
loop counter sequence, routed-edge multiset per completion and outcome (`agreement`).
``SIMHARNESS_FIDELITY_LAYOUTS`` sets how many layouts (default 600).
"""

from __future__ import annotations

import os

import pytest

from simharness.mstar import package
from simharness.mstar import placement as mstar_placement
from simharness.mstar.runtime import MstarRuntime
from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS
from tests.fidelity.agreement import disagreements
from tests.fidelity.layouts import layout
from tests.helpers import build, needs_mstar

pytestmark = needs_mstar()

N_LAYOUTS = int(os.environ.get("SIMHARNESS_FIDELITY_LAYOUTS", "600"))
SHIPPED = sorted(p.name for p in SCENARIOS.glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_scenario_agrees(name):
    sc = load_scenario(SCENARIOS / name)
    model = run_scenario(sc, "mstar-python")
    real = run_scenario(sc, "mstar-graph")
    assert disagreements(model, real) == []
    # Not only the same verdict: the very same trace.
    assert model.trace_digest == real.trace_digest


def test_generated_layouts_agree():
    assert N_LAYOUTS >= 1
    failed = []
    outcomes = {"pass": 0, "fail": 0}
    for seed in range(N_LAYOUTS):
        sc = build(layout(seed))
        model = run_scenario(sc, "mstar-python")
        real = run_scenario(sc, "mstar-graph")
        outcomes[model.outcome] += 1
        found = disagreements(model, real)
        if found:
            failed.append(f"layout seed {seed}:\n    " + "\n    ".join(found))
    assert failed == [], f"{len(failed)} of {N_LAYOUTS} layouts disagree:\n" + "\n".join(failed[:5])
    # The generator must exercise both clean runs and the hazards the two share.
    assert outcomes["pass"] > N_LAYOUTS // 2 and outcomes["fail"] > 0


def test_the_placement_is_mstar_s_own_where_it_imports():
    model_cls, why = package.mstar_divider()
    if model_cls is None:
        pytest.skip(f"mstar.model.base cannot be imported here ({why}); CI installs torch, "
                    f"triton, pyzmq and msgpack so that it can")
    rt = MstarRuntime()
    assert rt.placement == "mstar" and rt.notes == []
    # Every generated layout was divided by mstar the same way as by us (or the runs above
    # would have raised PlacementMismatch); check a few directly, loop sets included.
    from simharness.placement.layout import Layout
    for seed in range(50):
        lay = Layout.build(build(layout(seed)))
        assert set(mstar_placement.mstar_worker_graphs(lay, model_cls)) == {wg.id for wg in lay.worker_graphs}


@pytest.mark.parametrize(("wrong", "scenario"), [
    ("KeepsLoopBacks", "bagel_cfg.yaml"),
    ("ShortLoops", "bagel_cfg.yaml"),
])
def test_a_wrong_adapter_is_caught(wrong, scenario):
    sc = load_scenario(SCENARIOS / scenario)
    model = run_scenario(sc, "mstar-python")
    bad = run_scenario(sc, f"tests.fidelity.wrong:{wrong}")
    found = disagreements(model, bad)
    assert found, f"{wrong} was not caught"
    assert found[0].startswith("first trace divergence at event")


def test_a_wrong_adapter_is_caught_on_generated_layouts():
    caught = 0
    for seed in range(40):
        sc = build(layout(seed))
        if disagreements(run_scenario(sc, "mstar-python"),
                         run_scenario(sc, "tests.fidelity.wrong:ShortLoops")):
            caught += 1
    assert caught >= 20


def test_the_generated_layouts_catch_the_model_s_old_registry():
    """Without mstar's by-name registries our model disagrees with mstar on some of the layouts
    the suite runs (a loop named like a node); the suite found that, and still would."""
    for seed in range(N_LAYOUTS):
        sc = build(layout(seed))
        old = run_scenario(sc, "tests.fidelity.wrong:ModelWithDistinctEntities")
        if disagreements(old, run_scenario(sc, "mstar-graph")):
            return
    pytest.fail(f"none of {N_LAYOUTS} layouts told the old model from mstar")
