"""Node groups name only what the scenario models: a misspelt node is refused with the closest
names (it would otherwise leave the node where another group puts it: a false pass), an mstar
config's nodes of walks the scenario does not model are kept with a note, and a rank that ends
up hosting no node gets a note naming it."""

from __future__ import annotations

import pytest
import yaml

from simharness.cli import main
from simharness.errors import ScenarioError
from simharness.scenario.loader import load_scenario, parse_scenario
from tests.helpers import split_loop


def _parse(raw):
    return parse_scenario(raw, source="s.yaml", default_name="s")


def test_a_misspelt_node_in_a_group_is_refused_with_the_closest_names():
    raw = split_loop()
    raw["placement"]["node_groups"].append({"node_names": ["BB"], "ranks": [2]})
    with pytest.raises(ScenarioError) as err:
        _parse(raw)
    assert err.value.path == "placement.node_groups[2].node_names[0]"
    assert "unknown node 'BB'" in err.value.message and "did you mean 'B'?" in err.value.message


def test_the_issue_split_that_collapsed_onto_one_rank_is_refused(tmp_path, capsys):
    # The intended split loop, with the second group's node misspelt: before, rank 1 ran nothing
    # and a runtime with the loop-exit drift passed.
    raw = split_loop()
    raw["placement"]["node_groups"] = [{"node_names": ["A", "B", "C"], "ranks": [0]},
                                       {"node_names": ["Bx"], "ranks": [1]}]
    path = tmp_path / "split.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--runtime", "mstar-rust-prefix"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'Bx'" in err and "did you mean 'B'?" in err


def test_a_rank_that_hosts_no_node_gets_a_note():
    raw = split_loop()
    # rank 0's group lists A, which the later group takes: rank 0 runs nothing.
    raw["placement"]["node_groups"] = [{"node_names": ["A"], "ranks": [0]},
                                       {"node_names": ["A", "B", "C"], "ranks": [1]}]
    sc = _parse(raw)
    assert "rank 0 hosts no node of any walk: it runs nothing in this scenario" in sc.notes


def test_an_mstar_configs_nodes_of_other_walks_are_kept_with_a_note(tmp_path):
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump({"node_groups": [
        {"node_names": ["A", "vit_encoder"], "ranks": [0]}, {"node_names": ["B", "C"], "ranks": [1]}]}))
    raw = split_loop()
    raw["placement"] = {"mstar_config": "cfg.yaml"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    sc = load_scenario(tmp_path / "s.yaml")
    assert sc.placement.node_groups[0].node_names == ("A", "vit_encoder")
    assert ("cfg.yaml: node_groups[0].node_names: node 'vit_encoder' belongs to no walk this "
            "scenario models, so it places nothing here") in sc.notes


def test_a_rank_gap_names_the_rank_that_was_typed():
    raw = split_loop(ranks=(0, 3))
    with pytest.raises(ScenarioError) as err:
        _parse(raw)
    assert err.value.path == "placement.node_groups[1].ranks[0]"
    assert err.value.message.startswith("rank 3 leaves a gap") and "rank 1 is used by no group" in (
        err.value.message)
