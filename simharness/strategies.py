"""Public hypothesis strategies for simharness scenarios (a thin re-export of
`simharness.explore.strategies`).

Each yields plain data in the scenario schema, so ``parse_scenario(example)`` builds a
`Scenario` and ``yaml.safe_dump(example)`` is a file ``simharness run`` reads::

    from hypothesis import given
    from simharness import strategies as sst
    from simharness.scenario import parse_scenario

    @given(sst.scenarios(tolerated_only=True))
    def test_my_runtime(raw):
        report = run_scenario(parse_scenario(raw), "my.module:MyRuntime")
        ...

``scenarios(features=FAMILIES["streams"])`` restricts generation to one family of mechanisms
(streams, dynamic loops, TP instances, KV hand-off, ...); see docs/fuzzing.md.
"""

from simharness.explore.strategies import (
    FAMILIES,
    FEATURES,
    fault_lists,
    feature_sets,
    graphs,
    placements,
    scenarios,
    schedules,
    stop_loops_faults,
    walk_nodes,
    workloads,
)

__all__ = [
    "FAMILIES",
    "FEATURES",
    "fault_lists",
    "feature_sets",
    "graphs",
    "placements",
    "scenarios",
    "schedules",
    "stop_loops_faults",
    "walk_nodes",
    "workloads",
]
