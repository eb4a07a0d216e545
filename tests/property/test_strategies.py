"""The public strategies generate scenarios the loader accepts and mstar could meet; perturbed
runs replay bit for bit; correct runtimes never show the prefix-only drift."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from simharness import strategies as sst
from simharness.explore.execute import execute
from simharness.run import simulate
from simharness.scenario import parse_scenario

#: Real gaps of mstar's runtimes that generated layouts reach (see docs/fuzzing.md and the open
#: corpus cases): loop registries (hangs), producer_done racing the last streamed item (Q7), a
#: STOP_LOOPS that reaches a peer before its walk began, a TP follower's late conductor REMOVE,
#: Q7 again on a TP follower of a stream's consumer (streams:finals, streams:passes).
KNOWN_GAPS = {"liveness:hang-reinjection", "liveness:hang-seed", "liveness:hang-edge",
              "liveness:hang-input", "liveness:hang-loop-back", "forwards:counters",
              "forwards:extra-after-loop", "drain:dropped", "drain:held-at-teardown",
              "streams:finals", "streams:passes"}


@settings(max_examples=40)
@given(sst.scenarios())
def test_every_generated_scenario_is_valid(raw):
    sc = parse_scenario(copy.deepcopy(raw))
    assert sc.placement.num_ranks <= 8
    ranks = sorted({r for g in sc.placement.node_groups for r in g.ranks})
    assert ranks == list(range(len(ranks)))


@settings(max_examples=40)
@given(sst.scenarios(tolerated_only=True))
def test_correct_runtimes_show_no_drift_and_only_known_gaps(raw):
    for runtime in ("mstar-python", "mstar-rust"):
        o = execute(raw, runtime)
        assert o.status in ("pass", "fail"), o.error
        if o.failed:
            # (check:kind: a signature may name the mechanism after them)
            assert ":".join(o.signature.split(":")[:2]) in KNOWN_GAPS, (o.signature, o.messages)


@settings(max_examples=15)
@given(sst.scenarios(features=frozenset({"loops", "multi_member_loops", "multi_rank", "parallel",
                                         "schedule", "faults", "concurrency"})))
def test_a_perturbed_run_replays_bit_for_bit(raw):
    sc = parse_scenario(copy.deepcopy(raw))
    first = simulate(sc, "mstar-rust-prefix")[0].recorder.digest()
    again = simulate(parse_scenario(copy.deepcopy(raw)), "mstar-rust-prefix")[0]
    assert again.recorder.digest() == first


@settings(max_examples=40)
@given(st.sampled_from(sorted(sst.FAMILIES)).flatmap(
    lambda family: sst.scenarios(features=sst.FAMILIES[family])))
def test_every_family_generates_valid_scenarios(raw):
    sc = parse_scenario(copy.deepcopy(raw))
    for g in sc.placement.node_groups:
        # TP instances are aligned blocks: two instances share all their ranks or none
        for other in sc.placement.node_groups:
            for a in g.instances:
                for b in other.instances:
                    assert set(a) == set(b) or not set(a) & set(b) or len(a) == 1 or len(b) == 1


@settings(max_examples=20)
@given(sst.graphs())
def test_graphs_alone_are_usable_with_a_trivial_placement(graph):
    names = sorted({n for ns in sst.walk_nodes(graph).values() for n in ns})
    kind = next(iter(graph["requests"]))
    raw = {"graph": graph, "placement": {"node_groups": [{"node_names": names, "ranks": [0]}]},
           "workload": [{"request": kind, "count": 1}]}
    parse_scenario(raw)


def _body_nodes(section):
    if "node" in section:
        return [section]
    if "loop" in section:
        return _body_nodes(section["loop"]["body"])
    return [n for part in section.get("sequential", section.get("parallel", []))
            for n in _body_nodes(part)]


def _dynamic_loops(section):
    if "loop" in section:
        lp = section["loop"]
        return ([lp] if "stop" in lp else []) + _dynamic_loops(lp["body"])
    return [lp for part in section.get("sequential", section.get("parallel", []))
            for lp in _dynamic_loops(part)]


@settings(max_examples=60)
@given(sst.graphs(features=frozenset({"loops", "multi_member_loops", "parallel", "dynamic_loops"})))
def test_a_dynamic_loop_s_state_is_read_first_by_the_one_node_that_stops_it(graph):
    # A second first reader in another loop copy can finish the iteration before the stopper's
    # STOP_LOOPS arrives; its copy advances and hangs waiting for a loop-back the stopped copies
    # filtered. mstar does that too, on a shape no model has (test_dynamic_stop_race.py).
    for walk in graph["walks"].values():
        for lp in _dynamic_loops(walk):
            body = lp["body"]
            comb = body if "node" in body else body["sequential"][-1]
            names = {n["node"] for n in _body_nodes(body)}
            readers = {e["to"] for e in comb["outputs"] if e["to"] in names} - {comb["node"]}
            assert readers <= set(lp["stop"]["by"]) and len(readers) <= 1, \
                (lp["name"], readers, lp["stop"])
