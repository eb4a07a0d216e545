"""The HTML report, the Perfetto trace and the story they read from the trace."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import pytest

from simharness.cli import main
from simharness.report.story import build_story, chosen_request, violation_time
from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS


@pytest.fixture(scope="module")
def prefix_run(bagel):
    return run_scenario(bagel, "mstar-rust-prefix")


@pytest.fixture(scope="module")
def clean_run(bagel):
    return run_scenario(bagel, "mstar-python")


@pytest.fixture(scope="module")
def hang_run():
    return run_scenario(load_scenario(SCENARIOS / "bagel_cfg_counter.yaml"), "mstar-rust-prefix")


# ----------------------------------------------------------------------------- the story


def test_story_finds_the_fiftieth_pass_and_the_stray_loop_backs(prefix_run):
    story = build_story(prefix_run)
    extra = [f for i, f in story.forwards if i in story.extra]
    # the three branches of each of the 7 requests ran once more, at loop counter 0
    assert Counter(f.node for f in extra) == {"LLM": 7, "LLM_cfg_text": 7, "LLM_cfg_img": 7}
    assert {f.counter for f in extra} == {0}
    assert {story.pass_of[i] for i, _f in story.forwards if i in story.extra} == {(50, 49)}
    strays = [m for m in story.messages if m.stray]
    assert {(m.src_node, m.kind, m.dst_rank) for m in strays} == {
        ("combine_cfg", "sibling", 0), ("combine_cfg", "peer", 1), ("combine_cfg", "peer", 2)}
    assert all(m.label == "latents, time_index" for m in strays)
    assert chosen_request(story) == "r0"


def test_story_misses_the_forwards_the_check_finds_missing(bagel):
    from tests.helpers import BROKEN

    report = run_scenario(bagel, BROKEN + "OffByOneLoop")  # each loop one iteration short
    story = build_story(report)
    short = {(v.walk, v.node, v.rank, v.request): v.details["expected"] - v.details["count"]
             for v in report.violations if v.check == "forwards"}
    assert story.missing == short and sum(short.values()) == 28 and story.extra == set()


def test_a_correct_runtime_has_no_extra_pass_and_no_stray(clean_run):
    story = build_story(clean_run)
    assert story.extra == set() and story.missing == {}
    assert not any(m.stray for m in story.messages)
    # every peer message was taken in
    assert all(m.t_recv is not None for m in story.messages)


def test_violation_times_point_at_the_event(prefix_run, hang_run):
    story = build_story(prefix_run)
    fwd = next(v for v in prefix_run.violations if v.check == "forwards" and v.request == "r0")
    extra = next(f for i, f in story.forwards if i in story.extra and f.rid == "r0" and f.node == fwd.node)
    assert violation_time(fwd, story) == extra.t
    hang = build_story(hang_run)
    live = next(v for v in hang_run.violations if v.check == "liveness")
    assert violation_time(live, hang) == next(s.t for s in hang.stalls if s.rid == live.request)


# ----------------------------------------------------------------------------- trace-event format

PHASES = {"X", "B", "E", "i", "I", "s", "t", "f", "C", "M"}


def validate_trace_events(doc: dict) -> list[str]:
    """Problems with a Chrome trace-event document (JSON object format); empty when valid."""
    bad = []
    if not isinstance(doc.get("traceEvents"), list):
        return ["traceEvents is not a list"]
    flows: dict[int, list[str]] = {}
    for n, e in enumerate(doc["traceEvents"]):
        ph = e.get("ph")
        if ph not in PHASES:
            bad.append(f"#{n}: unknown phase {ph!r}")
            continue
        if not isinstance(e.get("pid"), int) or e["pid"] <= 0:
            bad.append(f"#{n}: pid {e.get('pid')!r} (must be a positive integer)")
        if not isinstance(e.get("name"), str):
            bad.append(f"#{n}: no name")
        if ph != "M" and not isinstance(e.get("ts"), int | float):
            bad.append(f"#{n}: no ts")
        if ph == "X" and not (isinstance(e.get("dur"), int | float) and e["dur"] >= 0):
            bad.append(f"#{n}: complete event without a duration")
        if ph in ("X", "i", "s", "f") and not isinstance(e.get("tid"), int):
            bad.append(f"#{n}: no tid")
        if ph == "i" and e.get("s") not in ("g", "p", "t"):
            bad.append(f"#{n}: instant scope {e.get('s')!r}")
        if ph == "C" and not all(isinstance(v, int | float) for v in e.get("args", {}).values()):
            bad.append(f"#{n}: counter with a non-numeric value")
        if ph == "M" and e["name"] in ("process_name", "thread_name") and not e.get("args", {}).get("name"):
            bad.append(f"#{n}: metadata without args.name")
        if ph in ("s", "f"):
            flows.setdefault(e.get("id"), []).append(ph)
    for fid, phases in flows.items():
        if sorted(phases) != ["f", "s"]:
            bad.append(f"flow {fid}: phases {phases}")
    return bad


def test_the_validator_rejects_broken_traces():
    assert validate_trace_events({"traceEvents": [{"ph": "X", "pid": 0, "tid": 1, "ts": 0, "name": "a"}]})
    assert validate_trace_events({"traceEvents": [{"ph": "s", "pid": 1, "tid": 1, "ts": 0, "id": 3,
                                                   "name": "a"}]})
    assert validate_trace_events({"traceEvents": [{"ph": "Q", "pid": 1}]})


def test_perfetto_trace_shows_the_bug(prefix_run, tmp_path, capsys):
    from simharness.report.perfetto import write_perfetto

    path = tmp_path / "t.json"
    write_perfetto(prefix_run, path)
    doc = json.loads(path.read_text())
    assert validate_trace_events(doc) == []
    evs = doc["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in evs if e["name"] == "process_name"}
    assert names == {1: "rank 0", 2: "rank 1", 3: "rank 2", 4: "run"}
    tracks = {(e["pid"], e["args"]["name"]) for e in evs if e["name"] == "thread_name"}
    assert {(2, "LLM_cfg_text"), (3, "LLM_cfg_img"), (1, "combine_cfg"), (1, "LLM")} <= tracks
    # slices carry request, walk, loop counter and pass; the 50th pass is marked
    # (a batch of several requests lists each request's forward)
    fwds = [(e, f) for e in evs if e["ph"] == "X" and e["pid"] <= 3 and e["tid"] < 998
            for f in e["args"].get("forwards", [e["args"]])]
    assert {"request", "pass", "loop_counter", "forward", "extra"} <= set(fwds[0][1])
    extra = [(e, f) for e, f in fwds if f["extra"]]
    assert len(extra) == 21
    assert all(e["name"].startswith("EXTRA ") and e["args"]["walk"] == "image_gen_cfg"
               and f["loop_counter"] == 0 and f["forward"] == "50 of 49" for e, f in extra)
    assert not [e for e, f in fwds if e["name"].startswith("EXTRA ")
                and not any(g["extra"] for g in e["args"].get("forwards", [e["args"]]))]
    # flow arrows for cross-rank and cross-graph messages; strays in their own category
    starts = [e for e in evs if e["ph"] == "s"]
    assert len(starts) > 1000
    stray = [e for e in starts if e["cat"] == "stray"]
    assert len(stray) == 21 and {e["pid"] for e in stray} == {1}
    cross_rank = {e["id"] for e in starts}
    ends = {e["id"]: e for e in evs if e["ph"] == "f"}
    assert any(ends[i]["pid"] != s["pid"] for s in starts for i in [s["id"]] if i in cross_rank)
    # a violation marker at the time of each violation, on the rank it names
    marks = [e for e in evs if e["ph"] == "i" and e["cat"] == "violation"]
    assert len(marks) == len(prefix_run.violations)
    first = next(e for e in marks if e["args"]["check"] == "loop_exit" and e["args"]["request"] == "r0")
    assert first["pid"] == 1 and abs(first["ts"] - 4.288135567 * 1e6) < 1
    counters = {e["name"] for e in evs if e["ph"] == "C"}
    assert counters == {"messages queued", "requests in flight"}


def test_a_clean_run_has_no_violation_marker(clean_run, tmp_path):
    from simharness.report.perfetto import write_perfetto

    write_perfetto(clean_run, tmp_path / "t.json")
    evs = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert not [e for e in evs if e["ph"] == "i"]
    assert not [e for e in evs if e["ph"] == "X" and e["name"].startswith("EXTRA")]


def test_trace_option_writes_perfetto_or_event_log(tmp_path, capsys):
    bagel = str(SCENARIOS / "bagel_cfg.yaml")
    assert main(["run", bagel, "--runtime", "mstar-rust-prefix", "--trace", str(tmp_path / "t.json")]) == 1
    err = capsys.readouterr().err
    assert f"trace written to {tmp_path / 't.json'} (Chrome trace-event format" in err
    assert validate_trace_events(json.loads((tmp_path / "t.json").read_text())) == []
    assert main(["run", bagel, "--trace", str(tmp_path / "t.jsonl")]) == 0
    assert "event log" in capsys.readouterr().err
    assert json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])["event"] == "Submitted"
    assert main(["run", bagel, "--trace", str(tmp_path / "t.txt")]) == 2
    assert "expected FILE.json" in capsys.readouterr().err
    assert not (tmp_path / "t.txt").exists()


# ----------------------------------------------------------------------------- HTML


def _sections(html: str) -> set[str]:
    return set(re.findall(r'<section id="([^"]+)"', html))


def test_run_report_page(tmp_path, capsys):
    out = tmp_path / "rep"
    code = main(["run", str(SCENARIOS / "bagel_cfg.yaml"), "--runtime", "mstar-rust-prefix",
                 "--report", str(out)])
    assert code == 1
    assert sorted(p.name for p in out.iterdir()) == [
        ".simharness-report", "report.html", "summary.json", "trace.jsonl", "trace.perfetto.json"]
    html = (out / "report.html").read_text()
    assert {"parameters", "forwards", "violations", "timeline-section", "messages-section",
            "utilisation", "console"} <= _sections(html)
    assert "waitfor-section" not in _sections(html)  # no hang here
    # extra passes highlighted: every 50 of the three branches, and only those
    assert len(re.findall(r'<td class="extra" title="extra: expected 49">50</td>', html)) == 21
    assert 'class="missing"' not in html
    # the console says the same things, word for word
    console = capsys.readouterr().out
    assert "FAIL: 70 violations" in html and "FAIL: 70 violations" in console
    # the replay command, the pictures inline, nothing fetched from a network
    assert "simharness run" in html and "--runtime mstar-rust-prefix" in html
    # pictures inlined as SVG (a browser zooms them), each in a figure that names it
    assert len(re.findall(r'<figure id="[a-z-]+" class="plot" role="img" aria-label="[^"]*"><svg', html)) == 3
    assert "<img" not in html and "data:image/png" not in html
    assert not re.search(r'src="(https?:)?//', html) and not re.search(r'<link[^>]*href="(https?:)?//', html)
    # the trace written beside the page, linked, and how to open it
    assert '<a href="trace.perfetto.json">' in html and "ui.perfetto.dev" in html
    assert "trace: rank 0 › violations, ts " in html
    # one rerun command on the page's violations, not one per violation
    assert html.count("rerun: <code>") == 0


def test_hang_report_draws_the_wait_for_graph(hang_run):
    from simharness.report.html import run_page

    html = run_page(hang_run)
    assert "waitfor-section" in _sections(html)
    assert '<figure id="waitfor"' in html


def test_values_are_escaped(clean_run):
    import dataclasses

    import msgspec

    from simharness.report.html import run_page

    scenario = msgspec.structs.replace(clean_run.scenario, name="<b>x</b>")
    rep = dataclasses.replace(clean_run, scenario=scenario)
    html = run_page(rep)
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html


def test_compare_and_replay_reports(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(SCENARIOS / "bagel_cfg.yaml"), "--runtime", "mstar-python",
                 "--runtime", "mstar-rust-prefix", "--report", str(out)]) == 1
    html = (out / "report.html").read_text()
    assert "<th>mstar-python</th><th>mstar-rust-prefix</th>" in html
    assert html.count('<td class="extra">50 x7</td>') == 3
    assert json.loads((out / "compare.json").read_text())["differences"]
    case = sorted((SCENARIOS / "corpus").glob("mstar-rust-prefix__loop_exit-*.yaml"))[0]
    rp = tmp_path / "rp"
    assert main(["replay", str(case), "--report", str(rp)]) == 0
    html = (rp / "report.html").read_text()
    assert "still fails as recorded" in html and '<figure id="messages"' in html
    assert json.loads((rp / "replay.json").read_text())[0]["ok"] is True


def test_replay_runs_each_case_once_for_its_verdict_and_its_report(tmp_path, capsys, monkeypatch):
    from simharness.engine.simulation import Simulation

    runs = []
    real_run = Simulation.run
    monkeypatch.setattr(Simulation, "run", lambda self: runs.append(self) or real_run(self))
    cases = sorted((SCENARIOS / "corpus").glob("mstar-rust-prefix__loop_exit-*.yaml"))
    assert main(["replay", *map(str, cases), "--json", "--report", str(tmp_path / "rp")]) == 0
    # the verdict runs the real stack and our model of it besides; the case's own runtime once
    assert len([r for r in runs if r.runtime_name == "mstar-rust-prefix"]) == len(cases) == 2
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert json.loads((tmp_path / "rp" / "replay.json").read_text()) == printed


def test_fuzz_report(tmp_path, capsys):
    out = tmp_path / "fz"
    main(["fuzz", "--runtime", "mstar-rust-prefix", "--examples", "6", "--no-write", "--no-shrink",
          "--report", str(out)])
    html = (out / "report.html").read_text()
    assert {"parameters", "cases", "coverage", "console"} <= _sections(html)
    assert '<figure id="coverage-chart"' in html
    assert json.loads((out / "fuzz.json").read_text())["examples"] == 6


def test_confirm_page_puts_sim_and_real_side_by_side(clean_run, prefix_run):
    from simharness.commands.confirm import page as confirm_page
    from simharness.report.summary import build_summary

    a, b = build_summary(clean_run), build_summary(prefix_run)
    html = confirm_page(clean_run, prefix_run, a, b, False, [{"what": "forwards"}], "console text")
    assert "<th>sim</th><th>real</th>" in html
    assert html.count('<td class="extra">50</td>') == 21


def test_a_report_folder_written_by_someone_else_is_refused_before_running(tmp_path, capsys):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert main(["compare", str(SCENARIOS / "bagel_cfg.yaml"), "--runtime", "mstar-python",
                 "--runtime", "mstar-rust", "--report", str(foreign)]) == 2
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_matplotlib_is_imported_only_for_a_report():
    code = ("import sys; from simharness.cli import main; "
            f"main(['run', {str(SCENARIOS / 'bagel_cfg.yaml')!r}, '--json']); "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported without --report'")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_the_message_diagram_reaches_the_inputs_dropped_for_its_request():
    from simharness.report import plots

    busy = load_scenario(SCENARIOS / "bagel_cfg.yaml",
                         ["workload=[{request: t2i, count: 16, concurrency: 8}]"])
    story = build_story(run_scenario(busy, "mstar-rust-prefix"))
    # a stray's reply lands after its request was removed: dropped (parked for ever)
    t, rank, rid, names, why = story.dropped[0]
    assert "after the request was removed" in why
    _shown, _t0, t1, _skipped = plots.message_window(story, rid)
    assert t1 >= t
    svg, caption = plots.message_diagram(story, rid)
    assert "<svg" in svg and f"request {rid}" in caption
