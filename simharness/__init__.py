"""simharness: deterministic simulation and testing of distributed graph-runtime layouts.

The Python API (docs/python.md)::

    import simharness

    scenario = simharness.load_scenario("scenarios/bagel_cfg.yaml")   # a file, or a mapping
    result = simharness.run_scenario(scenario, "mstar-rust-prefix", seed=0)
    print(result.outcome, result.trace_digest)
    for v in result.violations:
        print(v.check, v.message)

`load_scenario` and `run_scenario` are imported on first use, so ``import simharness`` stays
light (the command line's start-up depends on it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # the types only: importing them at run time would load the engine
    from simharness.run import RunReport
    from simharness.scenario.model import Scenario


def load_scenario(source: str | Path | Mapping[str, Any], *, name: str | None = None) -> Scenario:
    """A validated, frozen scenario from a YAML file (a path) or from plain data (a mapping
    shaped as the file would be, docs/scenarios.md). Bad input raises
    `simharness.errors.ScenarioError`, naming the key path and what was expected."""
    import copy

    from simharness.scenario.loader import load_scenario as load_file
    from simharness.scenario.loader import parse_scenario

    if isinstance(source, Mapping):
        return parse_scenario(copy.deepcopy(dict(source)), source="<mapping>",
                              default_name=name or "scenario")
    return load_file(source)


def run_scenario(scenario: Scenario | str | Path | Mapping[str, Any], runtime: str | None = None,
                 *, seed: int | None = None, keep_trace: bool = True) -> RunReport:
    """Run a scenario (or what `load_scenario` takes) once under `runtime` (default: the
    scenario's own) with every built-in check, on the simulated backend. The result has
    ``outcome`` (``pass`` or ``fail``), ``violations`` (each with ``check``, ``kind``,
    ``message``), ``forwards`` (forward counts per (walk, node, rank, request)),
    ``trace_digest`` and the run's events (``result.events``, unless `keep_trace` is off)."""
    from simharness.run import run_scenario as run
    from simharness.scenario.model import Scenario as ScenarioType

    if not isinstance(scenario, ScenarioType):
        scenario = load_scenario(scenario)
    return run(scenario, runtime, seed, keep_trace=keep_trace)


__all__ = ["__version__", "load_scenario", "run_scenario"]
