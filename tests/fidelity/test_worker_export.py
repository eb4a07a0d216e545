"""What a Worker-level export judges (`simharness.mstar.worker_export`), on recordings written by
hand: the first pop a correct stream would not give, and the requests a worker keeps after their
REMOVE came. The exported modules themselves are run on the corpus by test_export_test.py."""

from __future__ import annotations

from pathlib import Path

from simharness.mstar.stack_record import BufferCall, Message, MessageCall, StackRecording
from simharness.mstar.worker_export import instances, judge_buffers, kept_after_remove
from simharness.placement.layout import Layout
from simharness.scenario import load_scenario

#: a TP2 x SP2 instance (ranks 0-3) consumes the stream st
TP_CONSUMER = Path(__file__).parent / "gaps" / "tp_sp_stream_consumer.yaml"


def recording(buffers=(), messages=(), sent=None, parked=None, left=None) -> StackRecording:
    sc = load_scenario(TP_CONSUMER)
    return StackRecording(sc, Layout.build(sc), list(buffers), list(messages), {}, {},
                          sent or {}, parked or {}, left or {}, [])


def stream(rank: int, *ops: tuple) -> list[BufferCall]:
    key = (rank, "r0", "st")
    out = [BufferCall(key, "make", {"from": "main"})]
    for op in ops:
        if op[0] == "item":
            out += [BufferCall(key, "register", {"id": f"t{op[1]}", "item": op[1]}),
                    BufferCall(key, "put", {"id": f"t{op[1]}", "item": op[1]})]
        elif op[0] == "done":
            out.append(BufferCall(key, "done"))
        else:
            _, index, start, items, final = op
            out.append(BufferCall(key, "pop", {"index": index, "start": start, "items": items,
                                               "final": final}))
    return out


def test_the_consumers_instance_is_read_off_the_layout():
    got = instances(recording())
    assert got[("st", 2)] == (0, 1, 2, 3) and ("st", 7) not in got


def test_a_stream_closed_after_its_items_and_alike_on_every_rank_is_correct():
    calls = []
    for rank in (0, 1):
        calls += stream(rank, ("item", 3), ("pop", 0, 0, [3], False), ("done",),
                        ("pop", 1, 1, [], True))
    rec = recording(calls, sent={(0, "r0", "st"): 1, (1, "r0", "st"): 1})
    assert judge_buffers(rec) is None


def test_a_final_chunk_before_an_item_arrived_is_caught():
    calls = stream(0, ("done",), ("pop", 0, 0, [], True), ("item", 3), ("pop", 1, 0, [3], True))
    fault = judge_buffers(recording(calls, sent={(0, "r0", "st"): 1}))
    assert fault is not None and fault.kinds == ["early-final"] and fault.at == 2
    assert "0 of the 1 item" in fault.text


def test_two_ranks_of_an_instance_chunking_differently_is_caught():
    calls = stream(0, ("item", 3), ("pop", 0, 0, [3], False))
    calls += stream(1, ("item", 3), ("done",), ("pop", 0, 0, [3], True))
    fault = judge_buffers(recording(calls, sent={(0, "r0", "st"): 1, (1, "r0", "st"): 1}))
    assert fault is not None and fault.kinds == ["instance"]
    assert "ranks 0 and 1 of one tensor-parallel instance release chunk 0" in fault.text


def test_what_a_worker_keeps_counts_only_after_its_remove_came():
    remove = MessageCall(1, "messages", 0.0, (), [Message("REMOVE_REQUEST", "r0", 0, True)])
    # r1 is left on rank 1 too, but no REMOVE for it reached rank 1 (a hang, not a leak)
    rec = recording(messages=[remove], left={1: ["r0", "r1"]}, parked={2: [("r2", "stop_loops")]})
    assert kept_after_remove(rec) == {1: ["r0"], 2: ["r2"]}
    assert kept_after_remove(recording(left={1: ["r1"]})) == {}
