"""A placement that gives a rank more than one lockstep-parallel node is refused at load, as
mstar's worker refuses it at start-up ("at most one lockstep-parallel node per worker",
``worker/worker.py``), naming the group that brings the rank its second such node."""

from __future__ import annotations

import copy

import pytest

from simharness.errors import ScenarioError
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


def _with_groups(*groups):
    raw = copy.deepcopy(RAW)
    raw["placement"]["node_groups"] = list(groups)
    return raw


def test_two_lockstep_nodes_in_one_group_are_refused_at_the_group():
    with pytest.raises(ScenarioError) as err:
        parse_scenario(copy.deepcopy(RAW))
    assert err.value.path == "placement.node_groups[0]"
    assert "rank 0 would run two lockstep-parallel nodes: 'a' (from this group) and 'b'" in str(err.value)


def test_the_group_that_brings_the_second_node_is_named_with_the_first():
    raw = _with_groups({"node_names": ["a"], "ranks": [0, 1], "tp_size": 2},
                       {"node_names": ["b"], "ranks": [2, 3, 0, 1], "tp_size": 2})
    with pytest.raises(ScenarioError) as err:
        parse_scenario(raw)
    assert err.value.path == "placement.node_groups[1]"
    assert "'a' (from placement.node_groups[0]) and 'b'" in str(err.value)


def test_one_lockstep_node_per_rank_is_accepted():
    parse_scenario(_with_groups({"node_names": ["a"], "ranks": [0, 1], "tp_size": 2},
                                {"node_names": ["b"], "ranks": [0]}))
    # beside another instance on other ranks, and a plain node on a lockstep rank
    parse_scenario(_with_groups({"node_names": ["a"], "ranks": [0, 1], "tp_size": 2},
                                {"node_names": ["b"], "ranks": [2, 3], "tp_size": 2}))


def test_one_node_in_two_walks_is_one_node():
    """The worker counts node names: a node that two lockstep groups place in two walks on the
    same ranks is one lockstep-parallel node there."""
    raw = copy.deepcopy(RAW)
    raw["graph"]["walks"]["w1"] = {"node": "a", "inputs": ["in1"],
                                   "outputs": [{"name": "z", "to": "client"}]}
    raw["graph"]["requests"]["k0"] = {"walks": ["w0", "w1"], "inputs": ["in0", "in1"]}
    raw["placement"]["node_groups"] = [
        {"node_names": ["a"], "ranks": [0, 1], "tp_size": 2, "graph_walks": ["w0"]},
        {"node_names": ["a"], "ranks": [0, 1], "tp_size": 2, "graph_walks": ["w1"]},
        {"node_names": ["b"], "ranks": [2]}]
    parse_scenario(raw)


def test_no_shipped_scenario_or_corpus_case_gives_a_rank_two_lockstep_nodes():
    for path in [*SCENARIOS.glob("*.yaml"), *SCENARIOS.glob("corpus/*.yaml")]:
        load_scenario(path)  # the loader refuses such a placement with a ScenarioError
