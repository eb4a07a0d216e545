"""Causes first: which violation explains which (`checks.base.symptoms`), and the short
headline a hang gets in the console."""

from __future__ import annotations

from simharness.checks import Violation, causes_and_symptoms, symptoms


def _v(check, request=None):
    return Violation(check, f"{check} of {request}", request=request)


def test_a_cause_explains_the_symptoms_of_its_own_request_only():
    found = [_v("loop_exit", "r0"), _v("forwards", "r0"), _v("forwards", "r1"),
             _v("drain", "r0"), _v("streams", "r0")]
    # r1's extra forward has no loop_exit of its own; streams is nothing loop_exit explains
    assert symptoms(found) == [None, 0, None, 0, None]
    causes, effects = causes_and_symptoms(found)
    assert [(v.check, v.request) for v in effects] == [("forwards", "r0"), ("drain", "r0")]
    assert [(v.check, v.request) for v in causes] == [
        ("loop_exit", "r0"), ("forwards", "r1"), ("streams", "r0")]


def test_a_cause_about_the_whole_run_explains_every_request():
    found = [_v("loop_exit"), _v("forwards", "r3")]
    assert symptoms(found) == [None, 0]


def test_a_hang_is_one_headline_in_the_console():
    import io

    import simharness
    from simharness.report.console import render
    from tests.conftest import SCENARIOS

    report = simharness.run_scenario(SCENARIOS / "bagel_cfg_counter.yaml", "mstar-rust-prefix")
    hangs = [v for v in report.violations if v.check == "liveness"]
    assert hangs and all(v.headline.startswith("hung in walk image_gen_cfg (pass 2) at t=")
                         for v in hangs)
    assert "waits for the walk-start latents (its engine gate)" in hangs[0].headline
    out = io.StringIO()
    render(report, out)
    text = out.getvalue()
    assert hangs[0].headline.split(": ", 1)[1][:40] in text
    assert hangs[0].message not in text  # the whole explanation is folded away
    assert "request ended" in text and "hung" in text
