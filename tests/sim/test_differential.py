"""The other runtime as the oracle: `simharness.differential` and ``fuzz --against``.

Each kind of divergence is shown on a runtime that differs on purpose; the seed's drift (the
prefix profile routing a loop-back past its loop's end) is found with no check at all; a
differential case is written, replayed exactly, and says so when the two runtimes come to agree.
"""

from __future__ import annotations

import json

import pytest
import yaml

from simharness.differential import Arm, divergences, signature
from simharness.explore.campaign import CampaignConfig, run_campaign
from simharness.explore.corpus import replay, write_case
from simharness.explore.execute import execute, run_arms
from tests.helpers import build, split_loop


def _arms(raw, runtime, against, checks=None):
    kw = {} if checks is None else {"checks": checks}
    return run_arms(build(raw), runtime, against, **kw)[:2]


def test_two_runs_of_one_runtime_agree():
    a, b = _arms(split_loop(), "mstar-python", "mstar-rust")
    assert divergences(a, b) == [] and signature([]) is None


def test_the_seed_drift_is_found_with_no_check_at_all():
    """The prefix profile against the reference, judged by nothing but their difference: the
    loop-back past the loop's end shows as a routed edge the reference filters."""
    raw = split_loop()
    a, b = _arms(raw, "mstar-rust-prefix", "mstar-python", checks=())
    assert a.violations == [] and b.violations == []  # no check ran
    found = divergences(a, b)
    # B's loop-back past the end runs A once more: an extra forward, named first
    assert found and found[0].kind == "forwards" and found[0].where.startswith("w/A ")
    # ... and the completion at the loop's end routes what the reference filters
    assert any(d.kind == "routes" and "filtered [x->A, x->B]" in d.other
               and "filtered [x->A, x->B]" not in d.first for d in found)
    o = execute(raw, "mstar-rust-prefix", against="mstar-python", checks=())
    assert o.status == "fail" and o.signature == signature(found)


def test_each_kind_is_named_first_when_it_is_the_only_one():
    raw = split_loop()
    base = _arms(raw, "mstar-python", "mstar-rust")[0]
    forward = next(e for e in base.events if type(e).__name__ == "Forward")
    import msgspec

    def arm(events, violations=()):
        return Arm("changed", events, base.outcomes, list(violations))

    i = base.events.index(forward)
    extra = [*base.events[:i + 1], forward, *base.events[i + 1:]]
    assert divergences(base, arm(extra))[0].kind == "forwards"
    counter = msgspec.structs.replace(forward, counter=(forward.counter or 0) + 7)
    other = [*base.events[:i], counter, *base.events[i + 1:]]
    assert [d.kind for d in divergences(base, arm(other))][0] == "counters"
    rerouted = msgspec.structs.replace(forward, routes=())
    other = [*base.events[:i], rerouted, *base.events[i + 1:]]
    assert [d.kind for d in divergences(base, arm(other))] == ["routes"]

    class V:
        check = "liveness"

    hung = Arm("changed", base.events, {**base.outcomes, "r1": "hung"}, [V()])
    found = divergences(base, hung)
    assert [d.kind for d in found] == ["outcome"]
    # the outcome names the requests that did not complete, and only those
    assert found[0].other == "fail (r1 hung) [liveness x1]" and found[0].first == "pass"


def test_a_differential_case_replays_exactly_and_says_when_the_arms_agree(tmp_path):
    raw = split_loop()
    path = write_case(tmp_path, raw, "mstar-rust-prefix", "diff:forwards", seed=0, example=0,
                      nodes=3, ranks=2, against="mstar-python")
    assert path.name == "mstar-rust-prefix__vs__mstar-python__diff-forwards.yaml"
    meta = yaml.safe_load(path.read_text())["corpus"]
    assert meta["against"] == "mstar-python" and meta["against_trace_digest"] != meta["trace_digest"]
    r = replay(path)
    assert r.ok and r.got == "diff:forwards" and r.against == "mstar-python", r.message
    assert r.digest == r.expected_digest
    # the same case with the reference on both sides: nothing to tell apart any more
    text = path.read_text().replace("runtime: mstar-rust-prefix", "runtime: mstar-rust")
    path.write_text(text)
    r = replay(path)
    assert not r.ok and "now passes under mstar-rust against mstar-python" in r.message


def test_a_differential_campaign_shrinks_and_knows_its_cases(tmp_path):
    cfg = CampaignConfig("mstar-rust-prefix", seed=0, examples=100, against="mstar-python")
    r = run_campaign(cfg)
    assert r.findings and all(s.startswith("diff:") for s in r.findings)
    sig = r.new_signatures()[0]
    assert r.shrunk[sig].nodes <= 4


def _fuzz(capsys, *args):
    from simharness.cli import main

    code = main(["fuzz", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_fuzz_against_writes_cases_with_both_runtimes_and_knows_them_next_time(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    args = ("--runtime", "mstar-rust-prefix", "--against", "mstar-python", "--examples", "100",
            "--corpus", str(corpus), "--no-shrink")
    code, out, _ = _fuzz(capsys, *args, "--json")
    first = json.loads(out)
    assert code == 1 and first["against"] == "mstar-python" and first["new"]
    assert all(f["case"].endswith(".yaml") and "__vs__mstar-python__diff-" in f["case"]
               for f in first["failures"])
    code, out, _ = _fuzz(capsys, *args)
    assert code == 0 and "under mstar-rust-prefix against mstar-python" in out
    # the same signature under the runtime alone is another case: not known to the checks' run
    code, out, _ = _fuzz(capsys, "--runtime", "mstar-rust-prefix", "--examples", "50",
                         "--corpus", str(corpus), "--no-shrink", "--json")
    assert not any(s.startswith("diff:") for s in json.loads(out)["known"])


@pytest.mark.parametrize("args, says", [
    (("--against", "mstar-python"), "--against mstar-python: the same runtime as --runtime"),
    (("--against", "no-such"), "--against no-such:"),
])
def test_fuzz_against_refuses_bad_arms(tmp_path, capsys, args, says):
    code, _, err = _fuzz(capsys, "--runtime", "mstar-python", *args, "--examples", "1",
                         "--corpus", str(tmp_path))
    assert code == 2 and says in err and "Traceback" not in err


def test_two_drop_mechanisms_have_two_signatures():
    """The TP REMOVE race and a STOP_LOOPS parked for a removed request both end in
    ``drain:dropped``; the signature names which message and which kind of rank, so one known
    case never hides the other."""
    from simharness import events as ev
    from simharness.checks.base import RunContext, RunSetup
    from simharness.checks.drain import DrainCheck
    from simharness.explore.execute import signature as sig_of
    from simharness.scenario import load_scenario
    from tests.conftest import SCENARIOS

    sc = load_scenario(SCENARIOS / "bagel_cfg_tp2.yaml")
    setup = RunSetup.of(sc)
    check = DrainCheck(setup)
    follower = sorted(setup.layout.tp_followers)[0]
    reason = "arrived after the request was removed on this rank; parked in unprocessed messages forever"
    check.on_Dropped(ev.Dropped(0.1, follower, "r0", "remove_request", reason, ()))
    check.on_Dropped(ev.Dropped(0.2, 0, "r1", "stop_loops", reason, ()))
    found = check.finish(RunContext(sc, setup.layout, {"r0": "completed", "r1": "completed"}))
    assert sorted(v.mechanism for v in found) == ["remove_request:tp-follower", "stop_loops"]
    assert sig_of([found[0]]) != sig_of([found[1]])
    assert {":".join(sig_of([v])) for v in found} == {
        "drain:dropped:remove_request:tp-follower", "drain:dropped:stop_loops"}


def test_a_case_recorded_under_the_older_coarser_name_still_replays(tmp_path):
    import shutil

    from tests.conftest import SCENARIOS

    src = SCENARIOS / "corpus" / "mstar-python__drain-dropped.yaml"
    case = tmp_path / src.name
    shutil.copy(src, case)
    text = case.read_text()
    case.write_text(text.replace("signature: drain:dropped:remove_request:tp-follower",
                                 "signature: drain:dropped"))
    r = replay(case, judge=False)
    assert r.ok and "now named drain:dropped:remove_request:tp-follower" in r.message
    assert "--update records the new name" in r.message
    r = replay(case, update=True, judge=False)
    assert r.ok and "signature renamed" in r.message
    assert "signature: drain:dropped:remove_request:tp-follower" in case.read_text()
    assert case.read_text().replace("signature: drain:dropped:remove_request:tp-follower", "") \
        == text.replace("signature: drain:dropped:remove_request:tp-follower", "")
