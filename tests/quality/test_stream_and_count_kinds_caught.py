"""Each kind of `streams`, `forwards` and `expect` violation, caused on purpose, is reported with
its own message.

The broken runtimes live in `tests.quality.broken_streams`; `caught` shows mstar-python clean on
the same scenario first, so each violation comes from the breakage.
"""

from __future__ import annotations

from simharness import events as ev
from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS
from tests.helpers import BROKEN, build, caught, node, raw_scenario

B = "tests.quality.broken_streams:"

#: one tts_300 request: 300 decode steps, 301 streamed tokens, 41 SNAC chunks (see orpheus.yaml)
ONE_TTS_300 = "workload=[{request: tts_300, count: 1}]"


def _load(name, *sets):
    return load_scenario(SCENARIOS / f"{name}.yaml", list(sets))


def _messages(violations):
    return [v.message for v in violations]


# -- streams ------------------------------------------------------------------------------------


def test_a_skipped_chunk_index_is_caught_by_streams():
    found = caught(_load("orpheus", ONE_TTS_300), B + "SkipsChunkIndex", "streams")
    assert _messages(found) == ["stream 'new_token' to rank 1: chunk 2 released where chunk 1 was due"]
    assert (found[0].node, found[0].rank) == ("snac_decoder", 1)


def test_an_item_lost_from_a_middle_chunk_is_caught_by_streams():
    found = caught(_load("orpheus", ONE_TTS_300), B + "DropsMiddleItem", "streams")
    assert len(found) == 1, _messages(found)
    msg = found[0].message
    # SlidingWindow(28, 7): chunk 1 starts at item 7, and is not the final chunk.
    assert msg.startswith("stream 'new_token' to rank 1: chunk 1 holds items ")
    assert msg.endswith("from offset 7: out of order, lost or duplicated")
    assert found[0].details["chunk"] == 1


def test_a_final_chunk_on_a_stream_that_continues_after_done_is_caught_by_streams():
    sc = _load("qwen3omni_2gpu", "workload=[{request: speech, count: 1}]")
    continuing = sorted(c.edge for c in sc.connections
                        if c.policy.kind == "fixed" and c.policy.continue_after_done)
    assert continuing == ["thinker_mask", "thinker_states"]
    found = caught(sc, B + "FinalDespiteContinue", "streams")
    assert sorted(_messages(found)) == [
        f"stream {edge!r} to rank 0: 1 final chunk on a stream that continues after its producer is done"
        for edge in continuing]


def test_a_chunk_released_after_the_final_chunk_is_caught_by_streams():
    found = caught(_load("orpheus", ONE_TTS_300), B + "ChunkAfterFinal", "streams")
    # Exactly one final chunk (40, the 41st), then chunk 41: not "2 final chunks".
    assert _messages(found) == [
        "stream 'new_token' to rank 1: chunk 41 was released after the final chunk 40"]


def test_a_consumer_running_twice_on_a_chunk_is_caught_by_streams():
    found = caught(_load("orpheus", ONE_TTS_300), B + "ReplaysChunks", "streams")
    # 40 non-final chunks run twice, the final one once.
    assert _messages(found) == ["stream 'new_token' to rank 1: snac_decoder's passes for 41 chunks "
                                "released: 81, where each chunk is one pass"]
    assert found[0].details == {"edge": "new_token", "runs": 81, "chunks": 41}


# -- forwards -----------------------------------------------------------------------------------


def test_a_second_speculation_past_a_dynamic_stop_is_caught_by_forwards():
    sc = _load("orpheus", ONE_TTS_300)
    # The allowance: mstar-python overshoots once per dynamic stop.
    clean = run_scenario(sc, "mstar-python")
    assert sum(type(e) is ev.Overshoot for e in clean.result.events) == 1
    found = caught(sc, B + "SpeculatesPastStop", "forwards")
    assert _messages(found) == [
        "2 speculative forwards were discarded; at most one per dynamic stop is expected"]
    assert (found[0].walk, found[0].node, found[0].rank) == ("decode", "LLM", 0)
    assert found[0].details == {"overshoots": 2}


def _two_nodes(groups, count):
    walk = {"sequential": [node("A", ["x"], [("y", "B")]), node("B", ["y"], [("out", "client")])]}
    return build(raw_scenario({"w": walk}, groups, requests={"r": {"walks": ["w"], "inputs": ["x"]}},
                              workload=[{"request": "r", "count": count}]))


def test_a_node_outside_loops_running_twice_is_caught_by_forwards():
    sc = _two_nodes([{"node_names": ["A", "B"], "ranks": [0]}], count=2)
    found = caught(sc, B + "RerunsLastNode", "forwards")
    assert _messages(found) == ["2 forwards, expected 1: 1 extra forward (the node is in no loop)"] * 2
    assert {(v.node, v.request) for v in found} == {("B", "r0"), ("B", "r1")}


def test_a_node_run_on_a_replica_the_request_was_not_given_is_caught_by_forwards():
    # B has two data-parallel replicas (ranks 0 and 1); A runs on rank 1.
    sc = _two_nodes([{"node_names": ["A"], "ranks": [1]}, {"node_names": ["B"], "ranks": [0, 1]}], count=4)
    rep = run_scenario(sc, "mstar-python")
    on_replica_0 = sorted(e.rid for e in rep.result.events
                          if type(e) is ev.Admitted and dict(e.placement)["w#1"] == (0,))
    assert on_replica_0 and len(on_replica_0) < 4  # both replicas are chosen
    found = caught(sc, B + "RunsEveryReplica", "forwards")
    assert _messages(found) == ["1 forward, expected 0: ran 1 forward where none were expected "
                                "(loop counters -)"] * len(on_replica_0)
    assert sorted(v.request for v in found) == on_replica_0
    assert {(v.node, v.rank) for v in found} == {("B", 1)}


def test_an_extra_pass_of_a_walk_repeated_until_its_final_chunk_is_caught_by_forwards():
    found = caught(_load("orpheus", ONE_TTS_300), BROKEN + "DuplicatesFinalChunk", "forwards")
    assert _messages(found) == ["42 forwards over its repeated passes, expected 41"]
    assert (found[0].walk, found[0].node) == ("snac_chunk", "snac_decoder")


# -- expect -------------------------------------------------------------------------------------


def test_a_per_request_kind_expectation_is_checked_and_named():
    sc = _load("orpheus", ONE_TTS_300, "expect.per_request_kind.tts_300.prefill.LLM=2")
    rep = run_scenario(sc, "mstar-python")
    assert [(v.check, v.message) for v in rep.violations] == [
        ("expect", "expected 2 forwards of LLM in prefill per request "
                   "(expect.per_request_kind.tts_300), got 1 on rank 0")]


def test_a_broken_runtime_is_caught_by_the_shipped_per_request_kind_counts():
    # orpheus.yaml expects 41 SNAC passes per tts_300 request.
    found = caught(_load("orpheus", ONE_TTS_300), B + "ReplaysChunks", "expect")
    assert _messages(found) == ["expected 41 forwards of snac_decoder in snac_chunk per request "
                                "(expect.per_request_kind.tts_300), got 81 on rank 1"]


def test_each_expect_message_names_the_key_its_count_came_from():
    sc = _load("orpheus", "workload=[{request: tts_300, count: 1}, {request: tts, count: 1}]",
               "expect.forwards_per_request.prefill.LLM=2")
    rep = run_scenario(sc, "mstar-python")
    # tts has no count of its own for prefill; tts_300's own count (1) wins over the shared one.
    kind = {e.rid: e.request_kind for e in rep.result.events if type(e) is ev.Admitted}
    assert [(kind[v.request], v.message) for v in rep.violations] == [
        ("tts", "expected 2 forwards of LLM in prefill per request (expect.forwards_per_request), "
                "got 1 on rank 0")]
