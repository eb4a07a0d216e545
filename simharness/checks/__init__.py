"""Checks: observers of the trace, one module per invariant, each returning `Violation`s.

Built in and always on (`BUILTIN_CHECKS`, in the order a report lists them): ``forwards``,
``loop_exit``, ``drain``, ``liveness``, ``tp_agreement``, ``streams``, ``worker_graphs``,
``kv_handoff``, ``expect``. ``determinism`` runs on request (the runner runs the scenario twice
and compares digests). A new check is one module with a `Check` subclass (see `checks.base`),
added to `BUILTIN_CHECKS` to run in every run.
"""

from __future__ import annotations

from collections.abc import Iterable

from simharness.checks.base import (
    UNRANKED,
    Check,
    RunContext,
    RunSetup,
    Violation,
    causes_and_symptoms,
    symptoms,
)
from simharness.checks.determinism import DeterminismCheck
from simharness.checks.drain import DrainCheck
from simharness.checks.expect import ExpectCheck
from simharness.checks.forwards import ForwardsCheck
from simharness.checks.kv_handoff import KvHandoffCheck
from simharness.checks.liveness import LivenessCheck
from simharness.checks.loop_exit import LoopExitCheck
from simharness.checks.streams import StreamsCheck
from simharness.checks.tp_agreement import TpAgreementCheck
from simharness.checks.worker_graphs import WorkerGraphsCheck

#: every check a run builds, in the order a report lists their violations (the forwards check
#: first: it keeps the forward log the expect check reads)
BUILTIN_CHECKS: tuple[type[Check], ...] = (
    ForwardsCheck, LoopExitCheck, DrainCheck, LivenessCheck, TpAgreementCheck, StreamsCheck,
    WorkerGraphsCheck, KvHandoffCheck, ExpectCheck)
#: every check that reports: the built-in ones, then ``determinism`` (run on request)
KNOWN_CHECKS: tuple[type[Check], ...] = (*BUILTIN_CHECKS, DeterminismCheck)
CHECK_NAMES = tuple(c.name for c in KNOWN_CHECKS)


def build_checks(setup: RunSetup, classes: Iterable[type[Check]] = BUILTIN_CHECKS) -> list[Check]:
    """One check of each class in `classes`, for the run `setup` describes."""
    return [cls(setup) for cls in classes]


def finish_checks(checks: list[Check], ctx: RunContext) -> list[Violation]:
    """Every check's verdict at the end of a run, causes first: check by check in `priority`
    order (``loop_exit`` before the ``forwards`` and ``drain`` symptoms it causes; `checks`
    order among equals), each check's violations in place order (request, walk, node, rank)."""
    pos = {c.name: (c.priority, i) for i, c in enumerate(checks)}
    violations = [v for c in checks for v in c.finish(ctx)]
    violations.sort(key=lambda v: (pos.get(v.check, (UNRANKED, len(pos))), v.sort_key()))
    return violations


__all__ = ["BUILTIN_CHECKS", "CHECK_NAMES", "KNOWN_CHECKS", "UNRANKED", "Check", "RunContext",
           "RunSetup", "Violation", "build_checks", "causes_and_symptoms", "finish_checks",
           "symptoms"]
