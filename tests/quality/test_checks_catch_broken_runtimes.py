"""Every check fails when the runtime under test is broken in the way it exists to catch."""

from __future__ import annotations

from simharness.run import run_scenario
from tests.helpers import BROKEN as B
from tests.helpers import build, checks_failed, node, raw_scenario, split_loop


def _decode_loop(max_iters=4, expect=None):
    llm = node("LLM", ["text_inputs"], [("new_token", "client"), ("text_inputs", "LLM")])
    raw = raw_scenario({"decode": {"loop": {"name": "decode_loop", "max_iters": max_iters, "body": llm}}},
                       [{"node_names": ["LLM"], "ranks": [0]}],
                       requests={"chat": {"walks": ["decode"]}},
                       workload=[{"request": "chat", "count": 2, "concurrency": 2}])
    if expect:
        raw["expect"] = {"forwards_per_request": expect}
    return build(raw)


def test_forwards_catches_a_loop_that_stops_early():
    rep = run_scenario(_decode_loop(), B + "OffByOneLoop")
    fw = [v for v in rep.violations if v.check == "forwards"]
    assert fw and all("3 forwards, expected 4: stopped after loop counter 2" in v.message for v in fw)
    assert run_scenario(_decode_loop(), "mstar-python").violations == []


def test_expect_catches_counts_the_scenario_rules_out():
    sc = _decode_loop(expect={"decode": {"LLM": 4}})
    assert "expect" in checks_failed(run_scenario(sc, B + "OffByOneLoop"))
    assert run_scenario(sc, "mstar-python").violations == []
    wrong = _decode_loop(expect={"decode": {"LLM": 5}})
    rep = run_scenario(wrong, "mstar-python")
    assert checks_failed(rep) == {"expect"}
    assert "expected 5 forwards of LLM in decode per request" in rep.violations[0].message


def test_loop_exit_catches_a_loop_that_routes_its_loop_backs_after_the_end():
    rep = run_scenario(_decode_loop(), B + "NeverDropsLoopBacks")
    exits = [v for v in rep.violations if v.check == "loop_exit"]
    assert len(exits) == 2 and "text_inputs→LLM" in exits[0].message


def test_loop_exit_catches_the_drift_in_a_two_rank_split_loop():
    sc = build(split_loop())
    assert run_scenario(sc, "mstar-python").violations == []
    assert run_scenario(sc, "mstar-rust").violations == []
    rep = run_scenario(sc, "mstar-rust-prefix")
    assert "loop_exit" in checks_failed(rep)
    v = next(v for v in rep.violations if v.check == "loop_exit")
    assert (v.node, v.rank) == ("B", 1) and "x→A (sent to rank 0)" in v.message
    # The stray pass's y reaches rank 1 after the request was removed there: drain reports the
    # drop per request and what stays parked at the end.
    drains = [v.message for v in rep.violations if v.check == "drain"]
    assert drains.count("rank 1 dropped y from A@0 at counter 0: arrived after the request was removed "
                        "on this rank; parked in unprocessed messages forever") == 2
    assert ("rank 1 ends with messages parked for removed requests (never processed, never freed): "
            "1 input_signals message for r0 and 1 input_signals message for r1") in drains


def test_drain_catches_state_left_behind(bagel):
    rep = run_scenario(bagel, B + "LeavesLoopState")
    drains = [v for v in rep.violations if v.check == "drain"]
    assert drains and any("loop 'denoise'" in v.message and "left at counter" in v.message
                          for v in drains)


def test_drain_catches_stray_outputs_held_at_teardown(bagel):
    rep = run_scenario(bagel, "mstar-rust-prefix")
    assert any(v.check == "drain" and "combine_cfg's current slot" in v.message for v in rep.violations)


def test_liveness_catches_a_lost_edge_and_names_what_waits(bagel):
    rep = run_scenario(bagel, B + "LosesCrossRankEdges")
    hangs = [v for v in rep.violations if v.check == "liveness"]
    assert len(hangs) == 7
    v = hangs[0]
    assert v.request == "r0" and v.walk == "image_gen_cfg"
    chain = v.details["chain"]
    waiting = {(c["node"], c["rank"]): c["missing"] for c in chain}
    assert ("combine_cfg", 0) in waiting and waiting[("combine_cfg", 0)]


def test_liveness_reports_a_timeout_while_other_requests_keep_running():
    from simharness.scenario.loader import load_scenario as load
    from tests.conftest import SCENARIOS
    sc = load(SCENARIOS / "bagel_cfg_counter.yaml",
              ["limits.request_timeout_s=3", "workload=[{request: t2i_two_images, count: 2, concurrency: 2}]",
               "graph.requests.other={walks: [prefill_text, image_gen_cfg], inputs: [text_inputs]}",
               "workload[1]={request: other, count: 1}"])
    rep = run_scenario(sc, "mstar-rust-prefix")
    reasons = {v.details["reason"] for v in rep.violations if v.check == "liveness"}
    assert "timeout" in reasons


def test_determinism_catches_an_unseeded_runtime(bagel):
    rep = run_scenario(bagel, B + "UnseededOrder", check_determinism=True)
    assert "determinism" in checks_failed(rep)
    ok = run_scenario(bagel, "mstar-python", check_determinism=True)
    assert "determinism" not in checks_failed(ok)
