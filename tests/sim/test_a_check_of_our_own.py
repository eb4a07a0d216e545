"""A check added in one file, through the public API only: a `Check` subclass handed to the run.

`SlowRequests` reports every request that took longer than a budget of simulated time from its
submission to its end. It is run with the built-in checks, reported in the verdict with its own
kind and time, ranked against the built-in checks by its priority, and named by the fuzzer's
signature, without a line of the library changed for it. And since each check names its own
violations' kinds, rewording a message renames nothing.
"""

from __future__ import annotations

import copy
import dataclasses

from simharness import events as ev
from simharness.checks import BUILTIN_CHECKS, Check, RunContext, RunSetup, Violation
from simharness.explore.execute import execute, signature
from simharness.run import simulate
from simharness.scenario.loader import load_scenario, parse_scenario
from tests.conftest import SCENARIOS
from tests.helpers import split_loop


class SlowRequests(Check):
    """Every request ends within `BUDGET_S` simulated seconds of its submission."""

    name = "slow_requests"
    priority = 5  # before loop_exit (10): here a slow request is the root cause
    kinds = ("slow", "never-ended")
    #: the budget, tight on purpose: every request of `split_loop` takes longer
    BUDGET_S = 1e-6

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        self.submitted: dict[str, float] = {}
        self.late: list[ev.RequestEnded] = []

    def on_Submitted(self, e: ev.Submitted) -> None:
        self.submitted[e.rid] = e.t

    def on_RequestEnded(self, e: ev.RequestEnded) -> None:
        if e.t - self.submitted.pop(e.rid) > self.BUDGET_S:
            self.late.append(e)

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = [Violation(self.name, f"{e.rid} took {e.t:.6f} s", request=e.rid, kind="slow", t=e.t)
               for e in self.late]
        out += [Violation(self.name, f"{rid} never ended", request=rid, kind="never-ended")
                for rid in self.submitted]
        return out


class LateSlowRequests(SlowRequests):
    """The same check ranked after every built-in one."""

    name = "late_slow_requests"
    priority = 95


CHECKS = (*BUILTIN_CHECKS, SlowRequests)
RAW = split_loop(max_iters=3, count=2)


def _scenario():
    return parse_scenario(copy.deepcopy(RAW), source="<test>")


def test_the_check_runs_and_is_reported_in_the_verdict():
    sc = _scenario()
    result, violations = simulate(sc, "mstar-python", checks=CHECKS)
    ours = [v for v in violations if v.check == "slow_requests"]
    assert [v.request for v in ours] == ["r0", "r1"]
    ends = {e.rid: e.t for e in result.events if type(e) is ev.RequestEnded}
    assert [(v.kind, v.t) for v in ours] == [("slow", ends["r0"]), ("slow", ends["r1"])]
    assert ours[0].to_json()["kind"] == "slow"
    # without it, the same run passes: the violations are the check's alone
    assert simulate(sc, "mstar-python")[1] == []


def test_the_signature_names_the_check_by_its_kind_and_ranks_it_by_its_priority():
    sc = _scenario()
    # mstar-rust-prefix routes stray loop-backs: loop_exit (priority 10) reports too
    _, violations = simulate(sc, "mstar-rust-prefix", checks=(*CHECKS, LateSlowRequests))
    assert {"loop_exit", "slow_requests", "late_slow_requests"} <= {v.check for v in violations}
    assert signature(violations, checks=(*CHECKS, LateSlowRequests)) == ("slow_requests", "slow")
    no_early = [v for v in violations if v.check != "slow_requests"]
    assert signature(no_early, checks=(*CHECKS, LateSlowRequests))[0] == "loop_exit"
    assert signature([v for v in violations if v.check == "late_slow_requests"],
                     checks=(LateSlowRequests,)) == ("late_slow_requests", "slow")


def test_the_fuzzer_names_an_example_by_the_check():
    out = execute(RAW, "mstar-python", checks=CHECKS)
    assert (out.status, out.check, out.signature) == ("fail", "slow_requests", "slow_requests:slow")
    assert execute(RAW, "mstar-python").status == "pass"


def test_the_report_places_its_violations_at_their_own_time():
    from simharness.report.story import build_story, violation_time
    from simharness.run import RunReport

    sc = _scenario()
    result, violations = simulate(sc, "mstar-python", checks=CHECKS)
    story = build_story(RunReport(sc, result.runtime, "sim", result, violations, "", 0.0))
    assert [violation_time(v, story) for v in violations] == [v.t for v in violations]
    # not where a violation without a time goes (its request's removal from a rank)
    removed = {e.rid: e.t for e in reversed(result.events) if type(e) is ev.Removed}
    assert all(v.t != removed[v.request] for v in violations)


def test_a_signature_does_not_read_the_wording():
    # Rewording every message keeps every signature: the kinds come from the checks.
    for case in ("mstar-python__drain-dropped", "mstar-python__streams-finals",
                 "mstar-python__forwards-extra-after-loop"):
        sc = load_scenario(SCENARIOS / "corpus" / f"{case}.yaml")
        _, violations = simulate(sc, "mstar-python", keep_trace=False)
        reworded = [dataclasses.replace(v, message="reworded") for v in violations]
        assert signature(reworded) == signature(violations)
        assert ":".join(signature(violations)) == sc.corpus.signature
