"""Link jitter keeps FIFO per link; the stream failure it can expose is mstar's own race (Q7).

``simharness run scenarios/orpheus.yaml --set schedule.link_jitter_us=100 --seed 2`` fails the
streams check ("2 final chunks") under the reference runtime. That is not the harness reordering
a link: every link still delivers in send order. It is the race mstar leaves open: the
conductor's ``producer_done`` travels producer -> conductor -> consumer, the producer's last
stream item travels producer -> consumer, and nothing orders the two (reference semantics Q7,
docs/scenarios.md "Schedules and faults"). With enough jitter the end-of-stream overtakes the last
item: the consumer pops a final chunk, then the late item as a second final chunk.
"""

from __future__ import annotations

from simharness import events as ev
from simharness.run import run_scenario
from simharness.scenario.loader import load_scenario

JITTER = ["schedule.link_jitter_us=100"]


def _orpheus(scenarios_dir, overrides, seed):
    sc = load_scenario(scenarios_dir / "orpheus.yaml", overrides)
    return run_scenario(sc, "mstar-python", seed)


def test_every_link_delivers_in_send_order_under_jitter(scenarios_dir):
    rep = _orpheus(scenarios_dir, JITTER, 2)
    last: dict[tuple[int, int], int] = {}
    checked = 0
    for e in rep.result.events:
        if type(e) is ev.Delivered:
            for sig, _wg, _outcome in e.outcomes:
                key = (sig.src_rank, e.rank)
                assert sig.seq > last.get(key, -1), f"link {key} reordered at t={e.t}"
                last[key] = sig.seq
                checked += 1
    assert checked > 1000


def test_the_stream_failure_under_jitter_is_producer_done_overtaking_the_last_item(scenarios_dir):
    assert _orpheus(scenarios_dir, [], 2).violations == []  # the same seed without jitter passes
    rep = _orpheus(scenarios_dir, JITTER, 2)
    assert {v.check for v in rep.violations} >= {"streams"}
    assert any("2 final chunks" in v.message for v in rep.violations)
    (bad,) = {v.request for v in rep.violations if v.check == "streams"}
    events = rep.result.events
    done_at = next(e.t for e in events if type(e) is ev.ProducerDoneSent and e.rid == bad)
    finals = [e for e in events if type(e) is ev.ChunkPopped and e.rid == bad and e.final]
    assert len(finals) == 2
    # The first final chunk was popped once producer_done had come, before the producer's last
    # item did; the second one holds just that late item.
    last_item = max(i for e in events if type(e) is ev.ChunkPopped and e.rid == bad
                    for i in e.items)
    assert done_at <= finals[0].t and last_item not in finals[0].items
    assert finals[1].items == (last_item,) or list(finals[1].items) == [last_item]
