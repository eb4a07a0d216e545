"""``simharness compare``: every arm on one scenario and seed, side by side."""

from __future__ import annotations

import json

import pytest

from simharness.cli import main
from simharness.compare import compact, first_divergence
from simharness.mstar import package

ARMS = ["mstar-python", "mstar-rust-prefix", "mstar-rust"]


def _arms():
    return ARMS + (["mstar"] if package.is_available() else [])


def _row(out: str, walk: str, node: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.startswith(f"{walk}  {node} "))
    return [c.strip() for c in line[len(f"{walk}  {node}"):].split("  ") if c.strip()]


def test_the_table_shows_50_only_for_the_prefix_runtime(scenarios_dir, capsys):
    args = ["compare", str(scenarios_dir / "bagel_cfg.yaml")]
    for arm in _arms():
        args += ["--runtime", arm]
    assert main(args) == 1
    out = capsys.readouterr().out
    header = next(ln for ln in out.splitlines() if ln.startswith("forwards per request"))
    assert header.split()[3:] == _arms()
    for node in ("LLM", "LLM_cfg_text", "LLM_cfg_img"):
        cells = _row(out, "image_gen_cfg", node)
        assert cells[:len(_arms())] == ["49 x7", "50 x7", "49 x7", "49 x7"][:len(_arms())]
        assert cells[-1] == "≠"
    assert _row(out, "image_gen_cfg", "combine_cfg") == ["49 x7"] * len(_arms())
    assert "outcome" in out and "fail" in out
    assert ("mstar-rust-prefix: event #" in out and "Forward r0 image_gen_cfg LLM rank 0 counter 48"
            in out)
    assert "dropped at loop exit only by mstar-python: latents→LLM_cfg_img" in out
    assert "DIFFER: forward counts differ on 3 (walk, node) rows" in out


def test_json_has_the_arms_and_the_differences(scenarios_dir, capsys):
    code = main(["compare", str(scenarios_dir / "bagel_cfg.yaml"), "--runtime", "mstar-python",
                 "--runtime", "mstar-rust-prefix", "--json", "--seed", "2"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [a["runtime"] for a in data["arms"]] == ["mstar-python", "mstar-rust-prefix"]
    assert all(a["seed"] == 2 and "forwards" in a and "trace_digest" in a for a in data["arms"])
    kinds = [d["kind"] for d in data["differences"]]
    assert kinds.count("forwards") == 3 and "outcome" in kinds and "first_divergence" in kinds
    fw = next(d for d in data["differences"] if d["kind"] == "forwards")
    assert fw["counts"] == {"mstar-python": "49 x7", "mstar-rust-prefix": "50 x7"}
    div = next(d for d in data["differences"] if d["kind"] == "first_divergence")
    assert div["event"]["node"] == "LLM" and div["event"]["counter"] == 48
    assert ["latents", "LLM_cfg_text"] in div["filtered"]["only_first"]


def test_arms_that_agree_exit_0(scenarios_dir, capsys):
    assert main(["compare", str(scenarios_dir / "bagel_cfg.yaml"), "--runtime", "mstar-python",
                 "--runtime", "mstar-rust"]) == 0
    out = capsys.readouterr().out
    assert "same trace as mstar-python: mstar-rust" in out and "SAME:" in out


@pytest.mark.parametrize(("args", "words"), [
    (["--runtime", "mstar-python"], "at least two --runtime arms"),
    (["--runtime", "mstar-python", "--runtime", "mstar-python"], "given twice"),
    (["--runtime", "mstar-python", "--runtime", "nope"], "unknown runtime 'nope'"),
])
def test_usage_errors_exit_2(scenarios_dir, capsys, args, words):
    assert main(["compare", str(scenarios_dir / "bagel_cfg.yaml"), *args]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_compact_cells():
    assert compact({"r0": 50, "r1": 50, "r2": 49}) == "50 x2, 49 x1"
    assert compact({"r0": 49, "r1": 49}) == "49 x2"
    assert compact({}) == "-"


def test_first_divergence_of_equal_and_shorter_traces():
    from simharness import events as ev
    a = [ev.Submitted(0.0, "r0", "k"), ev.Submitted(1.0, "r1", "k")]
    assert first_divergence(a, list(a)) is None
    d = first_divergence(a, a[:1])
    assert d["index"] == 1 and d["event"]["rid"] == "r1" and d["other"] is None


def test_a_scenario_note_is_said_once_not_once_per_arm(capsys):
    from pathlib import Path
    case = Path(__file__).parent.parent / "fidelity" / "gaps" / "loop_output_unproduced.yaml"
    main(["compare", str(case), "--runtime", "mstar-python", "--runtime", "mstar-rust"])
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note")]
    assert len(notes) == 1 and notes[0].startswith("note: ") and "debug" in notes[0]
