"""`RunResult`: what either driver hands back from a run, before the checks' verdict.

The simulation (`simharness.engine.simulation`) and the real processes' launcher
(`real_backends.launcher`) both return one; `simharness.run.RunReport` adds the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simharness.placement.layout import Layout
from simharness.scenario.model import Scenario
from simharness.trace import Recorder


@dataclass
class RunResult:
    """What a driver hands back: the run's events (`recorder`), the simulated or wall time it
    ended at, every request's outcome and what to tell the user; `forward_log` is filled in by
    the run's checks (`simharness.run.RunChecks`), for both drivers alike."""

    scenario: Scenario
    runtime: str
    layout: Layout
    recorder: Recorder
    sim_time_s: float
    #: rid -> outcome (a `RidMap`: a slot per request, for a soak's hundred thousand)
    outcomes: Mapping[str, str] = field(default_factory=dict)
    #: what the runtime under test wants its user to know (e.g. a fallback it took)
    notes: tuple[str, ...] = ()
    #: every forward per request (`checks.forward_log.ForwardLog`), set by the runner that ran the
    #: checks; what the summary reads, kept or not kept trace alike
    forward_log: Any = None
    #: the run's delivery control (`engine.deliveries`) where a schedule decided deliveries
    control: Any = None

    @property
    def events(self) -> list[Any]:
        return self.recorder.events


__all__ = ["RunResult"]
