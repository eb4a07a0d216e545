"""Checks: observers of the trace, one module per invariant, each returning `Violation`s.

Built in and always on: ``forwards``, ``loop_exit``, ``drain``, ``liveness``, ``tp_agreement``,
``streams``, ``worker_graphs``, ``kv_handoff``, ``expect``. ``determinism`` runs on request (the
runner runs the scenario twice and compares digests).
"""

from __future__ import annotations

from simharness.checks.base import Check, RunContext, Violation
from simharness.checks.drain import DrainCheck
from simharness.checks.expect import ExpectCheck
from simharness.checks.forwards import ForwardsCheck
from simharness.checks.kv_handoff import KvHandoffCheck
from simharness.checks.liveness import LivenessCheck
from simharness.checks.loop_exit import LoopExitCheck
from simharness.checks.streams import StreamsCheck
from simharness.checks.tp_agreement import TpAgreementCheck
from simharness.checks.worker_graphs import WorkerGraphsCheck
from simharness.placement.layout import Layout
from simharness.scenario.model import Scenario

CHECK_NAMES = ("forwards", "loop_exit", "drain", "liveness", "tp_agreement", "streams",
               "worker_graphs", "kv_handoff", "expect", "determinism")


def builtin_checks(scenario: Scenario, layout: Layout | None = None) -> list[Check]:
    """Every built-in check of a run of `scenario`. `layout`: the run's own, so that the checks
    that route what they see by worker graph (tp_agreement, streams) do not build another."""
    forwards = ForwardsCheck()
    # expect reads its counts from the forwards check's log rather than counting them again
    return [forwards, LoopExitCheck(scenario), DrainCheck(), LivenessCheck(scenario),
            TpAgreementCheck(scenario, layout), StreamsCheck(scenario, layout), WorkerGraphsCheck(),
            KvHandoffCheck(), ExpectCheck(scenario, forwards.log)]


def finish_checks(checks: list[Check], ctx: RunContext) -> list[Violation]:
    """Every check's verdict at the end of a run: check by check in `checks` order, each
    check's violations in place order (request, walk, node, rank)."""
    pos = {c.name: i for i, c in enumerate(checks)}
    violations = [v for c in checks for v in c.finish(ctx)]
    violations.sort(key=lambda v: (pos.get(v.check, len(pos)), v.sort_key()))
    return violations


__all__ = ["CHECK_NAMES", "Check", "RunContext", "Violation", "builtin_checks", "finish_checks"]
