"""What the simulation's fast paths must keep exactly as the plain version did: the order a
peer's message lists its signals in, one door crossing for a whole inbox, routing worked out
once per placement, a completion's own outputs routed by one flat plan, the expect check's
counts read from the forward log, and digests whatever the size of a digest block."""

from __future__ import annotations

import pytest

from simharness import events as ev
from simharness import trace
from simharness.engine.simulation import SimWorker
from simharness.placement.layout import Layout
from simharness.run import RunChecks, run_scenario, simulate
from simharness.runtime.profiles import MstarPython
from simharness.runtime.rank import RankRuntime
from simharness.scenario.loader import load_scenario
from simharness.testing import signal
from tests.conftest import SCENARIOS
from tests.helpers import build, node, raw_scenario


def _stream_and_edge_to_one_peer():
    """Node a (rank 0) streams `st` to k and sends `y_a` to b; b and k both run on rank 1, so
    one completion of a sends both to the same peer."""
    a = node("a", ["in0"], [("y_a", "b")])
    a["outputs"].append({"name": "st", "to": "k", "stream": True})
    raw = raw_scenario(
        {"w0": {"sequential": [a, node("b", ["y_a"], [("y_b", "client")])]},
         "c": node("k", ["st"], [("y_k", "client")])},
        [{"node_names": ["a"], "ranks": [0]}, {"node_names": ["b", "k"], "ranks": [1]}],
        requests={"r": {"inputs": ["in0"],
                        "partitions": {"main": ["w0"], "sink": [{"walk": "c", "until": "final_chunk"}]}}},
        workload=[{"request": "r", "count": 2, "concurrency": 1}],
    )
    raw["graph"]["partitions"] = {"main": ["w0"], "sink": ["c"]}
    raw["graph"]["streams"] = [{"from": "main", "to": "sink", "edge": "st",
                                "policy": {"fixed": {"chunk": 1}}}]
    return build(raw)


def test_a_peer_s_message_lists_streamed_items_before_the_completion_s_other_signals():
    # The stream route is filed as the outputs are walked, the fan-out to peers only after the
    # done-sweep: mstar's message to rank 1 carries st, then y_a. Sending the fan-out while
    # walking the outputs would swap them (and move the digest of every such layout).
    report = run_scenario(_stream_and_edge_to_one_peer(), "mstar-python")
    assert report.violations == []
    from_a = [e for e in report.result.events
              if type(e) is ev.Delivered and e.rank == 1 and e.src == 0]
    assert from_a
    for e in from_a:
        assert [sig.name for sig, _, _ in e.outcomes] == ["st", "y_a"]


def test_one_door_crossing_for_an_inbox_is_the_same_as_one_per_message(monkeypatch):
    sc = load_scenario(SCENARIOS / "bagel_mixed.yaml")
    whole = run_scenario(sc, "mstar-rust-prefix", keep_trace=False)

    def one_by_one(self, handle):
        if self.inbox:
            msgs, self.inbox = self.inbox, []
            for msg in msgs:
                handle([msg])

    monkeypatch.setattr(SimWorker, "receive", one_by_one)
    single = run_scenario(sc, "mstar-rust-prefix", keep_trace=False)
    assert single.trace_digest == whole.trace_digest
    assert [v.to_json() for v in single.violations] == [v.to_json() for v in whole.violations]


@pytest.mark.parametrize("name", ["bagel_cfg.yaml", "bagel_cfg_tp2.yaml", "cosmos3_tp2.yaml",
                                  "qwen3omni_2gpu.yaml", "bagel_pd.yaml"])
@pytest.mark.parametrize("runtime", ["mstar-python", "mstar-rust-prefix"])
def test_a_completion_s_flat_plan_routes_as_the_edge_by_edge_loop(monkeypatch, name, runtime):
    """`_Routes.plain_outputs` is the fast path of most completions; with it empty, every
    completion is routed edge by edge, and the trace must be the same to the byte."""
    from simharness.runtime.rank import _Routes

    sc = load_scenario(SCENARIOS / name)
    taken = []
    plain_outputs = _Routes.plain_outputs

    def counted(self, *args):
        plans = plain_outputs(self, *args)
        taken.append(bool(plans))
        return plans

    monkeypatch.setattr(_Routes, "plain_outputs", counted)
    fast = run_scenario(sc, runtime, keep_trace=False)
    assert any(taken)  # the fast path was there to take
    monkeypatch.setattr(_Routes, "plain_outputs", lambda self, *args: ())
    slow = run_scenario(sc, runtime, keep_trace=False)
    assert slow.trace_digest == fast.trace_digest
    assert [v.to_json() for v in slow.violations] == [v.to_json() for v in fast.violations]


@pytest.mark.parametrize("runtime", ["mstar-python", "tests.quality.broken:OffByOneLoop"])
def test_expect_reads_from_the_forward_log_what_counting_the_forwards_gives(runtime):
    from collections import Counter

    sc = load_scenario(SCENARIOS / "bagel_cfg.yaml")
    watch = RunChecks(sc, Layout.build(sc))
    result, violations = simulate(sc, runtime, observers=[watch.guard, *watch.checks])
    expect = next(c for c in watch.checks if c.name == "expect")
    counted: Counter[tuple[str, tuple[str, str, int]]] = Counter(
        (e.rid, (e.walk, e.node, e.rank)) for e in result.events if type(e) is ev.Forward)
    for rid in result.outcomes:
        assert expect.counts_of(rid) == {place: n for (r, place), n in counted.items() if r == rid}
    assert [v.to_json() for v in watch.judge(result.outcomes) if v.check == "expect"] == \
        [v.to_json() for v in violations if v.check == "expect"]
    assert any(v.check == "expect" for v in violations) == (runtime != "mstar-python")


@pytest.mark.parametrize("block", [1, 7, 4096])
def test_the_digest_does_not_depend_on_the_block_size(monkeypatch, block):
    sc = load_scenario(SCENARIOS / "orpheus_tp2.yaml")
    kept = run_scenario(sc, "mstar-python", keep_trace=True).trace_digest
    monkeypatch.setattr(trace, "BLOCK", block)
    assert run_scenario(sc, "mstar-python", keep_trace=False).trace_digest == kept


def test_every_timeout_is_reported_at_its_deadline_while_other_work_goes_on():
    # The run loop asks for the next deadline only once the next event lies beyond the earliest
    # deadline seen; a request that times out must still be stalled at submission + timeout.
    sc = load_scenario(SCENARIOS / "bagel_cfg_counter.yaml",
                       ["limits.request_timeout_s=3",
                        "workload=[{request: t2i_two_images, count: 3, concurrency: 2}]",
                        "graph.requests.other={walks: [prefill_text, image_gen_cfg], inputs: [text_inputs]}",
                        "workload[1]={request: other, count: 2}"])
    events = run_scenario(sc, "mstar-rust-prefix").result.events
    submitted = {e.rid: e.t for e in events if type(e) is ev.Submitted}
    timeouts = [e for e in events if type(e) is ev.Stalled and e.reason == "timeout"]
    assert len(timeouts) >= 2
    for e in timeouts:
        assert e.t == pytest.approx(submitted[e.rid] + 3.0, abs=1e-9)


def _rank_with_b_ready():
    from simharness.testing import arrived, input_signals, signal
    from tests.factories import bench

    b = bench()
    loop = b.loops[1]
    loop.handle_stimulus(arrived(b.new_request(rank=1)), 0.0)
    loop.handle_stimulus(arrived(input_signals(signals=[signal("y", "B", src_rank=0)])), 0.1)
    return loop


@pytest.mark.parametrize("gated, runs", [(None, False), (frozenset({"B"}), False),
                                         (frozenset({"other"}), True), (frozenset(), True)])
def test_the_scheduler_asks_its_gate_about_every_node_it_may_hold(gated, runs):
    # gated=None means the gate may hold any node: the pass that holds nothing back must not
    # skip it (only a set that leaves the node out lets the scheduler run it unasked).
    from simharness.runtime.scheduler import MicroScheduler

    loop = _rank_with_b_ready()
    held = []
    sched = MicroScheduler(lambda node, walk: None, lambda node, walk, rid, st: "held",
                           held=lambda node, walk, rid, st: held.append(node), gated=gated)
    batch = sched.next_batch(loop.runtime, set())
    assert (batch is not None) == runs
    assert held == ([] if runs else ["B"])


def test_an_effects_without_completions_shares_no_list_with_the_loop():
    from simharness.runtime.effects import CHOOSE, Finished, Started

    loop = _rank_with_b_ready()
    chose = loop.handle_stimulus(CHOOSE, 0.2)
    assert chose.batch is not None and len(chose.completions) == 0
    loop.handle_stimulus(Started(batch=chose.batch, duration=0.01), 0.2)
    done = loop.handle_stimulus(Finished(batch=chose.batch), 0.21)
    assert len(done.completions) == 1
    assert len(chose.completions) == 0  # what an earlier stimulus answered does not change


def test_requests_placed_on_different_replicas_are_routed_to_their_own():
    # B has two replicas, on ranks 1 and 2. Rank 0 keeps one routing table per placement: a
    # table shared by every request would send r1's y to r0's replica.
    walk = {"sequential": [node("A", ["x"], [("y", "B")]), node("B", ["y"], [("out", "client")])]}
    sc = build(raw_scenario({"w": walk}, [{"node_names": ["A"], "ranks": [0]},
                                          {"node_names": ["B"], "ranks": [1, 2]}],
                            requests={"req": {"walks": ["w"], "inputs": ["x"]}},
                            workload=[{"request": "req", "count": 3, "concurrency": 3}]))
    layout = Layout.build(sc)
    rank0 = RankRuntime(0, layout, MstarPython().semantics)
    replicas = iter([0, 1, 0])
    rids = ("r0", "r1", "r2")
    for rid in rids:
        rank0.admit(rid, "w", 0, layout.assign(lambda n: next(replicas)))
        rank0.deliver(rid, "w", 0, [signal("x", "A")])
    routes = {rid: [where for _, where in rank0.complete(rid, "A", "w").routes] for rid in rids}
    assert routes == {"r0": ["rank:1"], "r1": ["rank:2"], "r2": ["rank:1"]}


def _grouped_ready_work(self):
    """What `RankRuntime.ready_groups` must equal: `ready_work`, grouped by (node, walk) in
    order of first appearance."""
    groups = {}
    for node_name, walk, rid, st in self.ready_work():
        groups.setdefault((node_name, walk), []).append((rid, st))
    return groups


@pytest.mark.parametrize("scenario", ["bagel_cfg.yaml", "bagel_mixed.yaml"])
def test_the_scheduler_s_grouped_ready_work_is_ready_work_grouped(monkeypatch, scenario):
    sc = load_scenario(SCENARIOS / scenario, ["workload=[{request: t2i, count: 8, concurrency: 4}]"]
                       if scenario == "bagel_cfg.yaml" else [])
    fast = run_scenario(sc, "mstar-rust-prefix", keep_trace=False)
    seen = []
    real = RankRuntime.ready_groups

    def compared(self):
        got = real(self)
        seen.append(len(got))
        assert list(got.items()) == list(_grouped_ready_work(self).items())
        return got

    monkeypatch.setattr(RankRuntime, "ready_groups", compared)
    again = run_scenario(sc, "mstar-rust-prefix", keep_trace=False)
    assert sum(seen) > 0  # the scheduler did read it, and found work
    assert again.trace_digest == fast.trace_digest


def test_the_records_built_positionally_on_the_hot_path_keep_their_field_order():
    # RankRuntime.complete, the conductor's walk start and the router build signals and peer
    # messages positionally (a keyword call costs more per field). A reordered or inserted field
    # would shift every value into the wrong field without an error: this pins the order those
    # call sites were written against. Change them together.
    from simharness.runtime.messages import InputSignals
    from simharness.signals import Signal

    assert Signal.__struct_fields__ == (
        "name", "dest", "persist", "new_token", "nbytes", "src", "src_rank", "walk", "pass_no",
        "counter", "origin", "seq", "stream")
    assert InputSignals.__struct_fields__[:5] == ("rid", "walk", "pass_no", "signals", "src")
    sig = Signal("x", "n", False, True, 8, "a", 0, "w", 1, 2, "edge", 3)
    assert (sig.new_token, sig.src_rank, sig.counter, sig.seq, sig.stream) == (True, 0, 2, 3, False)
