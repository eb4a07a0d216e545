"""The zmq backend: the shipped BAGEL scenarios on real processes, hangs, a killed rank, confirm.

Each test starts one process per rank plus a conductor (a few seconds of start-up, mostly
importing torch) and runs with tiny compute (1/20 of the scenario's time).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from real_backends.launcher import RealOptions, run_real
from simharness.cli import main
from simharness.report.summary import build_summary, collect_forwards
from simharness.run import run_scenario
from simharness.scenario.loader import load_scenario
from tests.real.conftest import FAST, TWO_REQUESTS

pytestmark = pytest.mark.zmq

BRANCHES = ("LLM", "LLM_cfg_text", "LLM_cfg_img")


def real(name: str, runtime: str, *overrides: str, **opts):
    from tests.conftest import SCENARIOS

    sc = load_scenario(SCENARIOS / name, list(overrides))
    opts.setdefault("time_scale", FAST)
    return run_real(sc, runtime, options=RealOptions(**opts))


def per_node(report) -> dict[tuple[str, str], set[int]]:
    out: dict[tuple[str, str], set[int]] = {}
    for (walk, node, _rank, _rid), counters in collect_forwards(report.result.events).items():
        out.setdefault((walk, node), set()).add(len(counters))
    return out


def test_bagel_cfg_rust_prefix_runs_the_stray_pass_on_real_processes(no_orphans):
    report = real("bagel_cfg.yaml", "mstar-rust-prefix", TWO_REQUESTS)
    counts = per_node(report)
    for node in BRANCHES:
        assert counts[("image_gen_cfg", node)] == {50}, node
    assert counts[("image_gen_cfg", "combine_cfg")] == {49}
    summary = build_summary(report)
    assert summary["backend"] == "zmq"
    assert summary["requests"]["completed"] == 2
    checks = {v["check"] for v in summary["violations"]}
    assert {"forwards", "loop_exit"} <= checks
    # every forward is recorded with where, what, when: (walk, node, rank, request, counter, start, end)
    fwd = [e for e in report.result.events if type(e).__name__ == "Forward"]
    assert all(0 <= f.start <= f.t for f in fwd)
    assert not os.path.exists(report.extra["run_dir"])


def test_bagel_cfg_mstar_python_passes_on_real_processes(no_orphans):
    report = real("bagel_cfg.yaml", "mstar-python", TWO_REQUESTS)
    counts = per_node(report)
    for node in (*BRANCHES, "combine_cfg"):
        assert counts[("image_gen_cfg", node)] == {49}, node
    assert report.violations == []
    assert report.extra["end"] == "completed"


def test_counter_scenario_hangs_and_every_process_is_reaped(no_orphans):
    from tests.real.conftest import child_pids

    before = len(child_pids())
    report = real("bagel_cfg_counter.yaml", "mstar-rust-prefix",
                  "workload=[{request: t2i_two_images, count: 1, concurrency: 1}]")
    assert len(child_pids()) == before
    liveness = [v for v in report.violations if v.check == "liveness"]
    assert len(liveness) == 1
    v = liveness[0]
    assert v.request == "r0" and v.details["reason"] == "quiescence"
    assert v.details["gate"] and v.details["missing"] == ["latents (walk start)", "time_index (walk start)"]
    assert v.node in BRANCHES
    assert report.result.outcomes == {"r0": "hung"}
    assert not os.path.exists(report.extra["run_dir"])


def test_a_request_queued_behind_a_hang_runs_and_hangs_on_its_own(no_orphans):
    # One slot: r1 waits while r0 hangs. Aborting r0 admits r1, which runs into the same hang
    # (it used to be reported as never admitted at r0's quiescence); the simulation agrees.
    sets = ("workload=[{request: t2i_two_images, count: 2, concurrency: 2}]",
            "placement.max_concurrent_requests=1")
    report = real("bagel_cfg_counter.yaml", "mstar-rust-prefix", *sets)
    from tests.conftest import SCENARIOS
    sim = run_scenario(load_scenario(SCENARIOS / "bagel_cfg_counter.yaml", list(sets)), "mstar-rust-prefix")
    for rep in (report, sim):
        hangs = [v for v in rep.violations if v.check == "liveness"]
        assert [(v.request, v.walk, v.details["reason"]) for v in hangs] == [
            ("r0", "image_gen_cfg", "quiescence"), ("r1", "image_gen_cfg", "quiescence")]
        assert rep.result.outcomes == {"r0": "hung", "r1": "hung"}


def test_a_deadline_turns_a_hang_into_a_timeout_report(no_orphans):
    # A deadline shorter than the run: the request is reported with each rank's state.
    report = real("bagel_cfg.yaml", "mstar-python", "workload=[{request: t2i, count: 1, concurrency: 1}]",
                  deadline_s=0.3)
    liveness = [v for v in report.violations if v.check == "liveness"]
    assert report.extra["end"] == "deadline"
    assert [v.details["reason"] for v in liveness] == ["timeout"]
    assert report.result.outcomes == {"r0": "timeout"}


def test_a_killed_rank_is_reported_and_the_run_ends_cleanly(no_orphans):
    report = real("bagel_cfg.yaml", "mstar-python", TWO_REQUESTS, kill=(1, 0.5))
    crash = [v for v in report.violations if v.check == "crash"]
    assert len(crash) == 1
    c = crash[0]
    assert c.rank == 1 and c.details["how"] == "killed by SIGKILL"
    assert c.details["last_event"] and c.details["last_event"]["rank"] == 1
    assert "rank 1" in c.message and "last event" in c.message
    assert report.extra["end"] == "crash"
    assert set(report.result.outcomes.values()) <= {"failed", "completed"}
    assert "failed" in report.result.outcomes.values()
    assert not os.path.exists(report.extra["run_dir"])


def test_cli_zmq_json_is_the_only_thing_on_stdout(capsys, no_orphans):
    from tests.conftest import SCENARIOS

    rc = main(["run", str(SCENARIOS / "bagel_cfg.yaml"), "--backend", "zmq", "--time-scale", str(FAST),
               "--set", TWO_REQUESTS, "--runtime", "mstar-python", "--json"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert rc == 0 and summary["backend"] == "zmq" and summary["outcome"] == "pass"
    assert summary["device"] == "cpu"
    # start-up is not silent: stderr says when the processes are ready
    assert "zmq: 4 processes ready in" in captured.err


def test_confirm_agrees_on_the_stray_pass(capsys, no_orphans, tmp_path):
    from tests.conftest import SCENARIOS

    rc = main(["confirm", str(SCENARIOS / "bagel_cfg.yaml"), "--runtime", "mstar-rust-prefix",
               "--time-scale", str(FAST), "--set", TWO_REQUESTS, "--json", "--report", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    html = (tmp_path / "report.html").read_text()
    assert "<th>sim</th><th>real</th>" in html and html.count('<figure id="timeline"') == 2
    assert json.loads((tmp_path / "confirm.json").read_text()) == doc
    assert set(doc) == {"sim", "real", "agree", "differences"}
    assert doc["agree"] is True and rc == 0, doc["differences"]
    assert doc["sim"]["backend"] == "sim" and doc["real"]["backend"] == "zmq"
    real_counts = Counter((f["node"], f["count"]) for f in doc["real"]["forwards"])
    assert real_counts[("LLM_cfg_text", 50)] == 2


def test_confirm_submits_a_mixed_phase_s_kinds_in_turn(capsys, no_orphans):
    # A phase that lists kinds submits request i as kinds[i % n] on both backends.
    from tests.conftest import SCENARIOS

    rc = main(["confirm", str(SCENARIOS / "bagel_mixed.yaml"), "--time-scale", str(FAST),
               "--set", "workload=[{request: [chat, t2i], count: 2, concurrency: 2}]", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["agree"] is True and rc == 0, doc["differences"]
    walks = {(f["request"], f["walk"]) for f in doc["real"]["forwards"]}
    assert ("r1", "image_gen_cfg") in walks and ("r0", "image_gen_cfg") not in walks


def test_confirm_table_and_disagreement_exit_code(capsys):
    from real_backends.confirm import compare, render

    sim = {"scenario": "s", "runtime": "x", "seed": 0, "outcome": "pass", "sim_time_s": 1.0,
           "wall_s": 0.1, "requests": {"submitted": 1, "completed": 1, "hung": 0, "failed": 0},
           "forwards": [{"walk": "w", "node": "A", "rank": 0, "request": "r0", "count": 2,
                         "loop_counters": [0, 1]}], "violations": []}
    real_ = json.loads(json.dumps(sim))
    real_["forwards"][0].update(count=3, loop_counters=[0, 1, 0])
    agree, diffs = compare(sim, real_)
    assert not agree and diffs[0]["what"] == "forwards"
    render(sim, real_, agree, diffs, __import__("sys").stdout)
    assert "DISAGREE" in capsys.readouterr().out


@pytest.mark.parametrize("override, key", [
    ("faults=[{kind: crash, rank: 1, at_ms: 5}]", "faults"),
    ("schedule={service_jitter: 0.1}", "schedule"),
])
def test_scenario_perturbations_are_refused_not_ignored(capsys, override, key):
    from tests.conftest import SCENARIOS

    rc = main(["run", str(SCENARIOS / "bagel_cfg.yaml"), "--backend", "zmq", "--set", override])
    err = capsys.readouterr().err
    assert rc == 2 and f"bagel_cfg.yaml: {key}: the zmq backend does not" in err


def test_the_real_stack_is_refused_on_real_processes(capsys):
    """`--runtime mstar` restates mstar's loops over the simulated clock: the zmq backend says
    so in one line, exit 2, before it starts a process."""
    from simharness.mstar.stack.runtime import MstarStack
    from tests.conftest import SCENARIOS

    if not MstarStack.available():
        pytest.skip("mstar-ai's worker and conductor do not import here")

    path = str(SCENARIOS / "bagel_cfg.yaml")
    for argv in (["run", path, "--runtime", "mstar", "--backend", "zmq"],
                 ["confirm", path, "--runtime", "mstar"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "runs only in the simulation" in err and "Traceback" not in err
