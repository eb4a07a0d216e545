"""A verdict for every finding (`simharness.explore.verdict`), and the corpus found from the
project a command runs in (`simharness.explore.corpus.locate`)."""

from __future__ import annotations

from pathlib import Path

from simharness.explore.corpus import cases, locate
from simharness.explore.verdict import FAULTS, VERDICTS, faults_class, verdict
from simharness.runtime import registry
from simharness.runtime.profiles import MstarPython
from simharness.scenario import load_scenario
from tests.helpers import build, needs_mstar_stack, split_loop

CORPUS = Path(__file__).resolve().parents[2] / "scenarios" / "corpus"


def stack(test):
    """The marks of a test that runs the real stack (`needs_mstar_stack`)."""
    for mark in needs_mstar_stack():
        test = mark(test)
    return test


def test_every_corpus_case_carries_a_verdict():
    for case in cases(CORPUS):
        v = case._meta.verdict
        assert v is not None, f"{case.path.name}: no corpus.verdict (simharness replay --update)"
        assert v["mstar"] in VERDICTS and v["faults"] in FAULTS and v["text"]


def test_faults_are_classed_by_what_mstar_promises():
    raw = split_loop()
    assert faults_class(build(raw)) == ("none", [])
    raw["schedule"] = {"link_jitter_us": 100.0}
    assert faults_class(build(raw)) == ("transport", [])
    raw["faults"] = [{"kind": "drop", "message": "input_signals", "nth": 1}]
    assert faults_class(build(raw)) == ("beyond", ["drop"])


def test_without_the_stack_a_verdict_is_unverified_and_says_why(monkeypatch):
    monkeypatch.setattr(registry, "runnable", lambda: ["mstar-python"])
    v = verdict(build(split_loop()), "mstar-rust-prefix", "loop_exit:peer")
    assert v.mstar == "unverified" and "not installed" in v.text()


@stack
def test_the_recorded_verdicts_are_what_the_real_stack_says_now():
    for case in cases(CORPUS):
        sc = load_scenario(case.path)
        meta = case._meta
        assert verdict(sc, meta.runtime, meta.signature, meta.against).to_json() == meta.verdict, \
            case.path.name


@stack
def test_each_verdict_on_a_case_that_shows_it(monkeypatch):
    drift = load_scenario(CORPUS / "mstar-rust-prefix__loop_exit-peer.yaml")
    assert verdict(drift, "mstar-rust-prefix", "loop_exit:peer").mstar == "runtime-specific"
    real = load_scenario(CORPUS / "mstar-python__liveness-hang-edge.yaml")
    assert verdict(real, "mstar-python", "liveness:hang-edge").mstar == "real"
    # the drift claimed for our model: the model itself passes, so it is not called ours
    v = verdict(drift, "mstar-python", "loop_exit:peer")
    assert v.mstar == "runtime-specific"
    # our model fails a check the real stack does not (it hangs instead): a bug of ours. The
    # model is given one on purpose: it ends a stream partition on any rank's final chunk
    gap = load_scenario(Path(__file__).resolve().parents[1] / "fidelity" / "gaps" /
                        "tp_sp_stream_consumer.yaml")
    assert verdict(gap, "mstar-python", "streams:passes").mstar == "runtime-specific"
    from tests.fidelity.wrong import ModelEndsOnAnyFinalChunk

    monkeypatch.setattr(MstarPython, "parts", ModelEndsOnAnyFinalChunk.parts)
    v = verdict(gap, "mstar-python", "streams:passes")
    assert v.mstar == "model-only" and v.stack and v.stack.startswith("liveness:")
    assert v.text().startswith(f"MODEL-ONLY: the real stack fails otherwise ({v.stack})")
    sc = load_scenario(Path(__file__).resolve().parents[1] / "fidelity" / "gaps" /
                       "successor_speculation.yaml")
    # the model passes where the stack fails: the stack's failure is real mstar behaviour
    assert verdict(sc, "mstar", "forwards:extra-after-loop").mstar == "real"


@stack
def test_a_divergence_from_the_real_stack_is_the_models():
    raw = split_loop()
    v = verdict(build(raw), "mstar-python", "diff:forwards", against="mstar")
    assert v.mstar == "model-only" and "MODEL-ONLY" in v.text()
    v = verdict(build(raw), "mstar-rust-prefix", "diff:forwards", against="mstar-python")
    assert v.mstar == "runtime-specific"


def test_the_corpus_is_the_projects_from_any_folder_in_it(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    (project / "scenarios" / "corpus").mkdir(parents=True)
    (project / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(project / "deep" / "er")
    where = locate()
    assert where.how == "found" and where.path.resolve() == (project / "scenarios" / "corpus").resolve()
    assert "0 cases; found from" in where.describe()
    # a scenario file names its own project, wherever the command runs
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("")
    (other / "s.yaml").write_text("")
    got = locate(other / "s.yaml")
    assert got.how == "project" and got.path.resolve() == (other / "scenarios" / "corpus").resolve()
    # in no project at all: beside the folder itself (no marker anywhere above it here)
    from simharness.explore import corpus as corpus_module

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.setattr(corpus_module, "PROJECT_MARKERS", ("no-such-marker-file",))
    here = locate()
    assert here.how == "here" and here.path.resolve() == (empty / "scenarios" / "corpus").resolve()
    assert "created with the first case" in here.describe()


def test_fuzz_from_a_subfolder_knows_the_projects_cases(tmp_path, capsys, monkeypatch):
    from simharness.cli import main

    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    monkeypatch.chdir(project)
    args = ["fuzz", "--runtime", "mstar-rust-prefix", "--seed", "2", "--examples", "50", "--no-shrink"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "none yet for the project" in err and "created the corpus scenarios/corpus" in err
    monkeypatch.chdir(project / "sub")
    assert main(args) == 0  # every failure known: the project's corpus was found from below
    err = capsys.readouterr().err
    assert "found from" in err and str(project / "sub") in err


@stack
def test_replay_update_rewrites_a_stale_verdict_in_place(tmp_path):
    """The verdict block is replaced where it stands; every other line of the file (comments,
    note, layout) is kept."""
    from simharness.explore.corpus import replay

    src = CORPUS / "mstar-python__drain-dropped.yaml"
    case = tmp_path / src.name
    case.write_text(src.read_text().replace("    mstar: real", "    mstar: model-only"))
    r = replay(case, update=True)
    assert r.ok and "verdict recorded" in r.message
    assert case.read_text() == src.read_text()
