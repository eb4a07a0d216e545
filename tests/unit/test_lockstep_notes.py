"""A placement that puts several lockstep-parallel nodes on one rank is run, with a note saying
that mstar's worker would refuse it ("at most one lockstep-parallel node per worker")."""

from __future__ import annotations

import copy

from simharness.scenario import load_scenario, parse_scenario
from tests.conftest import SCENARIOS

RAW = {
    "graph": {"walks": {"w0": {"sequential": [
        {"node": "a", "inputs": ["in0"], "outputs": [{"name": "y_a", "to": "b"}]},
        {"node": "b", "inputs": ["y_a"], "outputs": [{"name": "y_b", "to": "client"}]},
    ]}}, "requests": {"k0": {"walks": ["w0"], "inputs": ["in0"]}}},
    "placement": {"node_groups": [{"node_names": ["a", "b"], "ranks": [0, 1], "tp_size": 2}]},
    "workload": [{"request": "k0", "count": 1}],
}


def _lockstep_notes(sc):
    return [n for n in sc.notes if "lockstep-parallel" in n]


def test_two_lockstep_nodes_on_a_rank_get_one_note_naming_the_ranks_and_nodes():
    (note,) = _lockstep_notes(parse_scenario(copy.deepcopy(RAW)))
    assert note.startswith("placement: ranks 0, 1 run 2 lockstep-parallel nodes (a, b)")
    assert "refuses this placement" in note


def test_one_lockstep_node_per_rank_gets_none():
    raw = copy.deepcopy(RAW)
    raw["placement"]["node_groups"] = [{"node_names": ["a"], "ranks": [0, 1], "tp_size": 2},
                                       {"node_names": ["b"], "ranks": [0]}]
    assert _lockstep_notes(parse_scenario(raw)) == []


def test_the_shipped_scenarios_that_mstar_would_refuse_say_so():
    noted = {p.stem for p in SCENARIOS.glob("*.yaml") if _lockstep_notes(load_scenario(p))}
    assert noted == {"bagel_cfg_tp2"}
