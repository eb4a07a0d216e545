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
"""

from simharness.explore.strategies import (
    FEATURES,
    fault_lists,
    feature_sets,
    graphs,
    placements,
    scenarios,
    schedules,
    walk_nodes,
    workloads,
)

__all__ = [
    "FEATURES",
    "fault_lists",
    "feature_sets",
    "graphs",
    "placements",
    "scenarios",
    "schedules",
    "walk_nodes",
    "workloads",
]
