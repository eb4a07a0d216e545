"""Each mechanism of the serving layouts, broken on purpose, is caught by its check."""

from __future__ import annotations

import pytest

from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS
from tests.helpers import BROKEN as B
from tests.helpers import build, checks_failed, node, raw_scenario


def _load(name, *sets):
    return load_scenario(SCENARIOS / f"{name}.yaml", list(sets))


SMALL = "workload=[{request: tts, count: 3, concurrency: 2}]"


def test_a_lost_final_item_is_caught_by_streams():
    sc = _load("orpheus", SMALL)
    assert run_scenario(sc, "mstar-python").violations == []
    rep = run_scenario(sc, B + "LosesFinalItem")
    msgs = [v.message for v in rep.violations if v.check == "streams"]
    assert msgs and any("never consumed" in m or "lost or duplicated" in m for m in msgs)


def test_a_duplicate_final_chunk_is_caught_by_streams():
    rep = run_scenario(_load("orpheus", SMALL), B + "DuplicatesFinalChunk")
    msgs = [v.message for v in rep.violations if v.check == "streams"]
    assert any("final" in m for m in msgs), msgs


def _tp_chat():
    """A TP2 decode loop that emits every token to the client (a Thinker on two GPUs)."""
    llm = node("LLM", ["text_inputs"], [("new_token", "client"), ("text_inputs", "LLM")])
    loop = {"loop": {"name": "decode_loop", "max_iters": 64, "stop": {}, "body": llm}}
    return build(raw_scenario(
        {"decode": loop}, [{"node_names": ["LLM"], "ranks": [0, 1], "tp_size": 2}],
        requests={"chat": {"walks": ["decode"], "stops": {"decode_loop": {"uniform": [5, 20]}}}},
        workload=[{"request": "chat", "count": 3, "concurrency": 2}],
    ))


def test_a_follower_emitting_to_the_client_is_caught_by_tp_agreement():
    sc = _tp_chat()
    assert run_scenario(sc, "mstar-python").violations == []
    rep = run_scenario(sc, B + "FollowerEmits")
    bad = [v for v in rep.violations if v.check == "tp_agreement"]
    assert bad and all(v.rank == 1 for v in bad)
    assert "only rank 0 emits" in bad[0].message


def test_a_follower_streaming_to_another_rank_is_caught_by_tp_agreement():
    """A follower may keep its own copy of a streamed item (it consumes the stream too); one
    that sends it to another rank is caught."""
    from pathlib import Path

    from simharness.scenario import load_scenario

    sc = load_scenario(Path(__file__).parents[1] / "fidelity" / "gaps" / "tp_stream_to_a_follower.yaml")
    ok = run_scenario(sc, "mstar-python")
    assert not [v for v in ok.violations if v.check == "tp_agreement"]
    assert any(w == "stream:1" for e in ok.result.events if type(e).__name__ == "Forward"
               and e.rank == 1 for _, w in e.routes)  # the follower's own copy, allowed
    rep = run_scenario(sc, B + "FollowerStreamsOut")
    bad = [v for v in rep.violations if v.check == "tp_agreement"]
    assert bad and all(v.rank == 1 for v in bad)
    assert "st→stream:0" in bad[0].message


def test_a_missing_worker_graphs_done_is_caught():
    rep = run_scenario(_load("orpheus_tp2", SMALL), B + "MissingWorkerGraphsDone")
    assert {"worker_graphs", "liveness"} <= checks_failed(rep)
    wg = next(v for v in rep.violations if v.check == "worker_graphs")
    assert "never reported done" in wg.message and 1 in wg.details["ranks"]
    # tp_agreement sees the two ranks of the instance disagree on the same forward's effects.
    tp = [v for v in rep.violations if v.check == "tp_agreement"]
    assert tp and all(v.rank == 1 for v in tp)
    assert tp[0].message == ("LLM outside any loop: rank 1 dropped nothing, finished no loop, completed "
                             "no worker graph, but rank 0 dropped nothing, finished no loop, completed "
                             "prefill#0")


def _split_dynamic_loop():
    """A dynamic loop split over two ranks; only A's check_stop decides, B learns by STOP_LOOPS."""
    loop = {"loop": {"name": "gen", "max_iters": 50, "stop": {"by": ["A"]}, "body": {"sequential": [
        node("A", ["x"], [("y", "B")]),
        node("B", ["y"], [("x", "A")]),
    ]}, "outputs": [{"name": "x", "to": "C"}]}}
    walk = {"sequential": [loop, node("C", ["x"], [("out", "client")])]}
    return build(raw_scenario(
        {"w": walk},
        [{"node_names": ["A"], "ranks": [0]}, {"node_names": ["B", "C"], "ranks": [1]}],
        requests={"r": {"walks": ["w"], "stops": {"gen": {"uniform": [5, 15]}}}},
        workload=[{"request": "r", "count": 4, "concurrency": 2}],
    ))


def test_a_peer_stopping_a_dynamic_loop_one_iteration_late_is_caught_by_forwards():
    sc = _split_dynamic_loop()
    assert run_scenario(sc, "mstar-python").violations == []
    rep = run_scenario(sc, B + "LateStopLoops")
    fw = [v for v in rep.violations if v.check == "forwards" and v.node == "B"]
    assert fw, [v.message for v in rep.violations]


def test_a_decode_scheduled_before_its_kv_pull_is_caught_by_kv_handoff():
    sc = _load("orpheus_pd", SMALL)
    ok = run_scenario(sc, "mstar-python")
    assert ok.violations == []
    assert any(type(e).__name__ == "KvPulled" for e in ok.result.events)
    rep = run_scenario(sc, B + "SkipsKvPull")
    kv = [v for v in rep.violations if v.check == "kv_handoff"]
    assert kv and kv[0].node == "LLM" and kv[0].rank == 1
    assert "before its KV pull completed" in kv[0].message


@pytest.mark.parametrize("runtime", ["mstar-python", "mstar-rust"])
def test_the_split_dynamic_loop_passes_under_correct_runtimes(runtime):
    assert run_scenario(_split_dynamic_loop(), runtime).violations == []
