"""The scenario-level reduction deletes what a failure does not need, and nothing it does."""

from __future__ import annotations

import yaml

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
