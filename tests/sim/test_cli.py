"""The command line as a user meets it."""

from __future__ import annotations

import json

from simharness.cli import main


def test_run_prints_the_table_and_exits_1_on_violations(scenarios_dir, capsys):
    code = main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--runtime", "mstar-rust-prefix"])
    out = capsys.readouterr().out
    assert code == 1
    assert "image_gen_cfg  LLM_cfg_text@1   50*" in out
    assert "FAIL:" in out and "rerun: SIMHARNESS_SEED=0 simharness run" in out


def test_run_passes_with_exit_0(scenarios_dir, capsys):
    assert main(["run", str(scenarios_dir / "bagel_cfg.yaml")]) == 0
    assert "PASS" in capsys.readouterr().out


def test_json_is_the_only_thing_on_stdout(scenarios_dir, capsys):
    code = main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--json", "--seed", "3"])
    out = capsys.readouterr().out
    data = json.loads(out)
    assert code == 0 and data["seed"] == 3 and data["outcome"] == "pass"


def test_seed_from_the_environment(scenarios_dir, capsys, monkeypatch):
    monkeypatch.setenv("SIMHARNESS_SEED", "5")
    main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--json"])
    assert json.loads(capsys.readouterr().out)["seed"] == 5


def test_report_and_trace_files(scenarios_dir, tmp_path, capsys):
    rdir = tmp_path / "rep"
    trace = tmp_path / "t.jsonl"
    code = main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--report", str(rdir),
                 "--trace", str(trace), "--runtime", "mstar-rust-prefix"])
    assert code == 1
    summary = json.loads((rdir / "summary.json").read_text())
    assert summary["outcome"] == "fail"
    lines = trace.read_text().splitlines()
    assert json.loads(lines[0])["event"] == "Submitted"
    assert json.loads((rdir / "trace.perfetto.json").read_text())["traceEvents"]
    # Writing again into our own report directory is fine; a foreign directory is refused.
    assert main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--report", str(rdir)]) == 0
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--report", str(foreign)]) == 2
    assert (foreign / "notes.txt").read_text() == "keep me"
    assert "not written by simharness" in capsys.readouterr().err


def test_runtimes_and_layout_verbs(scenarios_dir, capsys):
    assert main(["runtimes"]) == 0
    out = capsys.readouterr().out
    assert "mstar-rust-prefix" in out and "mstar-python" in out
    assert main(["layout", str(scenarios_dir / "bagel_cfg.yaml")]) == 0
    out = capsys.readouterr().out
    assert "image_gen_cfg#3" in out and "Loop(denoise: combine_cfg)" in out


def test_help_and_no_command(capsys):
    assert main([]) == 2
    try:
        main(["run", "--help"])
    except SystemExit as exc:
        assert exc.code == 0
    assert "--runtime" in capsys.readouterr().out
