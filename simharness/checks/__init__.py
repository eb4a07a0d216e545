"""Checks: observers of the trace, one module per invariant, each returning `Violation`s.

Built in and always on: ``forwards``, ``loop_exit``, ``drain``, ``liveness``, ``expect``.
``determinism`` runs on request (the runner runs the scenario twice and compares digests).
"""

from __future__ import annotations

from simharness.checks.base import Check, RunContext, Violation
from simharness.checks.drain import DrainCheck
from simharness.checks.expect import ExpectCheck
from simharness.checks.forwards import ForwardsCheck
from simharness.checks.liveness import LivenessCheck
from simharness.checks.loop_exit import LoopExitCheck
from simharness.scenario.model import Scenario

CHECK_NAMES = ("forwards", "loop_exit", "drain", "liveness", "expect", "determinism")


def builtin_checks(scenario: Scenario) -> list[Check]:
    return [ForwardsCheck(), LoopExitCheck(scenario), DrainCheck(), LivenessCheck(), ExpectCheck()]


__all__ = ["CHECK_NAMES", "Check", "RunContext", "Violation", "builtin_checks"]
