"""The runtime model's state machines driven through their one door (`handle_stimulus`), with
no engine: the worker loop, the conductor, the rank runtime and the API client. The bench is
the split loop of `tests.helpers.split_loop` (A on rank 0; B and C on rank 1)."""

from __future__ import annotations

import pytest

from simharness import events as ev
from simharness.runtime.effects import CHOOSE, Abort, Finished, Started, Submit
from simharness.runtime.graph_state import CURRENT, REJECTED
from simharness.runtime.messages import (
    InputSignals,
    NewRequest,
    ReadsDone,
    RemoveRequest,
    RequestComplete,
    WorkerGraphsDoneMsg,
)
from simharness.runtime.protocol import LoopPolicy, RankRuntimeProtocol
from simharness.testing import arrived, input_signals, remove, result, signal
from tests.factories import bench


def kinds(effects) -> list[str]:
    return [type(e).__name__ for e in effects.events]


# -- the worker loop ---------------------------------------------------------------------------


def _running_b():
    """Rank 1 with request r0 admitted and B ready (x from the conductor, y from A)."""
    b = bench()
    loop = b.loops[1]
    loop.handle_stimulus(arrived(b.new_request(rank=1)), 0.0)
    loop.handle_stimulus(arrived(input_signals(signals=[signal("y", "B", src_rank=0)])), 0.1)
    return b, loop


def test_a_batch_runs_through_choose_started_finished():
    _, loop = _running_b()
    chose = loop.handle_stimulus(CHOOSE, 0.2)
    batch = chose.batch
    assert (batch.node, batch.rids, chose.sends) == ("B", ["r0"], [])
    started = loop.handle_stimulus(Started(batch=batch, duration=1.0), 0.2)
    assert kinds(started) == ["BatchStarted"] and loop.busy
    done = loop.handle_stimulus(Finished(batch=batch), 1.2)
    assert kinds(done) == ["Forward"] and not loop.busy
    (c,) = done.completions
    assert c.node == "B" and [s.name for s in c.local()] == ["x"]
    (send,) = done.sends  # B's loop-back x goes to A on rank 0
    assert send.dst == 0 and isinstance(send.msg, InputSignals)
    assert [(s.name, s.dest) for s in send.msg.signals] == [("x", "A")]
    assert loop.handle_stimulus(CHOOSE, 1.2).batch is None  # A's answer has not come back yet


def test_a_remove_during_a_batch_waits_for_it_and_late_messages_are_parked():
    _, loop = _running_b()
    batch = loop.handle_stimulus(CHOOSE, 0.2).batch
    loop.handle_stimulus(Started(batch=batch, duration=1.0), 0.2)
    assert not loop.handle_stimulus(arrived(remove()), 0.5).events  # deferred
    done = loop.handle_stimulus(Finished(batch=batch), 1.2)
    assert kinds(done) == ["Forward", "Removed"] and "r0" not in loop.runtime.requests
    late = loop.handle_stimulus(arrived(input_signals(signals=[signal("y", "B")])), 2.0)
    assert kinds(late) == ["Dropped"] and loop.unprocessed_pairs() == [("r0", "input_signals")]


def test_a_message_before_new_request_is_replayed_when_it_arrives():
    b = bench()
    loop = b.loops[1]
    early = loop.handle_stimulus(arrived(input_signals(signals=[signal("y", "B", src_rank=0)])), 0.0)
    assert not early.events and early.sends == []
    admitted = loop.handle_stimulus(arrived(b.new_request(rank=1)), 0.1)
    assert kinds(admitted) == ["Delivered", "Delivered"]
    assert loop.handle_stimulus(CHOOSE, 0.1).batch.node == "B"


def test_the_worker_loop_refuses_a_stimulus_it_does_not_take():
    with pytest.raises(TypeError, match="worker loop takes"):
        bench().loops[0].handle_stimulus(Submit(rid="r0", kind="req"), 0.0)


# -- the conductor -----------------------------------------------------------------------------


def test_submit_admits_and_sends_each_rank_its_start_inputs():
    b = bench()
    eff = b.conductor.handle_stimulus(Submit(rid="r0", kind="req"), 0.0)
    assert kinds(eff) == ["Submitted", "Admitted", "WalkStarted"] and eff.ended == []
    assert [(s.dst, type(s.msg)) for s in eff.sends] == [(0, NewRequest), (1, NewRequest)]
    assert [[(x.name, x.dest) for x in s.msg.signals] for s in eff.sends] == [[("x", "A")],
                                                                              [("x", "B")]]


def test_a_full_conductor_queues_and_an_abort_lets_the_next_request_in():
    b = bench(concurrency_cap=1)
    c = b.conductor
    c.handle_stimulus(Submit(rid="r0", kind="req"), 0.0)
    queued = c.handle_stimulus(Submit(rid="r1", kind="req"), 0.0)
    assert kinds(queued) == ["Submitted"] and queued.sends == [] and c.unfinished() == ["r0", "r1"]
    assert c.stall_position("r1") is None and c.stall_position("r0").walk == "w"
    eff = c.handle_stimulus(Abort(rid="r0", outcome="hung"), 1.0)
    assert eff.ended == [("r0", "hung")]
    assert kinds(eff) == ["RequestEnded", "Admitted", "WalkStarted"]
    assert [type(s.msg) for s in eff.sends] == [RemoveRequest, RemoveRequest, NewRequest, NewRequest]
    # Aborting a request still in the queue ends it without a send.
    c.handle_stimulus(Submit(rid="r2", kind="req"), 1.0)
    gone = c.handle_stimulus(Abort(rid="r2", outcome="timeout"), 2.0)
    assert gone.ended == [("r2", "timeout")] and gone.sends == []


def test_the_last_report_completes_the_request():
    b = bench()
    c = b.conductor
    c.handle_stimulus(Submit(rid="r0", kind="req"), 0.0)
    wgs = [wg.id for wg in b.layout.by_walk["w"]]
    sends = []
    for wg in wgs:
        rank = b.assignment().wg_ranks[wg][0]
        eff = c.handle_stimulus(arrived(WorkerGraphsDoneMsg(
            rid="r0", rank=rank, wgs=[wg], persist=[], pass_no=0, emits=1)), 1.0)
        sends.extend(eff.sends)
    assert eff.ended == [("r0", "completed")] and "RequestEnded" in kinds(eff)
    assert [type(s.msg) for s in sends] == [RequestComplete, RemoveRequest, RemoveRequest]


# -- the rank runtime --------------------------------------------------------------------------


def test_the_rank_runtime_admits_routes_and_tears_down():
    b = bench()
    rt = b.loops[1].runtime
    assert isinstance(rt, RankRuntimeProtocol)
    rt.admit("r0", "w", 0, b.assignment())
    out = rt.deliver("r0", "w", 0, [signal("x", "B"), signal("y", "B"), signal("q", "A")])
    assert [o for _, _, o in out] == [CURRENT, CURRENT, REJECTED]  # A is not on rank 1
    assert [(n, w, r) for n, w, r, _ in rt.ready_work()] == [("B", "w", "r0")]
    rt.state_of("r0", "w", "B").pop_ready("B")
    c = rt.complete("r0", "B", "w")
    assert sorted(c.to_ranks) == [0] and c.counter == 0 and not c.completed_wgs
    held = rt.remove("r0")
    assert [(h.node, h.signal.name) for h in held] == [("B", "x")] and rt.requests == {}


# -- the API client ----------------------------------------------------------------------------


def test_with_the_drain_barrier_the_client_reads_every_output_before_reads_done():
    b = bench(policy=LoopPolicy(drain_barrier=True))
    client = b.client
    first = client.handle_stimulus(arrived(result()), 0.0)
    assert kinds(first) == ["Emitted"] and first.sends == []
    done = client.handle_stimulus(arrived(RequestComplete(rid="r0", emits=2)), 0.1)
    assert done.sends == []
    last = client.handle_stimulus(arrived(result()), 0.2)
    assert [type(s.msg) for s in last.sends] == [ReadsDone] and isinstance(last.events[0], ev.Emitted)


def test_an_aborted_request_is_no_longer_waited_for():
    client = bench(policy=LoopPolicy(drain_barrier=True)).client
    client.handle_stimulus(arrived(RequestComplete(rid="r0", emits=1)), 0.0)
    assert client.handle_stimulus(Abort(rid="r0", outcome="hung"), 0.1).sends == []
    assert client.handle_stimulus(arrived(result()), 0.2).sends == []  # no READS_DONE any more
