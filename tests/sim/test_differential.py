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

    assert [d.kind for d in divergences(base, arm(base.events, [V()]))] == ["outcome"]


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
