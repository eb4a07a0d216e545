"""``simharness sweep``: scenarios x seeds x runtimes, one table, verdicts against expectations."""

from __future__ import annotations

import importlib.util
import json

import pytest

from simharness.cli import main
from tests.conftest import SCENARIOS

BAGEL = str(SCENARIOS / "bagel_cfg.yaml")
#: one request per run keeps each cell small
ONE = "workload=[{request: t2i, count: 1, concurrency: 1}]"
CASE = SCENARIOS / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"


def _sweep(capsys, *args: str) -> tuple[int, dict]:
    code = main(["sweep", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_a_clean_matrix_passes_with_one_row_per_scenario_and_runtime(capsys):
    code, got = _sweep(capsys, BAGEL, "--set", ONE, "--seeds", "0..2", "--runtime", "mstar-python",
                       "--runtime", "mstar-rust")
    assert code == 0 and got["outcome"] == "pass" and got["runs"] == 6 and got["unexpected"] == 0
    assert [(c["runtime"], c["seed"]) for c in got["cells"]] == [
        ("mstar-python", 0), ("mstar-python", 1), ("mstar-python", 2),
        ("mstar-rust", 0), ("mstar-rust", 1), ("mstar-rust", 2)]
    rows = got["rows"]
    assert [(r["runtime"], r["runs"], r["pass"]) for r in rows] == [("mstar-python", 3, 3),
                                                                   ("mstar-rust", 3, 3)]
    assert all(c["trace_digest"].startswith("v2-sha256:") and c["requests"]["completed"] == 1
               for c in got["cells"])
    # the two runtimes agree on bagel_cfg, so their runs are the same traces
    assert rows[0]["sweep_digest"] == rows[1]["sweep_digest"]


def test_an_unexpected_failure_is_exit_1_and_a_baseline_expects_it(capsys, tmp_path):
    code, got = _sweep(capsys, BAGEL, "--set", ONE, "--seeds", "0..1", "--runtime",
                       "mstar-rust-prefix")
    assert code == 1 and got["unexpected"] == 2
    assert {c["verdict"] for c in got["cells"]} == {"fail:loop_exit:peer"}
    assert got["rows"][0]["unexpected_seeds"] == [0, 1]
    base = tmp_path / "base.json"
    base.write_text(json.dumps(got))
    code, again = _sweep(capsys, BAGEL, "--set", ONE, "--seeds", "0..1", "--runtime",
                         "mstar-rust-prefix", "--baseline", str(base))
    assert code == 0 and {c["expected_from"] for c in again["cells"]} == {"baseline"}
    # a baseline where the runtime passed: now it fails, which is a change
    for c in got["cells"]:
        c["verdict"] = "pass"
    base.write_text(json.dumps(got))
    code, _ = _sweep(capsys, BAGEL, "--set", ONE, "--seeds", "0..1", "--runtime",
                     "mstar-rust-prefix", "--baseline", str(base))
    assert code == 1


def test_strict_fails_on_a_changed_trace_digest(capsys, tmp_path):
    args = (BAGEL, "--set", ONE, "--seeds", "3", "--runtime", "mstar-python")
    _, got = _sweep(capsys, *args)
    got["cells"][0]["trace_digest"] = "v2-sha256:" + "0" * 64
    base = tmp_path / "base.json"
    base.write_text(json.dumps(got))
    code, lax = _sweep(capsys, *args, "--baseline", str(base))
    assert code == 0 and lax["cells"][0]["digest_changed"] is True
    code, strict = _sweep(capsys, *args, "--baseline", str(base), "--strict")
    assert code == 1 and strict["cells"][0]["unexpected"] is True


def test_a_baseline_of_another_digest_scheme_compares_verdicts_only(capsys, tmp_path):
    args = (BAGEL, "--set", ONE, "--seeds", "0..1", "--runtime", "mstar-python")
    _, got = _sweep(capsys, *args)
    for c in got["cells"]:  # as an older simharness recorded them (digest scheme v1)
        c["trace_digest"] = "sha256:" + c["trace_digest"].partition(":")[2]
    got["cells"][1]["verdict"] = "fail:forwards:counters"
    base = tmp_path / "base.json"
    base.write_text(json.dumps(got))
    code, lax = _sweep(capsys, *args, "--baseline", str(base))
    assert code == 1 and [c["unexpected"] for c in lax["cells"]] == [False, True]  # verdicts compare
    assert not any(c["digest_changed"] for c in lax["cells"])
    assert lax["notes"] == ["the baseline's trace digests were made under digest scheme sha256 "
                            "(this simharness makes v2-sha256): digests were not compared"]
    assert main(["sweep", *args, "--baseline", str(base)]) == 1
    out = capsys.readouterr().out
    assert "note: the baseline's trace digests were made under digest scheme sha256" in out
    assert main(["sweep", *args, "--baseline", str(base), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "made under digest scheme sha256 and this simharness makes v2-sha256, so --strict cannot" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_corpus_case_is_expected_to_fail_as_recorded_under_its_runtime(capsys):
    code, got = _sweep(capsys, str(CASE), "--runtime", "mstar-rust-prefix", "--runtime", "mstar-rust")
    by_rt = {c["runtime"]: c for c in got["cells"]}
    assert by_rt["mstar-rust-prefix"]["expected"] == "fail:loop_exit:peer"
    assert by_rt["mstar-rust-prefix"]["expected_from"] == "corpus (open)"
    assert not by_rt["mstar-rust-prefix"]["unexpected"]
    assert by_rt["mstar-rust"]["verdict"] == "pass"
    assert code == 0


def test_each_file_s_corpus_block_is_read_once_however_many_cells_it_has(monkeypatch):
    # Expectations are worked out as cells finish; a sweep of many seeds and runtimes must not
    # read and parse a scenario file again for each of them.
    from simharness.scenario import loader
    from simharness.sweep import CellResult, Expectations

    reads = []
    read_yaml = loader.read_yaml

    def counting(path, *args, **kw):
        reads.append(str(path))
        return read_yaml(path, *args, **kw)

    monkeypatch.setattr(loader, "read_yaml", counting)
    expect = Expectations(None)
    cells = [CellResult(name, str(path), rt, seed, "pass")
             for name, path in (("case", CASE), ("bagel", BAGEL))
             for rt in ("mstar-rust-prefix", "mstar-rust") for seed in range(5)]
    for cell in cells:
        expect(cell)
    assert sorted(reads) == sorted([str(CASE), BAGEL])
    assert {(c.scenario, c.runtime, c.expected, c.why_expected) for c in cells} == {
        ("case", "mstar-rust-prefix", "fail:loop_exit:peer", "corpus (open)"),
        ("case", "mstar-rust", "pass", "default"),
        ("bagel", "mstar-rust-prefix", "pass", "default"),
        ("bagel", "mstar-rust", "pass", "default")}


def test_the_table_names_every_unexpected_run(capsys):
    code = main(["sweep", BAGEL, "--set", ONE, "--seeds", "0", "--runtime", "mstar-rust-prefix"])
    out = capsys.readouterr().out
    assert code == 1
    assert "bagel_cfg mstar-rust-prefix seed 0: fail:loop_exit:peer, expected pass" in out
    assert "FAIL: 1 run, 1 unexpected" in out


@pytest.mark.parametrize("args, message", [
    (["--seeds", "5..2"], "--seeds '5..2': expected 0 <= A <= B"),
    (["--seeds", "x"], "expected A..B"),
    (["--runtime", "nope"], "--runtime nope: unknown runtime 'nope'"),
    (["--runtime", "mstar-rust", "--runtime", "mstar-rust"], "given twice"),
    (["--workers", "0"], "--workers must be >= 1"),
    (["--strict"], "--strict compares"),
    (["--baseline", "/nonexistent/base.json"], "--baseline /nonexistent/base.json: file not found"),
    (["--baseline", "/"], "--baseline /: is a directory, not a file"),
    (["--set", "workload[0].count=zero"], "workload[0].count"),
    # a range too large for a list of seeds is refused, not a MemoryError
    (["--seeds", "0..99999999999"], "--seeds '0..99999999999': 100,000,000,000 seeds; at most 100,000"),
])
def test_bad_input_is_exit_2_before_any_run(capsys, args, message):
    assert main(["sweep", BAGEL, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_missing_scenario_is_exit_2(capsys, tmp_path):
    assert main(["sweep", BAGEL, str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


@pytest.mark.parametrize("text, words", [
    ('{"cells": [{"scenario": "x"}]}', "cells[0].runtime is missing"),
    # without a verdict the sweep would run every cell and then fail on the first comparison
    ('{"cells": [{"scenario": "orpheus", "runtime": "mstar-python", "seed": 0}]}',
     "cells[0].verdict is missing"),
    ('{"cells": [{"scenario": "x", "runtime": "y", "seed": 0, "verdict": ["pass"]}]}',
     "cells[0].verdict is a list, not a string"),
    ('{"cells": [{"scenario": "x", "runtime": "y", "seed": "zero", "verdict": "pass"}]}',
     "cells[0].seed is the string 'zero', not an integer"),
    ('{"cells": 3}', "cells is the number 3, not a list"),
    ('[1, 2]', "the file has no cells"),
    ('{"cells": [', "not JSON"),
])
def test_a_baseline_that_is_not_a_sweep_is_exit_2(capsys, tmp_path, text, words):
    bad = tmp_path / "base.json"
    bad.write_text(text)
    assert main(["sweep", BAGEL, "--set", ONE, "--baseline", str(bad)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"--baseline {bad}: {words}" in err, err


def test_a_baseline_without_digests_changes_no_digest(capsys, tmp_path):
    args = (BAGEL, "--set", ONE, "--seeds", "0", "--runtime", "mstar-python")
    _, got = _sweep(capsys, *args)
    for c in got["cells"]:
        del c["trace_digest"]
    base = tmp_path / "base.json"
    base.write_text(json.dumps(got))
    code, again = _sweep(capsys, *args, "--baseline", str(base), "--strict")
    assert code == 0 and not any(c["digest_changed"] for c in again["cells"])
    assert again["notes"] == ["the baseline records no trace digests: digests were not compared"]


def test_a_changed_digest_is_counted_in_runs(capsys, tmp_path):
    args = (BAGEL, "--set", ONE, "--seeds", "0", "--runtime", "mstar-python")
    _, got = _sweep(capsys, *args)
    got["cells"][0]["trace_digest"] = "v2-sha256:" + "0" * 64
    base = tmp_path / "base.json"
    base.write_text(json.dumps(got))
    assert main(["sweep", *args, "--baseline", str(base)]) == 0
    assert "1 run has a trace digest other than the baseline's" in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs dask.distributed")
def test_a_scheduler_nothing_listens_at_is_exit_2(capsys, monkeypatch):
    from simharness import pool

    monkeypatch.setattr(pool, "CONNECT_TIMEOUT_S", 0.5)  # dask's own wait is 30 s
    assert main(["sweep", BAGEL, "--set", ONE, "--seeds", "0", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "--scheduler tcp://127.0.0.1:1: cannot connect: Timed out" in err and "Traceback" not in err


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs dask.distributed")
def test_dask_workers_give_the_in_process_result(capsys):
    args = (BAGEL, "--set", ONE, "--seeds", "0..3", "--runtime", "mstar-python",
            "--runtime", "mstar-rust-prefix")
    _, here = _sweep(capsys, *args)
    _, there = _sweep(capsys, *args, "--workers", "2")
    assert there["workers"] == 2
    strip = [{k: v for k, v in c.items() if k != "wall_s"} for c in here["cells"]]
    assert [{k: v for k, v in c.items() if k != "wall_s"} for c in there["cells"]] == strip
    assert here["rows"] == there["rows"]


def test_a_runtime_known_to_fail_is_one_line_or_declared(capsys):
    from simharness.cli import main

    args = ["sweep", str(SCENARIOS / "bagel_cfg.yaml"), "--runtime", "mstar-rust-prefix",
            "--runtime", "mstar-python", "--seeds", "0..5"]
    assert main(args) == 1
    out = capsys.readouterr().out
    # one line for the six seeds that fail the same way, not six
    assert "unexpected (6, 1 distinct):" in out
    assert "bagel_cfg mstar-rust-prefix seeds 0-5: fail:loop_exit:peer, expected pass" in out
    assert main([*args, "--expect-fail", "mstar-rust-prefix"]) == 0
    assert "PASS: 12 runs, 0 unexpected" in capsys.readouterr().out
    # declared to fail, it must: the reference passing is unexpected
    assert main([*args, "--expect-fail", "mstar-python"]) == 1
    assert "mstar-python seeds 0-5: pass, expected fail:* [--expect-fail]" in capsys.readouterr().out
    assert main([*args, "--expect-fail", "mstar-rust"]) == 2
    assert "--expect-fail mstar-rust: not a --runtime of this sweep" in capsys.readouterr().err


def test_seed_text():
    from simharness.sweep import seed_text

    assert seed_text([3]) == "seed 3"
    assert seed_text([4, 0, 1, 2, 3, 7, 9, 10]) == "seeds 0-4, 7, 9-10"
