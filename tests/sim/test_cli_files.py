"""Files the command line writes, signals it gets, and corpus cases run as plain scenarios.

Every failure to write is one line and exit 2, never a traceback; a report folder is marked as
ours only once the whole report is in it; a scenario's name never steers a write outside
``reports/``; SIGINT and SIGTERM end a command with 130 and 143 and what it had found.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal

import pytest

from simharness.cli import main
from simharness.report.writer import REPORT_MARKER

ORPHEUS = "orpheus.yaml"


def _one_line_error(err: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("target, says", [
    ("missing/t.jsonl", "does not exist"),
    ("folder.jsonl", "is a directory"),
])
def test_trace_to_a_path_that_cannot_be_a_file_is_refused_before_the_run(
        scenarios_dir, tmp_path, monkeypatch, capsys, target, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder.jsonl").mkdir()
    assert main(["run", str(scenarios_dir / ORPHEUS), "--trace", target]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "--trace" in line and says in line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_trace_to_a_full_disk_is_one_line(scenarios_dir, capsys):
    assert main(["run", str(scenarios_dir / ORPHEUS), "--trace", "/dev/full"]) == 2
    assert "--trace /dev/full" in _one_line_error(capsys.readouterr().err)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_report_where_no_folder_can_be_made_is_one_line(scenarios_dir, capsys):
    assert main(["run", str(scenarios_dir / ORPHEUS), "--report", "/proc/simharness-x"]) == 2
    assert "--report /proc/simharness-x: cannot write" in _one_line_error(capsys.readouterr().err)


def test_a_failed_trace_write_keeps_the_old_file(scenarios_dir, tmp_path, monkeypatch, capsys):
    from simharness import trace

    old = tmp_path / "t.jsonl"
    old.write_text("the previous trace\n")

    def broken(self, path):
        with trace.fileio.atomic_open(path) as fh:
            fh.write('{"event": "Submitted"}\n')
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(trace.Recorder, "write_jsonl", broken)
    assert main(["run", str(scenarios_dir / ORPHEUS), "--trace", str(old)]) == 2
    assert old.read_text() == "the previous trace\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]


def test_the_report_marker_is_written_last(scenarios_dir, tmp_path, monkeypatch, capsys):
    """A report stopped half way is not marked complete; the next report replaces it."""
    import simharness.report.perfetto as perfetto

    out = tmp_path / "rep"
    assert main(["run", str(scenarios_dir / ORPHEUS), "--report", str(out)]) == 0
    assert (out / REPORT_MARKER).exists()

    def fail(events, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(perfetto, "write_perfetto", fail)
    assert main(["run", str(scenarios_dir / ORPHEUS), "--report", str(out)]) == 2
    assert not (out / REPORT_MARKER).exists()
    assert json.loads((out / "summary.json").read_text())["outcome"] == "pass"  # whole, never half
    monkeypatch.undo()
    # The folder holds nothing but report files: ours to replace, marker or not.
    assert main(["run", str(scenarios_dir / ORPHEUS), "--report", str(out)]) == 0
    assert (out / REPORT_MARKER).exists()
    capsys.readouterr()


def test_a_scenario_name_cannot_write_outside_reports(scenarios_dir, tmp_path, monkeypatch, capsys):
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert main(["run", str(scenarios_dir / ORPHEUS), "--set", "name=../../../x", "--report"]) == 0
    written = [p.relative_to(tmp_path) for p in tmp_path.rglob("summary.json")]
    assert len(written) == 1 and written[0].parts[:4] == ("a", "b", "c", "reports"), written
    assert "report written to reports/" in capsys.readouterr().err


def test_a_corpus_case_runs_under_its_recorded_runtime(scenarios_dir, capsys):
    case = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    assert main(["run", str(case), "--json"]) == 1  # it fails, as recorded (not a false PASS)
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runtime"] == "mstar-rust-prefix"
    assert "is a corpus case (status open: recorded failing with loop_exit:peer" in captured.err
    assert "simharness replay" in captured.err
    # --runtime still chooses; the note says it differs from the record.
    assert main(["run", str(case), "--runtime", "mstar-rust", "--json"]) == 0
    assert "instead of mstar-rust-prefix" in capsys.readouterr().err


def test_a_corpus_case_whose_runtime_cannot_run_says_why(scenarios_dir, tmp_path, capsys):
    src = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    case = tmp_path / "case.yaml"
    case.write_text(src.read_text().replace("runtime: mstar-rust-prefix", "runtime: no-such-rt", 1))
    assert main(["run", str(case)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "recorded under runtime 'no-such-rt', which cannot run here" in line


def test_replay_update_records_the_new_digest_and_keeps_the_rest(scenarios_dir, tmp_path, capsys):
    src = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    case = tmp_path / "case.yaml"
    # a comment of the user's and the layout of the file survive the update, byte for byte
    original = "# kept by the user\n" + src.read_text()
    case.write_text(original.replace("trace_digest: v2-sha256:", "trace_digest: v2-sha256:0", 1))
    assert main(["replay", str(case)]) == 1
    assert "the trace differs from the recorded one" in capsys.readouterr().out
    assert main(["replay", str(case), "--update"]) == 0
    assert "trace digest updated" in capsys.readouterr().out
    assert case.read_text() == original
    assert main(["replay", str(case)]) == 0


def test_replay_update_adds_a_missing_digest_at_the_end_of_the_corpus_block(scenarios_dir, tmp_path,
                                                                             capsys):
    src = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    case = tmp_path / "case.yaml"
    text = re.sub(r"\n  trace_digest: \S+", "", src.read_text()).replace("corpus:\n", "corpus:\n  # mine\n")
    case.write_text(text)
    assert main(["replay", str(case), "--update"]) == 0
    assert "trace digest recorded" in capsys.readouterr().out
    digest = re.search(r"trace_digest: (\S+)", src.read_text()).group(1)
    after = case.read_text()
    head, _, rest = after.partition("\nname: ")
    assert head.endswith(f"\n  trace_digest: {digest}") and "  # mine\n" in head
    assert after.replace(f"\n  trace_digest: {digest}", "", 1) == text  # nothing else changed
    assert main(["replay", str(case)]) == 0


def test_replay_update_touches_only_the_corpus_blocks_digest(scenarios_dir, tmp_path, capsys):
    # A line that looks like the digest's, in another block (here a description's text), is the
    # user's: it stays as written, and the file is not written anew.
    src = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    case = tmp_path / "case.yaml"
    note = "description: |\n  how to update:\n  trace_digest: keep-me\n"
    original = src.read_text().replace("\nname: ", "\n" + note + "name: ", 1)
    case.write_text(original.replace("trace_digest: v2-sha256:", "trace_digest: v2-sha256:0", 1))
    assert main(["replay", str(case), "--update"]) == 0
    assert "written anew" not in capsys.readouterr().out
    assert case.read_text() == original


def test_replay_update_says_when_it_had_to_write_the_file_anew(scenarios_dir, tmp_path, capsys):
    import yaml

    src = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    data = yaml.safe_load(src.read_text())
    data["corpus"]["trace_digest"] = "v2-sha256:" + "0" * 64
    case = tmp_path / "case.yaml"
    case.write_text("# mine\n" + yaml.safe_dump(data, sort_keys=False, default_flow_style=True))
    assert main(["replay", str(case), "--update"]) == 0
    assert "written anew from what was read: comments in it are gone" in capsys.readouterr().out
    assert main(["replay", str(case)]) == 0


def test_replay_names_a_digest_of_another_scheme(scenarios_dir, tmp_path, capsys):
    """A case recorded before the digest scheme changed is not reported as a changed trace."""
    src = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    case = tmp_path / "case.yaml"
    text = re.sub(r"trace_digest: \S+", "trace_digest: sha256:" + "0" * 64, src.read_text())
    case.write_text(text)
    assert main(["replay", str(case)]) == 1
    out = capsys.readouterr().out
    assert "recorded under another digest scheme (sha256; this simharness makes v2-sha256)" in out
    assert "the simulator changed" not in out
    assert main(["replay", str(case), "--update"]) == 0
    assert case.read_text() == src.read_text()


def test_a_failed_corpus_write_keeps_the_case(scenarios_dir, tmp_path, monkeypatch, capsys):
    from simharness import fileio
    from simharness.explore import corpus

    case = tmp_path / "case.yaml"
    shutil.copy(scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml", case)
    before = case.read_text()
    text = before.replace("trace_digest: v2-sha256:", "trace_digest: v2-sha256:0", 1)
    case.write_text(text)

    def full(path, data):
        with fileio.atomic_open(path) as fh:
            fh.write("corpus:\n  sign")
            raise KeyboardInterrupt

    monkeypatch.setattr(corpus, "write_text", full)
    assert main(["replay", str(case), "--update"]) == 130
    assert case.read_text() == text and [p.name for p in tmp_path.iterdir()] == ["case.yaml"]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_run_exits_with_its_code_and_no_traceback(
        scenarios_dir, monkeypatch, capsys, sig, code):
    import simharness.run as run

    def stopped(*args, **kwargs):
        os.kill(os.getpid(), sig)
        for _ in range(1000):
            pass
        raise AssertionError("the signal did not stop the run")

    monkeypatch.setattr(run, "run_scenario", stopped)
    assert main(["run", str(scenarios_dir / ORPHEUS)]) == code
    err = capsys.readouterr().err
    assert f"interrupted by {signal.Signals(sig).name}" in err and "Traceback" not in err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are put back


def test_compare_stopped_by_sigterm_prints_the_arms_that_finished(scenarios_dir, monkeypatch, capsys):
    import simharness.compare as compare

    real = compare.run_scenario
    calls = []

    def second_arm_stopped(scenario, runtime, seed=None):
        calls.append(runtime)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
        return real(scenario, runtime, seed)

    monkeypatch.setattr(compare, "run_scenario", second_arm_stopped)
    code = main(["compare", str(scenarios_dir / ORPHEUS), "--runtime", "mstar-python",
                 "--runtime", "mstar-rust"])
    err = capsys.readouterr().err
    assert code == 143 and "arm mstar-python had finished: PASS" in err
    assert "mstar-rust had finished" not in err and "Traceback" not in err



def test_replay_update_of_a_case_it_cannot_write_is_one_line(scenarios_dir, tmp_path, monkeypatch, capsys):
    from simharness.explore import corpus

    case = tmp_path / "case.yaml"
    src = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    text = src.read_text().replace("trace_digest: v2-sha256:", "trace_digest: v2-sha256:0", 1)
    case.write_text(text)

    def refused(path, data):  # what an immutable file (chattr +i) gives even root
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(corpus, "write_text", refused)
    assert main(["replay", str(case), "--update"]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert f"{case}: cannot record the new trace digest: Operation not permitted" in line
    assert case.read_text() == text


@pytest.mark.parametrize("digest, code, says", [
    # YAML reads this as a date: refused as the loader refuses any other wrong type
    ("2020-01-01", 2, "corpus.trace_digest: expected a string"),
    ("'12345'", 1, "corpus.trace_digest '12345' is not a trace digest (expected v2-sha256:...)"),
])
def test_replay_of_a_case_whose_digest_is_not_one(scenarios_dir, tmp_path, capsys, digest, code, says):
    src = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    case = tmp_path / "case.yaml"
    case.write_text(re.sub(r"trace_digest: \S+", f"trace_digest: {digest}", src.read_text()))
    assert main(["replay", str(case), "--json"]) == code
    captured = capsys.readouterr()
    if code == 2:
        assert captured.out == "" and says in _one_line_error(captured.err)
    else:
        assert says in json.loads(captured.out)["message"]


def test_replay_of_a_case_under_an_unknown_runtime_names_the_file_and_key(scenarios_dir, tmp_path, capsys):
    src = scenarios_dir / "corpus" / "mstar-rust-prefix__loop_exit-peer.yaml"
    case = tmp_path / "case.yaml"
    case.write_text(src.read_text().replace("runtime: mstar-rust-prefix", "runtime: mstar-rusty", 1))
    assert main(["replay", str(case)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert f"{case}: corpus.runtime: unknown runtime 'mstar-rusty'; did you mean 'mstar-rust'" in line


@pytest.mark.parametrize("args, says", [
    # refused before any import work, so mstar-ai need not be installed
    (["-o", "nodir/x.yaml"], "-o nodir/x.yaml: folder nodir does not exist"),
    (["-o", "folder", "--force"], "-o folder: is a directory; expected a file path"),
    (["-o", "folder"], "-o folder: is a directory; expected a file path"),
    (["-o", "x.yaml", "--set", "model.num_timesteps=[1"],
     "--set: model.num_timesteps: cannot read value '[1': not valid YAML"),
])
def test_import_mstar_refuses_what_it_could_not_write_or_read(tmp_path, monkeypatch, capsys, args, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    assert main(["import-mstar", "bagel_cfg_parallel", *args]) == 2
    assert says in _one_line_error(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


def test_the_report_page_reruns_the_run_with_its_overrides(scenarios_dir, tmp_path, capsys):
    rep = tmp_path / "rep"
    assert main(["run", str(scenarios_dir / ORPHEUS), "--set", "workload[1].count=0",
                 "--set", "expect.per_request_kind.tts_300.decode.LLM=299", "--report", str(rep)]) == 1
    page = (rep / "report.html").read_text()
    # one name for one thing, and the one line, with the --set that made the run fail
    # the rerun command on the parameters and once over the violations, not once per violation
    assert "<dt>rerun</dt>" in page and "<p>Rerun: <code>" in page and "rerun: <code>" not in page
    assert "Replay:" not in page and "<dt>replay</dt>" not in page
    assert page.count("--set &#x27;workload[1].count=0&#x27;") >= 3
