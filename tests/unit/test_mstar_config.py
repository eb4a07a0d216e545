"""``placement: {mstar_config: PATH}``: an mstar config file read as mstar writes it."""

from __future__ import annotations

import pytest
import yaml

from simharness.cli import main
from simharness.errors import ScenarioError
from simharness.scenario.loader import load_scenario
from tests.helpers import split_loop


def test_the_shipped_config_gives_the_same_placement_as_the_inline_one(scenarios_dir):
    inline = load_scenario(scenarios_dir / "bagel_cfg.yaml")
    from_config = load_scenario(scenarios_dir / "bagel_cfg_mstar_config.yaml")
    # The config also places vit_encoder and vae_encoder, nodes of walks bagel_cfg does not
    # model: kept as written, with a note each; the scenario's own placement may not name them.
    modelled = {n for g in inline.placement.node_groups for n in g.node_names}
    placed = [(tuple(n for n in g.node_names if n in modelled), g.ranks, g.graph_walks)
              for g in from_config.placement.node_groups]
    assert [p for p in placed if p[0]] == [(g.node_names, g.ranks, g.graph_walks)
                                           for g in inline.placement.node_groups]
    assert [n for n in from_config.notes if "to no walk this scenario models" in n] == [
        "mstar_configs/bagel_cfg_parallel.yaml: node_groups[0].node_names: node 'vit_encoder' belongs "
        "to no walk this scenario models, so it places nothing here",
        "mstar_configs/bagel_cfg_parallel.yaml: node_groups[1].node_names: node 'vae_encoder' belongs "
        "to no walk this scenario models, so it places nothing here"]
    assert from_config.placement.max_concurrent_requests == 16
    # The fingerprint covers what the config file said, not only its name.
    assert from_config.fingerprint != inline.fingerprint


def _write(tmp_path, config: dict, name: str = "cfg.yaml") -> object:
    (tmp_path / "configs").mkdir(exist_ok=True)
    (tmp_path / "configs" / name).write_text(yaml.safe_dump(config), encoding="utf-8")
    raw = split_loop()
    raw["placement"] = {"mstar_config": f"configs/{name}"}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


GROUPS = [{"node_names": ["A"], "ranks": [0]}, {"node_names": ["B", "C"], "ranks": [1]}]


def test_mstar_keys_are_read_and_the_others_ignored(tmp_path):
    path = _write(tmp_path, {"model": "toy", "max_seq_len": 4096, "resources": {"kv": {}},
                             "max_concurrent_requests": 3, "node_groups": GROUPS})
    sc = load_scenario(path)
    assert sc.placement.max_concurrent_requests == 3
    assert [g.node_names for g in sc.placement.node_groups] == [("A",), ("B", "C")]
    fp = sc.fingerprint
    _write(tmp_path, {"node_groups": GROUPS, "max_concurrent_requests": 4})
    assert load_scenario(path).fingerprint != fp


@pytest.mark.parametrize(("config", "key_path", "words"), [
    ({"model": "toy"}, "node_groups", "missing required key"),
    ({"node_groups": [{"node_names": ["A"], "ranks": ["zero"]}, GROUPS[1]]},
     "node_groups[0].ranks[0]", "expected an integer"),
    ({"node_groups": [GROUPS[0]]}, "node_groups", "node 'B' of walk 'w'"),
    ({"node_groups": GROUPS, "max_concurrent_requests": 0}, "max_concurrent_requests",
     "expected an integer >= 1"),
    ({"node_groups": [{"node_names": ["A"], "ranks": [0], "rank": 1}, GROUPS[1]]},
     "node_groups[0].rank", "unknown key"),
])
def test_errors_name_the_config_file_and_the_key_path(tmp_path, config, key_path, words):
    path = _write(tmp_path, config)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    err = exc.value
    assert err.source.endswith("cfg.yaml") and err.path == key_path and words in err.message
    assert str(err).startswith(f"{err.source}: {key_path}: ")


def test_a_missing_config_names_the_scenario_key(tmp_path, capsys):
    raw = split_loop()
    raw["placement"] = {"mstar_config": "nowhere.yaml"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"error: {path}: placement.mstar_config: mstar config file 'nowhere.yaml' "
                          f"not found")


def test_mstar_config_and_node_groups_do_not_mix(tmp_path):
    raw = split_loop()
    raw["placement"] = {"mstar_config": "x.yaml", "node_groups": GROUPS}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    assert exc.value.path == "placement.node_groups" and "unknown key" in exc.value.message
