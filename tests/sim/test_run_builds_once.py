"""What one run builds once and shares: the layout of its worker graphs, for the simulation and
for the checks that route what they see by worker graph (tp_agreement, streams)."""

from __future__ import annotations

from simharness.placement.layout import Layout
from simharness.run import simulate
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS


def test_a_run_with_streams_and_tp_builds_its_layout_once(monkeypatch):
    built = []
    build = Layout.build.__func__

    def counting(cls, scenario):
        built.append(scenario.name)
        return build(cls, scenario)

    monkeypatch.setattr(Layout, "build", classmethod(counting))
    sc = load_scenario(SCENARIOS / "orpheus_tp2.yaml")  # a TP instance and streams
    assert sc.connections and any(g.instance_size > 1 for g in sc.placement.node_groups)
    result, violations = simulate(sc, "mstar-python", keep_trace=False)
    assert violations == [] and len(result.outcomes) > 1
    assert built == [sc.name]
