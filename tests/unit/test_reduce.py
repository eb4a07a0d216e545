"""The scenario-level reduction deletes what a failure does not need, and nothing it does."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import yaml

from simharness.explore import reduce as reduce_module
from simharness.explore.execute import execute
from simharness.explore.reduce import reduce_scenario

# What Hypothesis's shrink left of a loop-exit drift found in a campaign: the drift lives in
# walk w1 (e on rank 0, f on rank 1); walk w0, drawn first, is not needed but stayed.
TWO_WALKS = yaml.safe_load("""
name: fuzz
seed: 0
graph:
  walks:
    w0:
      sequential:
      - {node: a, inputs: [in0], outputs: [{name: y_a, to: b}]}
      - loop:
          name: L1
          max_iters: 1
          body:
            sequential:
            - {node: b, inputs: [s1, y_a], outputs: [{name: y_b, to: c}]}
            - {node: c, inputs: [y_b], outputs: [{name: y_c, to: d}]}
            - {node: d, inputs: [y_c], outputs: [{name: s1, to: b}]}
          outputs: [{name: s1, to: client}, {name: s1, to: conductor}]
    w1:
      loop:
        name: L2
        max_iters: 1
        body:
          sequential:
          - {node: e, inputs: [s2, in1], outputs: [{name: y_e, to: f}]}
          - {node: f, inputs: [y_e], outputs: [{name: s2, to: e}]}
        outputs: [{name: s2, to: client}]
  requests:
    k0: {walks: [w0, w1], inputs: [in0, in1]}
placement:
  node_groups:
  - {node_names: [a, b, c, d, e], ranks: [0]}
  - {node_names: [f], ranks: [1]}
workload:
- {request: k0, count: 3, concurrency: 2}
limits: {request_timeout_s: 60.0}
""")


def _fails_as(sig):
    def still(raw):
        o = execute(raw, "mstar-rust-prefix")
        return o.status == "fail" and o.signature == sig
    return still


def test_the_walk_the_failure_does_not_need_is_deleted():
    still = _fails_as("loop_exit:peer")
    assert still(TWO_WALKS)
    small, calls = reduce_scenario(TWO_WALKS, still)
    assert list(small["graph"]["walks"]) == ["w1"]
    assert small["graph"]["requests"]["k0"] == {"walks": ["w1"], "inputs": ["in1"]}
    assert [g["node_names"] for g in small["placement"]["node_groups"]] == [["e"], ["f"]]
    assert small["workload"] == [{"request": "k0", "count": 1, "concurrency": 1}]
    assert still(small) and 0 < calls < 50
    o = execute(small, "mstar-rust-prefix")
    assert (o.nodes, o.ranks) == (2, 2)


def test_nothing_the_failure_needs_is_deleted():
    # Under a runtime that passes, no deletion "still fails": the scenario comes back unchanged.
    small, calls = reduce_scenario(TWO_WALKS, lambda raw: False)
    assert small == TWO_WALKS and calls > 0
    assert reduce_scenario(TWO_WALKS, lambda raw: True, max_calls=0) == (TWO_WALKS, 0)


# Every kind of deletion `reduce_scenario` tries has something to act on here: two walks, two
# kinds, two workload phases with counts above 1, a group of two ranks, faults on ranks, schedule
# perturbations and an admission cap. The predicates below read the plain data only.
def _everything():
    """A fresh copy each call, so that no test sees what another one did to its scenario."""
    raw = copy.deepcopy(TWO_WALKS)
    raw["graph"]["requests"]["k1"] = {"walks": ["w1"], "inputs": ["in1"]}
    raw["placement"] = {
        "node_groups": [{"node_names": ["a", "b", "c", "d"], "ranks": [0]},
                        {"node_names": ["e"], "ranks": [1, 2]},
                        {"node_names": ["f"], "ranks": [3]}],
        "max_concurrent_requests": 4,
    }
    raw["workload"] = [{"request": "k0", "count": 3, "concurrency": 2},
                       {"request": "k1", "count": 2, "concurrency": 2}]
    raw["faults"] = [{"kind": "crash", "rank": 2, "at_ms": 1.0},
                     {"kind": "delay", "message": "input_signals", "from": 3, "to": 0,
                      "delay_ms": 1.0}]
    raw["schedule"] = {"service_jitter": 0.1, "shuffle_ties": True}
    return raw


def _size(raw):
    """What the reduction deletes, counted: nodes, kinds, phases, ranks, faults, optional blocks."""
    groups = raw["placement"]["node_groups"]
    return (len(_nodes(raw)) + len(raw["graph"]["requests"]) + len(raw["workload"])
            + sum(p.get("count", 1) + p.get("concurrency", 1) for p in raw["workload"])
            + sum(len(g["ranks"]) for g in groups) + len(raw.get("faults", []))
            + ("schedule" in raw) + ("max_concurrent_requests" in raw["placement"]))


def _nodes(raw):
    """The node names a scenario's walks hold, wherever they sit in the trees."""
    found, todo = set(), [raw["graph"]["walks"]]
    while todo:
        tree = todo.pop()
        if isinstance(tree, dict):
            if isinstance(tree.get("node"), str):
                found.add(tree["node"])
            todo.extend(tree.values())
        elif isinstance(tree, list):
            todo.extend(tree)
    return found


def _keeps_e_and_f(raw):
    return {"e", "f"} <= _nodes(raw)


def test_a_plain_predicate_reduces_to_a_smaller_scenario_that_still_satisfies_it():
    raw = _everything()
    small, calls = reduce_scenario(raw, _keeps_e_and_f)
    assert _keeps_e_and_f(small) and _size(small) < _size(raw) and calls > 0
    assert _nodes(small) == {"e", "f"}  # the only nodes the predicate needs
    assert list(small["graph"]["walks"]) == ["w1"]
    assert len(small["graph"]["requests"]) == 1 and len(small["workload"]) == 1
    assert "faults" not in small and "schedule" not in small
    assert "max_concurrent_requests" not in small["placement"]
    # A fixpoint: no single deletion the reduction knows keeps the predicate true.
    again, _ = reduce_scenario(small, _keeps_e_and_f)
    assert again == small


def test_the_call_budget_is_exact_and_the_count_returned_is_the_calls_made():
    seen = []

    def accept(raw):
        seen.append(copy.deepcopy(raw))
        return True

    raw = _everything()
    small, calls = reduce_scenario(raw, accept, max_calls=3)
    assert calls == len(seen) == 3
    assert small == seen[-1]  # every call kept its candidate, so the last one is the result
    _, unbounded = reduce_scenario(raw, accept)
    assert unbounded > 3  # the budget, not a lack of candidates, stopped the first reduction
    seen.clear()
    assert reduce_scenario(raw, lambda c: seen.append(1) or False)[1] == len(seen)


def test_the_deadline_is_checked_before_every_call(monkeypatch):
    # A fake clock (the reduce module's alone) that one call advances by one second: a deadline
    # 3 seconds away allows exactly 3 calls, each made before the deadline.
    clock = [100.0]
    monkeypatch.setattr(reduce_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    started = []

    def slow_accept(raw):
        assert clock[0] < 103.0
        started.append(clock[0])
        clock[0] += 1.0
        return True

    raw = _everything()
    _, calls = reduce_scenario(raw, slow_accept, deadline=103.0)
    assert calls == len(started) == 3
    # A deadline already passed: no call, the input itself comes back.
    got, calls = reduce_scenario(raw, slow_accept, deadline=clock[0])
    assert got is raw and calls == 0 and len(started) == 3


def test_the_input_is_never_changed_even_by_a_predicate_that_scribbles_on_its_candidates():
    def scribble(raw):
        # Every container a candidate holds, at any depth, gets written to: a candidate sharing
        # any of them with the input (a shallow copy somewhere) would show here.
        containers, todo = [], [raw]
        while todo:
            tree = todo.pop()
            if isinstance(tree, dict | list):
                containers.append(tree)
                todo.extend(tree.values() if isinstance(tree, dict) else tree)
        for tree in containers:
            if isinstance(tree, dict):
                tree["scribbled"] = True
            else:
                tree.append("scribbled")
        return False

    for predicate in (scribble, lambda c: True, _keeps_e_and_f):
        raw = _everything()
        reduce_scenario(raw, predicate)
        assert raw == _everything()
