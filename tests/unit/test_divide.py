"""Placement: worker graphs per walk, as mstar's _divide_into_worker_graphs makes them."""

import pytest

from simharness.graph.derive import loop_back_pairs
from simharness.graph.ir import Loop, Parallel, iter_nodes
from simharness.placement import Layout
from simharness.scenario import load_scenario
from tests.helpers import build, node, raw_scenario


@pytest.fixture
def bagel_layout(bagel):
    return Layout.build(bagel)


def test_bagel_cfg_parallel_splits_into_five_worker_graphs(bagel_layout):
    wgs = bagel_layout.by_walk["image_gen_cfg"]
    shapes = [(tuple(wg.node_names), wg.ranks) for wg in wgs]
    # combine_cfg is not merged with LLM: the Parallel's last piece is LLM_cfg_img's group.
    assert shapes == [
        (("LLM",), (0,)), (("LLM_cfg_text",), (1,)), (("LLM_cfg_img",), (2,)),
        (("combine_cfg",), (0,)), (("vae_decoder",), (0,)),
    ]
    assert wgs[0].group == wgs[3].group  # same node group, sibling worker graphs on rank 0


def test_every_loop_copy_carries_the_whole_loop_back_set_but_only_its_outputs(bagel_layout):
    copies = [wg.section for wg in bagel_layout.by_walk["image_gen_cfg"][:4]]
    assert all(isinstance(c, Loop) and c.name == "denoise" for c in copies)
    assert all(len(loop_back_pairs(c)) == 8 for c in copies)
    # Only combine_cfg produces latents, so only its copy keeps latents -> vae_decoder.
    assert [len(c.outputs) for c in copies] == [0, 0, 0, 1]


def test_parallel_singletons_of_one_group_merge(scenarios_dir):
    lay = Layout.build(load_scenario(scenarios_dir / "bagel_cfg_2gpu.yaml"))
    wgs = lay.by_walk["image_gen_cfg"]
    assert len(wgs) == 4
    branch = wgs[1].section
    assert isinstance(branch, Loop) and isinstance(branch.body, Parallel)
    assert [n.name for n in iter_nodes(branch)] == ["LLM_cfg_text", "LLM_cfg_img"]


def _two_node_walk(groups):
    walk = {"sequential": [node("a", ["x"], [("y", "b")]), node("b", ["y"], [("o", "client")])]}
    raw = raw_scenario({"w": walk}, groups, requests={"r": {"walks": ["w"], "inputs": ["x"]}})
    return Layout.build(build(raw))


def test_merging_goes_by_group_index_not_rank():
    same_group = _two_node_walk([{"node_names": ["a", "b"], "ranks": [0]}])
    assert len(same_group.worker_graphs) == 1
    two_groups_one_rank = _two_node_walk([{"node_names": ["a"], "ranks": [0]},
                                          {"node_names": ["b"], "ranks": [0]}])
    assert [wg.ranks for wg in two_groups_one_rank.worker_graphs] == [(0,), (0,)]


def test_the_last_matching_group_wins_and_walk_scoped_groups_apply_to_their_walk():
    walk = node("a", ["x"], [("o", "client")])
    raw = raw_scenario(
        {"prefill": walk, "decode": walk},
        [{"node_names": ["a"], "ranks": [0]},
         {"node_names": ["a"], "ranks": [1], "graph_walks": ["decode"]}],
        requests={"r": {"walks": ["prefill", "decode"], "inputs": ["x"]}},
    )
    lay = Layout.build(build(raw))
    assert {wg.walk: wg.ranks for wg in lay.worker_graphs} == {"prefill": (0,), "decode": (1,)}


def test_replicas_are_chosen_per_request_per_group():
    walk = node("a", ["x"], [("o", "client")])
    raw = raw_scenario({"w": walk}, [{"node_names": ["a"], "ranks": [0, 1, 2]}],
                       requests={"r": {"walks": ["w"], "inputs": ["x"]}})
    lay = Layout.build(build(raw))
    assert lay.worker_graphs[0].instances == ((0,), (1,), (2,))
    picks = iter([2, 0])
    assert lay.assign(lambda n: next(picks)).wg_ranks == {"w#0": (2,)}
    assert lay.assign(lambda n: next(picks)).wg_ranks == {"w#0": (0,)}


def test_the_last_group_that_lists_a_node_for_the_walk_wins():
    from simharness.graph.divide import group_of_nodes

    groups = [(("a", "b"), None), (("b",), ("other",)), (("a", "c"), ("w",)), (("zz",), None)]
    got = group_of_nodes(["c", "b", "a", "d"], "w", groups)
    # a: groups 0 and 2 apply, 2 is last; b: group 1 is for another walk; d is in none; the
    # answer follows the node order given.
    assert got == {"c": 2, "b": 0, "a": 2}
    assert list(got) == ["c", "b", "a"]
