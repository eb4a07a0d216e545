"""Run one scenario under one runtime and collect the verdict.

This is the top of the three layers: it builds the runtime under test (`runtime.registry`), the
driver (`engine.simulation`) and the checks (`checks`), runs, and returns a `RunReport` that the
CLI prints and the report writers serialise. Library users call `run_scenario` directly.

The real backend's launcher ends its runs here too: `RunChecks` gives both drivers' events the
same checks and the same runaway guard, and `RunReport` is what both hand back.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from simharness import interrupts
from simharness.checks import (
    BUILTIN_CHECKS,
    Check,
    RunContext,
    RunSetup,
    Violation,
    build_checks,
    finish_checks,
)
from simharness.checks.determinism import DeterminismCheck
from simharness.checks.forward_log import counters_of
from simharness.drive.result import RunResult
from simharness.drive.runaway import RunawayGuard
from simharness.engine.simulation import Simulation
from simharness.errors import ScenarioError, UsageError
from simharness.placement.layout import Layout
from simharness.runtime import registry
from simharness.scenario.model import Scenario


@dataclass
class RunReport:
    scenario: Scenario
    runtime: str
    backend: str
    result: RunResult
    violations: list[Violation]
    trace_digest: str
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        return "fail" if self.violations else "pass"

    @property
    def exit_code(self) -> int:
        return 1 if self.violations else 0

    @property
    def forwards(self) -> dict[tuple[str, str, int, str], int]:
        """How many times each node ran: (walk, node, rank, request) -> forwards (from the
        forwards check's log; from the events for a run cut short)."""
        counters = counters_of(self.result.forward_log, self.result.events)
        return {key: len(c) for key, c in counters.items()}


def with_seed(scenario: Scenario, seed: int | None) -> Scenario:
    if seed is None or seed == scenario.seed:
        return scenario
    return msgspec.structs.replace(scenario, seed=seed)


def build_runtime(scenario: Scenario, name: str | None = None) -> Any:
    """The runtime named on the command line, else the scenario's own choice with its options
    (which also apply when the command line names the scenario's runtime)."""
    if name is not None and name != scenario.runtime.name:
        return registry.resolve(name)
    try:
        return registry.resolve(scenario.runtime.name, dict(scenario.runtime.options))
    except UsageError as exc:
        raise ScenarioError("runtime", str(exc), source=scenario.source) from None
    except registry.OptionError as exc:
        raise ScenarioError(f"runtime.options.{exc.key}", str(exc), source=scenario.source) from None
    except (TypeError, ValueError) as exc:
        raise ScenarioError("runtime.options", str(exc), source=scenario.source) from None


class RunChecks:
    """What watches one run, on either driver: every check of `checks` (the built-in ones by
    default), the runaway guard the driver reads after each step (run policy, not a check:
    `simharness.drive.runaway`), and any extra observers. `observers` is what the driver's
    recorder dispatches to; `judge` is the verdict once the run has ended."""

    def __init__(self, scenario: Scenario, layout: Layout, extra: Iterable[Any] = (),
                 checks: Sequence[type[Check]] = BUILTIN_CHECKS) -> None:
        self.scenario = scenario
        self.layout = layout
        #: what every check is built from: the scenario, the layout and the logs they share
        self.setup = RunSetup(scenario, layout)
        self.checks = build_checks(self.setup, checks)
        self.guard = RunawayGuard(scenario)
        self.observers: list[Any] = [self.guard, *self.checks, *extra]

    @property
    def forward_log(self) -> Any:
        """Every forward per request (`checks.forward_log.ForwardLog`): what the summary and
        the console show, kept or not kept trace alike."""
        return self.setup.forwards

    def judge(self, outcomes: Mapping[str, str]) -> list[Violation]:
        """The checks' verdict once they have seen every event of the run."""
        return finish_checks(self.checks, RunContext(self.scenario, self.layout, outcomes,
                                                     runaways=self.guard.report()))


def simulate(
    scenario: Scenario, runtime_name: str | None = None, *, keep_trace: bool = True,
    observers: Iterable[Any] = (), digest: bool = True, checks: Sequence[type[Check]] = BUILTIN_CHECKS,
    control: Any = None,
) -> tuple[RunResult, list[Violation]]:
    """Run once with every check of `checks` (the built-in ones by default; a caller may add
    its own `Check` classes) and `observers`, which see the same events but are not judged.

    `keep_trace`: keep every event in memory (``result.events``) for a trace file, a report or
    a diff of two runs. Without it memory stays flat in finished requests and the digest is
    computed as the run goes; ``digest=False`` skips even that, for a caller that never asks.
    """
    runtime = build_runtime(scenario, runtime_name)
    layout = Layout.build(scenario)  # one for the run and its checks
    watch = RunChecks(scenario, layout, observers, checks)
    sim = Simulation(scenario, runtime, observers=watch.observers, layout=layout,
                     keep_trace=keep_trace, guard=watch.guard, digest=digest, control=control)
    try:
        result = sim.run()
    except interrupts.Interrupted as exc:
        # Stopped by a signal: hand the caller where the run had got to (the checks have not
        # judged it: a run cut short is not a verdict).
        exc.partial = RunReport(scenario, sim.runtime_name, "sim", sim.so_far(), [], "", 0.0)
        raise
    result.forward_log = watch.forward_log
    result.control = sim.control
    return result, watch.judge(result.outcomes)


def run_scenario(
    scenario: Scenario,
    runtime_name: str | None = None,
    seed: int | None = None,
    *,
    check_determinism: bool = False,
    keep_trace: bool = True,
) -> RunReport:
    """Run with every check; `keep_trace` as in `simulate` (the CLI keeps the events only for
    ``--trace`` and ``--report``)."""
    scenario = with_seed(scenario, seed)
    t0 = time.perf_counter()
    result, violations = simulate(scenario, runtime_name, keep_trace=keep_trace)
    digest = result.recorder.digest()
    wall = time.perf_counter() - t0
    report = RunReport(scenario, result.runtime, "sim", result, violations, digest, wall)
    if check_determinism:
        again, _ = simulate(scenario, runtime_name, keep_trace=keep_trace)
        second = again.recorder.digest()
        report.extra["determinism"] = {"first": digest, "second": second}
        if second != digest:
            a, b = result.events, again.events
            if not keep_trace:  # neither run kept its events: two more that do, to find where
                a = simulate(scenario, runtime_name)[0].events
                b = simulate(scenario, runtime_name)[0].events
            violations.append(DeterminismCheck.differ(digest, second, a, b))
    return report

