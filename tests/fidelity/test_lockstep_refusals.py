"""The loader refuses exactly the lockstep groups that mstar's own conductor refuses at start-up,
and the placements its workers refuse (more than one lockstep-parallel node on a worker).

The oracle is mstar-ai's ``Conductor.__init__`` itself, run on mstar's own worker graphs
(``Model.get_worker_graphs``, which divides every walk with mstar's code) and sharding config
(``Model.get_sharding_config``), read from a config file written from the scenario's
placement. Its checks come before anything is started: the test stops it at the next step (the
pick of a port for NCCL), so a layout it gets that far with is one mstar accepts. For the
workers' check it runs on to the launch of the workers, and each worker's check is asked of
what the conductor would hand it (`worker_refusal`).

A fuzz campaign found both refusals as failures the loader let through (`streams:passes` on a
walk-scoped TP group with a streaming consumer, and the corpus' `streams-order-across-ranks`
cases, whose first group claimed a node another group placed): findings about layouts that never
run in mstar.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from simharness import strategies as sst
from simharness.errors import ScenarioError
from simharness.scenario import load_scenario, parse_scenario
from tests.conftest import SCENARIOS
from tests.helpers import needs_mstar

pytestmark = needs_mstar()


class _Accepted(Exception):
    """mstar's conductor got past its placement checks."""


def _conductor_module() -> Any:
    try:
        import mstar.conductor.conductor as conductor
        import mstar.model.base  # noqa: F401  (the worker-graph division)
    except Exception as exc:  # torch or another dependency of the conductor is missing
        pytest.skip(f"mstar's conductor does not import here ({type(exc).__name__}: {exc})")
    return conductor


def conductor_refusal(raw: dict[str, Any], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """What mstar's Conductor raises at start-up for `raw`'s placement; None if it accepts it."""
    return _start_up(raw, tmp, monkeypatch, workers=False)


def worker_refusal(raw: dict[str, Any], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """What mstar refuses of `raw`'s placement at start-up, its workers' check included: the
    conductor runs on to the point where it would launch them, and each worker's check is asked
    of what the conductor would hand that worker (its worker graphs and its parallel groups,
    made by mstar's own code)."""
    return _start_up(raw, tmp, monkeypatch, workers=True)


def _worker_check(worker_id: str, worker_graphs: list[Any], parallel_groups: Any) -> None:
    """The check at the top of mstar-ai's ``Worker.__init__`` (worker/worker.py, after
    "v1: disallow multiple lockstep-scheduled nodes in the same worker"), on the conductor's
    own objects: the worker's node names over all its worker graphs, and those whose lockstep
    instance spans more than one rank. (``Worker.__init__`` itself starts a process group and
    sockets before it gets there.)"""
    node_names = set()
    for wg in worker_graphs:
        node_names.update(wg.section.get_nodes())
    parallel = {n for n in node_names if parallel_groups.get_instance_world_size_for_node(n) > 1}
    if len(parallel) > 1:
        raise NotImplementedError(f"Multiple parallel nodes {parallel} found in worker {worker_id}; "
                                  f"at most one lockstep-parallel node per worker")


def _start_up(raw: dict[str, Any], tmp: Path, monkeypatch: pytest.MonkeyPatch, workers: bool
              ) -> str | None:
    from mstar.distributed.base import ShardingConfig
    from mstar.model.base import Model

    from simharness.mstar.convert import to_mstar
    from simharness.mstar.package import graph_module
    from simharness.mstar.placement import _ModelShape
    from simharness.placement.layout import Layout
    from simharness.scenario import sections

    conductor = _conductor_module()
    with monkeypatch.context() as m:  # our own refusal off, to hand mstar what we would refuse
        m.setattr(sections, "check_lockstep_groups", lambda *a: None)
        sc = parse_scenario(copy.deepcopy(raw))
    g = graph_module()
    names = {n for wf in sc.walk_facts.values() for n in wf.nodes}

    class ScenarioModel(_ModelShape):
        """The scenario as an mstar Model: every node may run TP or SP (the scenario says so)."""

        get_worker_graphs = Model.get_worker_graphs
        get_sharding_config = Model.get_sharding_config
        _get_worker_graphs_for_graph_walk = Model._get_worker_graphs_for_graph_walk

        def get_graph_walk_graphs(self) -> dict[str, Any]:
            return {w: to_mstar(root, g) for w, root in sc.walks.items()}

        def get_default_sharding_config(self) -> Any:
            return ShardingConfig(groups=[], tp_enabled_nodes=set(names), shard_dim={},
                                  sp_enabled_nodes=set(names))

    groups = [{"node_names": list(ng.node_names), "ranks": list(ng.ranks), "tp_size": ng.tp_size,
               "sp_size": ng.sp_size,
               **({} if ng.graph_walks is None else {"graph_walks": list(ng.graph_walks)})}
              for ng in sc.placement.node_groups]
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump({"max_seq_len": 1, "node_groups": groups}))

    def stop() -> int:
        raise _Accepted

    def launch(self: Any) -> None:
        for worker_id in self.worker_ids:
            _worker_check(worker_id, self._per_worker_graphs[worker_id],
                          self.parallel_config.per_worker_config[worker_id])
        raise _Accepted

    with monkeypatch.context() as m:
        if workers:
            m.setattr(conductor, "_pick_free_tcp_port", lambda: 29500)
            m.setattr(conductor.Conductor, "_launch_workers", launch)
        else:
            m.setattr(conductor, "_pick_free_tcp_port", stop)
        try:
            conductor.Conductor(ScenarioModel(Layout.build(sc)), str(cfg),
                                socket_path_prefix=str(tmp / "sockets"))
        except _Accepted:
            return None
        except (RuntimeError, AssertionError, NotImplementedError) as exc:
            return str(exc)
    raise AssertionError("mstar's conductor returned from __init__ without reaching its stop")


def our_refusal(raw: dict[str, Any]) -> str | None:
    try:
        parse_scenario(copy.deepcopy(raw))
    except ScenarioError as err:
        return str(err)
    return None


def _streamed_tp_consumer(walk_scoped: bool) -> dict[str, Any]:
    """The shape of the fuzz campaign's `streams:passes`: a stream's consumer b in a TP group."""
    group: dict[str, Any] = {"node_names": ["b"], "ranks": [0, 1], "tp_size": 2}
    if walk_scoped:
        group["graph_walks"] = ["c"]
    return {
        "graph": {
            "walks": {
                "w0": {"node": "a", "inputs": ["in0"],
                       "outputs": [{"name": "y_a", "to": "client"},
                                   {"name": "st", "to": "b", "stream": True}]},
                "c": {"node": "b", "inputs": ["st"], "outputs": [{"name": "y_b", "to": "client"}]},
            },
            "requests": {"k0": {"partitions": {"main": ["w0"],
                                               "sink": [{"walk": "c", "until": "final_chunk"}]},
                                "inputs": ["in0"]}},
            "partitions": {"main": ["w0"], "sink": ["c"]},
            "streams": [{"from": "main", "to": "sink", "edge": "st",
                         "policy": {"sliding_window": {"window": 1, "stride": 1}}}],
        },
        "placement": {"node_groups": [{"node_names": ["a", "b"], "ranks": [1]}, group]},
        "workload": [{"request": "k0", "count": 2, "concurrency": 2}],
    }


def _claimed_elsewhere(claims: bool) -> dict[str, Any]:
    """The corpus' old `streams-order-across-ranks` placement, reduced: a TP group lists c, and
    a later group places c in walk w1."""
    first = {"node_names": ["a", "c"] if claims else ["a"], "ranks": [0, 1], "tp_size": 2}
    return {
        "graph": {"walks": {"w0": {"node": "a", "inputs": ["in0"],
                                   "outputs": [{"name": "y_a", "to": "client"}]},
                            "w1": {"node": "c", "inputs": ["in1"],
                                   "outputs": [{"name": "y_c", "to": "client"}]}},
                  "requests": {"k0": {"walks": ["w0", "w1"], "inputs": ["in0", "in1"]}}},
        "placement": {"node_groups": [first, {"node_names": ["c"], "ranks": [1],
                                              "graph_walks": ["w1"]}]},
        "workload": [{"request": "k0", "count": 1}],
    }


@pytest.mark.parametrize(("raw", "words"), [
    (_streamed_tp_consumer(True), ("streaming consumer", "custom graph walk")),
    (_claimed_elsewhere(True), ("tp_size", "sharding group")),
])
def test_what_mstar_refuses_the_loader_refuses(raw, words, tmp_path, monkeypatch):
    theirs = conductor_refusal(raw, tmp_path, monkeypatch)
    assert theirs is not None and any(w in theirs for w in words), theirs
    ours = our_refusal(raw)
    assert ours is not None and "mstar's conductor refuses" in ours


@pytest.mark.parametrize("raw", [_streamed_tp_consumer(False), _claimed_elsewhere(False)])
def test_the_same_layouts_mended_are_accepted_by_both(raw, tmp_path, monkeypatch):
    assert conductor_refusal(raw, tmp_path, monkeypatch) is None
    assert our_refusal(raw) is None


def _two_nodes(*groups: dict[str, Any], second_walk: bool = False) -> dict[str, Any]:
    """a then b in walk w0 (and a alone in w1 when `second_walk`), placed by `groups`."""
    walks: dict[str, Any] = {"w0": {"sequential": [
        {"node": "a", "inputs": ["in0"], "outputs": [{"name": "y_a", "to": "b"}]},
        {"node": "b", "inputs": ["y_a"], "outputs": [{"name": "y_b", "to": "client"}]}]}}
    inputs = ["in0"]
    if second_walk:
        walks["w1"] = {"node": "a", "inputs": ["in1"], "outputs": [{"name": "z", "to": "client"}]}
        inputs.append("in1")
    return {"graph": {"walks": walks, "requests": {"k0": {"walks": sorted(walks), "inputs": inputs}}},
            "placement": {"node_groups": list(groups)}, "workload": [{"request": "k0", "count": 1}]}


_TP_A = {"node_names": ["a"], "ranks": [0, 1], "tp_size": 2}


@pytest.mark.parametrize(("raw", "refused"), [
    (_two_nodes({"node_names": ["a", "b"], "ranks": [0, 1], "tp_size": 2}), True),
    (_two_nodes(_TP_A, {"node_names": ["b"], "ranks": [0, 1], "tp_size": 2}), True),
    (_two_nodes(_TP_A, {"node_names": ["b"], "ranks": [2, 3, 0, 1], "tp_size": 2}), True),
    (_two_nodes(_TP_A, {"node_names": ["b"], "ranks": [0, 1, 2, 3], "sp_size": 2, "tp_size": 2}), True),
    (_two_nodes(_TP_A, {"node_names": ["b"], "ranks": [0]}), False),
    (_two_nodes(_TP_A, {"node_names": ["b"], "ranks": [2, 3], "tp_size": 2}), False),
    (_two_nodes({**_TP_A, "graph_walks": ["w0"]}, {**_TP_A, "graph_walks": ["w1"]},
                {"node_names": ["b"], "ranks": [2]}, second_walk=True), False),
])
def test_what_mstar_s_workers_refuse_the_loader_refuses(raw, refused, tmp_path, monkeypatch):
    theirs = worker_refusal(raw, tmp_path, monkeypatch)
    ours = our_refusal(raw)
    assert (theirs is not None) == refused, theirs
    assert (ours is not None) == refused, ours
    if refused:
        assert "lockstep-parallel node per worker" in theirs
        assert "mstar's worker allows at most one lockstep-parallel node per worker" in ours


@pytest.mark.parametrize("path", sorted([*SCENARIOS.glob("*.yaml"), *SCENARIOS.glob("corpus/*.yaml")]),
                         ids=lambda p: p.stem)
def test_every_shipped_scenario_and_corpus_case_is_one_mstar_accepts(path, tmp_path, monkeypatch):
    sc = load_scenario(path)
    if any(g.instance_size > 1 for g in sc.placement.node_groups):
        assert worker_refusal(sc.raw, tmp_path, monkeypatch) is None


@st.composite
def _with_an_extra_group(draw: Any) -> dict[str, Any]:
    """A generated TP scenario (accepted by construction), with one more node group drawn
    freely: lockstep or not, scoped to a walk or not, listing any of the nodes, anywhere in the
    list; most such layouts mstar refuses, some it accepts."""
    raw = draw(sst.scenarios(features=frozenset(sst.FAMILIES["tp"] | {"streams", "walk_scoped"})))
    walks = sst.walk_nodes(raw["graph"])
    names = sorted({n for ns in walks.values() for n in ns})
    groups = raw["placement"]["node_groups"]
    ranks = sorted({r for grp in groups for r in grp["ranks"]})
    extra: dict[str, Any] = {"node_names": draw(st.lists(st.sampled_from(names), min_size=1,
                                                         max_size=3, unique=True))}
    if len(ranks) >= 2 and draw(st.booleans()):
        extra.update(ranks=ranks[:2], tp_size=2)
    else:
        extra["ranks"] = [draw(st.sampled_from(ranks))]
    if draw(st.booleans()):
        extra["graph_walks"] = [draw(st.sampled_from(sorted(walks)))]
    groups.insert(draw(st.integers(0, len(groups))), extra)
    return raw


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(_with_an_extra_group())
def test_generated_placements_are_refused_by_both_or_by_neither(tmp_path, monkeypatch, raw):
    ours = our_refusal(raw)
    if ours is not None and not any(w in ours for w in ("mstar's conductor refuses",
                                                         "mstar's worker allows")):
        event("refused for another reason")
        return  # refused for another reason first (a node left unplaced, say): not this check's
    theirs = worker_refusal(raw, tmp_path, monkeypatch)
    event("accepted" if ours is None else "refused")
    assert (ours is None) == (theirs is None), (ours, theirs)
