"""The rarer violation kinds of drain, liveness, tp_agreement and loop_exit: for each, a runtime
broken on purpose (or a historical one) and the exact text of the violation that catches it."""

from __future__ import annotations

import pytest

from simharness.events import LOCKSTEP_HOLD
from simharness.explore.execute import signature
from simharness.run import run_scenario
from tests.helpers import build, caught, node, raw_scenario, split_loop

T = "tests.quality.broken_teardown:"
NEVER_DROPS = "tests.quality.broken:NeverDropsLoopBacks"


def _messages(violations):
    return [v.message for v in violations]


# -- drain: what is left at the end of the run -----------------------------------------------


def test_request_state_left_on_a_rank_is_caught_by_drain():
    found = caught(build(split_loop()), T + "LeaksRequestState", "drain")
    assert _messages(found) == ["rank 1 still holds state for r0 and r1 at the end of the run"]
    assert found[0].rank == 1


def test_a_rank_left_busy_is_caught_by_drain():
    found = caught(build(split_loop()), T + "StaysBusy", "drain")
    assert _messages(found) == ["rank 1 is still busy at the end"]


def test_requests_left_at_the_conductor_are_caught_by_drain():
    found = caught(build(split_loop()), T + "ForgetsEndedRequests", "drain")
    assert _messages(found) == ["the conductor ends with requests r0 and r1 still open"]


# -- liveness: a request that never got a slot; the wording of an empty chain ----------------


def _one_slot(**kw):
    raw = split_loop(**kw)
    raw["placement"]["max_concurrent_requests"] = 1
    return raw


def test_a_queued_request_never_admitted_is_caught_by_liveness():
    found = caught(build(_one_slot(count=2, concurrency=2)), T + "NeverAdmitsQueued", "liveness")
    assert len(found) == 1 and found[0].request == "r1"
    assert found[0].message.startswith("r1 was never admitted (quiescence at t=")
    assert found[0].message.endswith(" s): it waited for a concurrency slot")


def test_a_request_queued_behind_a_hung_one_is_admitted_and_runs():
    # r0 loses an edge and hangs; r1 waits for its slot. Aborting r0 frees the slot: r1 runs and
    # completes (it used to be reported hung, and its teardown as a drain leak, the moment the
    # abort admitted it).
    raw = {**_one_slot(count=2, concurrency=2),
           "faults": [{"kind": "drop", "message": "input_signals", "from": 1, "to": 0, "nth": 1}]}
    rep = run_scenario(build(raw), "mstar-python")
    assert rep.result.outcomes == {"r0": "hung", "r1": "completed"}
    assert {(v.check, v.request) for v in rep.violations if v.check in ("liveness", "drain")} == {
        ("liveness", "r0")}


def test_a_timeout_with_nothing_blocked_reads_as_sentences():
    # r0 holds the only slot until it times out; r1 is admitted at that instant and passes its
    # own deadline before any of its messages arrive: its chain is empty.
    raw = _one_slot(max_iters=50, count=2, concurrency=2)
    raw["limits"] = {"request_timeout_s": 0.06}
    rep = run_scenario(build(raw), "mstar-python")
    hangs = {v.request: v.message for v in rep.violations if v.check == "liveness"}
    assert hangs["r1"] == ("r1 hung in walk w (pass 0) at t=0.060 s (it passed its 0.06 s timeout). "
                           "No node of the walk holds an input or waits on a gate. "
                           "Worker graphs not done: w#0 on rank 0 and w#1 on rank 1")
    assert hangs["r0"].startswith("r0 hung in walk w (pass 0) at t=0.060 s (it passed its 0.06 s "
                                  "timeout). B@1 ")
    assert not any(". ." in m for m in hangs.values())


# -- tp_agreement: the ranks of an instance run different batches ----------------------------


def _tp_decode(count, concurrency, stop):
    """A TP2 decode loop of at most 4 steps whose dynamic stop comes after `stop` steps."""
    llm = node("LLM", ["text_inputs"], [("new_token", "client"), ("text_inputs", "LLM")])
    loop = {"loop": {"name": "decode_loop", "max_iters": 4, "stop": {}, "body": llm}}
    return build(raw_scenario(
        {"decode": loop}, [{"node_names": ["LLM"], "ranks": [0, 1], "tp_size": 2}],
        requests={"chat": {"walks": ["decode"], "stops": {"decode_loop": {"uniform": stop}}}},
        workload=[{"request": "chat", "count": count, "concurrency": concurrency}],
    ))


def test_a_follower_reordering_a_batch_is_caught_by_tp_agreement():
    found = caught(_tp_decode(2, 2, [2, 3]), T + "FollowerOwnOrder", "tp_agreement")
    assert _messages(found) == ["rank 1 ran batch 1 of its instance (ranks 0, 1) as LLM for r1, r0 "
                                "where rank 0 ran LLM for r0, r1"]
    assert (found[0].node, found[0].rank, found[0].details["batch"]) == ("LLM", 1, 1)


def test_a_leader_running_a_batch_alone_is_caught_by_tp_agreement():
    # The stop comes after the first step, so the leader's one speculative batch is an
    # overshoot: it is discarded, the request completes, and only the batch count differs.
    sc = _tp_decode(1, 1, [1, 1])
    found = caught(sc, T + "LeaderSpeculates", "tp_agreement")
    assert _messages(found) == ["rank 1 ran 1 batch of its instance (ranks 0, 1), rank 0 ran 2"]
    assert run_scenario(sc, T + "LeaderSpeculates").result.outcomes == {"r0": "completed"}


# -- loop_exit: a finished copy routes again; a stray sent to its own rank -------------------


def _nested(outer_iters, groups, slow_e=False):
    """An outer loop L1 around a, an inner single-node loop L2 (b) and c, which sends s1 back to a.

    With `slow_e`, a also waits each iteration for z from e, a slow node on rank 1.
    """
    a_inputs, a_outputs = ["s1"], [("s2", "b")]
    if slow_e:
        a_inputs, a_outputs = ["s1", "z"], [("s2", "b"), ("w", "e")]
    inner = {"loop": {"name": "L2", "max_iters": 1, "body": node("b", ["s2"], [("s2", "b")]),
                      "outputs": [{"name": "s2", "to": "c"}]}}
    body = [node("a", a_inputs, a_outputs), inner]
    if slow_e:
        body.append(node("e", ["w"], [("z", "a")]))
    body.append(node("c", ["s2"], [("s1", "a")]))
    outer = {"loop": {"name": "L1", "max_iters": outer_iters, "body": {"sequential": body},
                      "outputs": [{"name": "s1", "to": "d"}]}}
    walk = {"sequential": [outer, node("d", ["s1"], [("y", "client")])]}
    return build(raw_scenario({"w": walk}, groups, requests={"req": {"walks": ["w"]}},
                              workload=[{"request": "req", "count": 1}],
                              nodes={"e": {"service_ms": 20}} if slow_e else None))


def test_a_copy_routing_loop_backs_after_it_ended_is_caught_by_loop_exit():
    # Each finish of the inner loop re-seeds b (its loop-back is never dropped) and b feeds c
    # again: c, whose copy of L1 on rank 1 ended with its last iteration, sends s1 back to a.
    sc = _nested(2, [{"node_names": ["a", "b", "d"], "ranks": [0]}, {"node_names": ["c"], "ranks": [1]}])
    found = caught(sc, NEVER_DROPS, "loop_exit")
    late = [v for v in found if v.node == "c" and "after its copy in" in v.message]
    assert _messages(late) == ["c on rank 1 routed 1 loop-back edge of loop 'L1' after its copy "
                               "in w#1 had ended: s1→a (sent to rank 0)"]
    assert late[0].details["wg"] == "w#1" and late[0].details["edges"][0]["to"] == "rank:0"


@pytest.mark.parametrize("runtime", [NEVER_DROPS, "mstar-rust-prefix"])
def test_an_extra_pass_of_a_finished_copy_is_caught_by_loop_exit(runtime):
    # c lives in a sibling worker graph: its stray s1 re-runs a after a's copy of L1 has ended,
    # and a seeds the inner loop again (the pair s2→b belongs to L1's set through L2).
    sc = _nested(1, [{"node_names": ["a", "b", "d"], "ranks": [0]}, {"node_names": ["c"], "ranks": [0]}])
    found = caught(sc, runtime, "loop_exit")
    assert "a on rank 0 routed 1 loop-back edge of loop 'L1' after its copy in w#0 had ended: s2→b " \
           "(ingested on rank 0, worker graph w#0)" in _messages(found)


def test_a_stray_refused_locally_and_sent_to_its_own_rank_is_caught_by_loop_exit():
    # a waits for z from the slow e while the churn of the inner loop makes c send s1 again and
    # again: a's current and next slots fill, and the rank sends the refused s1 to itself.
    sc = _nested(3, [{"node_names": ["a", "b", "c", "d"], "ranks": [0]}, {"node_names": ["e"], "ranks": [1]}],
                 slow_e=True)
    found = caught(sc, NEVER_DROPS, "loop_exit")
    to_self = [m for m in _messages(found) if "sent to itself" in m]
    assert "c on rank 0 routed 1 loop-back edge of loop 'L1' after its last iteration (counter 2) began " \
           "to complete: s1→a (sent to itself on rank 0)" in to_self
    assert any(v.details["edges"] == [{"name": "s1", "dest": "a", "to": "rank:0"}] and v.rank == 0
               for v in found)


def test_a_leader_that_never_schedules_its_followers_hangs_and_liveness_names_the_lockstep():
    # The leader takes each batch into the instance's collective without telling its follower:
    # both ranks hold every input of LLM, and the report says what holds each, not that LLM is
    # "ready but was never run".
    sc = _tp_decode(1, 1, [4, 4])
    found = caught(sc, T + "LeaderNeverSchedules", "liveness")
    assert _messages(found) == [
        "r0 hung in walk decode (pass 0) at t=0.000 s (no event was left). LLM@0 holds every "
        "input but TP lockstep holds it: rank 0 took LLM for r0 into batch 1 of its TP instance "
        "and waits in that batch's collective for rank 1. LLM@1 holds every input but TP "
        "lockstep holds it: rank 1 runs LLM only in a batch of rank 0, and no batch of LLM for "
        "r0 came. Worker graphs not done: decode#0 on ranks 0,1"]
    assert [e["gate"].startswith(LOCKSTEP_HOLD) for e in found[0].details["chain"]] == [True, True]
    # The fuzzer files it apart from the engine gates' hangs.
    assert signature(run_scenario(sc, T + "LeaderNeverSchedules").violations, sc) == \
        ("liveness", "hang-lockstep")
