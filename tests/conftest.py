"""Shared test configuration: hypothesis profiles and small fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Verbosity, settings

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None)
settings.register_profile("debug", max_examples=20, deadline=None, verbosity=Verbosity.verbose)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"

# Scenario files kept under tests/ are inputs of the tests that load them, not test items of
# their own: the simharness pytest plugin would otherwise collect each one (it collects every
# scenario YAML it meets; `pytest scenarios/` is where that is meant).
collect_ignore_glob = ["*.yaml", "*.yml"]


@pytest.fixture
def scenarios_dir() -> Path:
    return SCENARIOS


@pytest.fixture(scope="session")
def bagel():
    """The default scenario, loaded once (a Scenario is immutable)."""
    from simharness.scenario import load_scenario

    return load_scenario(SCENARIOS / "bagel_cfg.yaml")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test parametrized with the ``mstar`` or ``mstar-graph`` runtime runs the real mstar code: it gets the
    ``mstar`` marker and, without mstar-ai, skips with the install command as the reason, so that
    a new parametrization over every runtime cannot fail a clean install (README's test command
    runs without mstar-ai)."""
    from tests.helpers import needs_mstar

    marks = None
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or not {"mstar", "mstar-graph"} & {
                v for v in callspec.params.values() if isinstance(v, str)}:
            continue
        if marks is None:
            marks = needs_mstar()
        for mark in marks:
            item.add_marker(mark)
