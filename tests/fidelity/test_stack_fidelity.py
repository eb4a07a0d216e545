"""The model holds to the real mstar stack.

``mstar-python`` under mstar 0.2.1's loop policy (`protocol.MSTAR_0_2_1`) and ``--runtime mstar``
(mstar-ai's own Conductor, Workers, MicroScheduler and StreamBuffer) must agree, as
`agreement.disagreements` compares them, on every shipped scenario, every scenario imported from
mstar's ``default_configs``, and generated layouts: those of `layouts.layout` and the fuzzer's
scenarios of every family (loops, dynamic stops and speculation, streams, TP and SP, KV, teardown).
``SIMHARNESS_STACK_LAYOUTS`` sets how many generated ones (default 600, half from `layouts`, half
drawn over the families). A run where the stack shows a mechanism the model has no part for
(`agreement.REAL_ONLY`, docs/fidelity.md) is counted, not compared.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from simharness.explore import strategies as sst
from simharness.run import run_scenario
from simharness.scenario import load_scenario
from simharness.scenario.loader import parse_scenario
from tests.conftest import SCENARIOS
from tests.fidelity.agreement import REAL_ONLY, disagreements, model_of, real_only
from tests.fidelity.layouts import layout
from tests.helpers import build, needs_mstar_stack

pytestmark = needs_mstar_stack()

N_GENERATED = int(os.environ.get("SIMHARNESS_STACK_LAYOUTS", "600"))
SHIPPED = sorted(p.name for p in SCENARIOS.glob("*.yaml"))


def _compare(sc: Any) -> tuple[list[str], list[str]]:
    """(disagreements, the stack's real-only mechanisms) for one scenario."""
    model = run_scenario(model_of(sc))
    real = run_scenario(sc, "mstar")
    return disagreements(model, real), real_only(real)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_scenario_agrees(name):
    found, only = _compare(load_scenario(SCENARIOS / name))
    assert only == [] and found == []


def _config_names() -> list[str]:
    try:
        from simharness.mstar.package import default_config_names

        return default_config_names()
    except Exception:  # mstar-ai missing: the module's marks skip
        return []


@pytest.mark.parametrize("name", _config_names())
def test_every_default_config_agrees(name):
    from simharness.mstar.build import import_config

    with contextlib.redirect_stderr(io.StringIO()):
        raw = import_config(name).raw
    found, only = _compare(parse_scenario(raw, source=f"{name}.yaml", default_name=name))
    assert only == [] and found == []


def family_examples(family: str, n: int, at: int = 0) -> list[dict[str, Any]]:
    """`n` scenarios of one fuzzer family, drawn from a fixed seed (the same ones every run)."""
    drawn: list[dict[str, Any]] = []

    @seed(at)
    @settings(max_examples=n, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(sst.scenarios(features=sst.FAMILIES[family]))
    def collect(raw: dict[str, Any]) -> None:
        drawn.append(raw)

    collect()
    return drawn


def generated(total: int) -> list[tuple[str, dict[str, Any]]]:
    """(name, raw scenario): half `layouts.layout`, half the families in turn."""
    out = [(f"layout {i}", layout(i)) for i in range(total - total // 2)]
    families = sorted(sst.FAMILIES)
    per = max(1, (total // 2) // len(families))
    for family in families:
        out += [(f"{family} example {i}", raw) for i, raw in enumerate(family_examples(family, per))]
    return out


def test_generated_layouts_agree():
    failed: list[str] = []
    only: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    cases = generated(N_GENERATED)
    for name, raw in cases:
        sc = build(raw)
        found, labels = _compare(sc)
        only.update(labels)
        if labels:
            continue
        outcomes[run_scenario(sc, "mstar").outcome] += 1
        if found:
            failed.append(f"{name}:\n    " + "\n    ".join(found))
    print(f"\n{len(cases)} generated scenarios; real-only mechanisms: {dict(only)}; "
          f"compared: {dict(outcomes)}")
    assert failed == [], f"{len(failed)} of {len(cases)} disagree:\n" + "\n".join(failed[:5])
    assert set(only) <= set(REAL_ONLY)
    # Not a suite of trivial runs: clean ones, and hazards both sides show.
    assert outcomes["pass"] > len(cases) // 2 and outcomes["fail"] > 0


def test_a_model_with_the_old_loop_order_is_caught():
    """Without 0.2.1's loop order (choose before reading) the model picks other batches; the
    comparison must see it on a shipped CFG layout."""
    sc = load_scenario(SCENARIOS / "bagel_cfg_2gpu.yaml")
    real = run_scenario(sc, "mstar")
    import msgspec

    old = model_of(sc)
    options = dict(old.runtime.options, choose_first=False)
    old = msgspec.structs.replace(old, runtime=msgspec.structs.replace(old.runtime, options=options))
    assert disagreements(run_scenario(old), real)


def test_a_real_only_mechanism_is_recognised():
    """A loop's accumulated output read by two nodes of the next stage: mstar counts one
    reference for both, and the first consumer's release frees it under the second."""
    raw = layout(78)
    labels = real_only(run_scenario(build(raw), "mstar"))
    assert labels == ["freed-tensor"]


def test_the_end_of_a_stream_to_a_rank_without_its_buffer_is_real_only():
    """`gaps/no_stream_buffer_end.yaml`: the consumer partition's walk is a loop, so mstar makes
    no StreamBuffer for it and the producer_done it gets goes nowhere (the producer never sent an
    item, so no KeyError says so). The stack run names the mechanism; the model, which makes the
    buffer and ends the loop on the empty final chunk, passes."""
    sc = load_scenario(Path(__file__).parent / "gaps" / "no_stream_buffer_end.yaml")
    stack = run_scenario(sc, "mstar")
    assert real_only(stack) == ["no-stream-buffer"]
    dropped = [e for e in stack.result.events if type(e).__name__ == "Dropped"]
    assert [(e.rank, e.what) for e in dropped] == [(1, "producer_done")]
    assert dict(stack.result.outcomes) == {"r0": "hung"}
    assert run_scenario(model_of(sc)).outcome == "pass"


def test_a_late_new_request_remakes_the_stream_buffer_and_loses_an_item():
    """`gaps/new_request_remakes_buffers.yaml`: the second NEW_REQUEST of a rank hosting two
    partitions comes after a streamed item; mstar makes the request's StreamBuffer anew and the
    item registered in the first is never consumed. The model, with one NEW_REQUEST per rank,
    passes."""
    from simharness.mstar.stack_record import record_stack

    sc = load_scenario(Path(__file__).parent / "gaps" / "new_request_remakes_buffers.yaml")
    rec = record_stack(sc)
    calls = [c for c in rec.buffers if c.key == (1, "r0", "st")]
    # the first buffer takes the item and releases it; the second, made in its place, has none
    assert [c.op for c in calls] == ["make", "register", "put", "pop", "make", "done", "pop"]
    assert calls[3].args["items"] == [2] and calls[6].args["items"] == []
    assert calls[6].args["final"]
    assert any("1 of the 1 item sent was never consumed" in v.message for v in rec.violations)
    assert run_scenario(model_of(sc)).outcome == "pass"


def test_a_worker_given_no_tp_rank_by_its_conductor_is_real_only():
    """`gaps/shifted_tp_rank.yaml`: no worker graph uses rank 0, and mstar's Conductor looks each
    worker's TP rank up by its position among the ranks in use, so worker_1 has none and raises
    routing a's output. The stack run names the mechanism; the model, which has no such lookup,
    completes the request."""
    sc = load_scenario(Path(__file__).parent / "gaps" / "shifted_tp_rank.yaml")
    stack = run_scenario(sc, "mstar")
    assert real_only(stack) == ["shifted-tp-rank"]
    assert dict(stack.result.outcomes) == {"r0": "hung"}
    assert run_scenario(model_of(sc)).outcome == "pass"


def test_only_the_report_that_ends_a_pass_ends_a_stream_partition():
    """`gaps/tp_sp_stream_consumer.yaml`: one rank of a TP x SP consumer takes the final chunk in
    the first pass, the others in a second; the report that completes the first pass consumed no
    final chunk, so mstar's Conductor starts the second, which hangs in its collective. The model
    agrees; as it was (any rank's report of a final chunk ended the partition) it completed."""
    import msgspec

    sc = load_scenario(Path(__file__).parent / "gaps" / "tp_sp_stream_consumer.yaml")
    real = run_scenario(sc, "mstar")
    model = run_scenario(model_of(sc))
    assert disagreements(model, real) == []
    assert dict(model.result.outcomes) == dict(real.result.outcomes) == {"r0": "hung"}
    old = model_of(sc)
    old = msgspec.structs.replace(old, runtime=msgspec.structs.replace(
        old.runtime, name="tests.fidelity.wrong:ModelEndsOnAnyFinalChunk"))
    assert disagreements(run_scenario(old), real)


def test_a_stop_loops_overtaken_by_its_stop_time_is_dropped_as_in_mstar():
    """`gaps/stop_loops_overtaken.yaml`: the stop time reaches rank 2 in b's data before a's
    delayed STOP_LOOPS, which mstar then drops; c's copy of the loop runs on until a's next stop.
    The model agrees with the real stack; the model as it was (a stop applied once per pass) does
    not."""
    import msgspec

    sc = load_scenario(Path(__file__).parent / "gaps" / "stop_loops_overtaken.yaml")
    real = run_scenario(sc, "mstar")
    model = model_of(sc)
    assert disagreements(run_scenario(model), real) == []
    stops = [e for e in real.result.events if type(e).__name__ == "LoopStopped" and e.rank == 2]
    assert len(stops) == 1  # the first STOP_LOOPS to rank 2 was dropped, the second applied
    old = msgspec.structs.replace(model, runtime=msgspec.structs.replace(
        model.runtime, name="tests.fidelity.wrong:ModelStopsOncePerPass"))
    assert disagreements(run_scenario(old), real)


def test_speculation_onto_a_successor_makes_mstar_take_an_extra_pass():
    """`gaps/successor_speculation.yaml`: the real stack runs c right after b (speculation onto
    the node b feeds), so c's loop-back at the last iteration is routed before the loop ends
    (d ends it), queues a again, and a runs a third time: chosen while d runs, before d's
    completion resets the worker graph. The model with `LoopPolicy.successors` agrees; without
    it, it runs d before c and passes."""
    import msgspec

    sc = load_scenario(Path(__file__).parent / "gaps" / "successor_speculation.yaml")
    real = run_scenario(sc, "mstar")
    order = [e.node for e in real.result.events if type(e).__name__ == "BatchStarted"]
    assert order[:4] == ["a", "b", "c", "d"] and order.count("a") == 3
    assert any(v.check == "forwards" and "extra pass" in v.message for v in real.violations)
    model = model_of(sc)
    assert disagreements(run_scenario(model), real) == []
    options = dict(model.runtime.options, successors=False)
    old = msgspec.structs.replace(model, runtime=msgspec.structs.replace(model.runtime, options=options))
    old_run = run_scenario(old)
    assert old_run.outcome == "pass" and disagreements(old_run, real)


def test_an_ack_that_wakes_an_idle_rank_is_modelled():
    """`gaps/ack_wakes_idle_rank.yaml`: a TENSOR_RECEIVED from the API server wakes rank 0,
    whose poll hands the stream consumer a chunk before producer_done comes. The model with
    `LoopPolicy.acks` agrees with the stack; without, it runs the consumer once less."""
    import msgspec

    sc = load_scenario(Path(__file__).parent / "gaps" / "ack_wakes_idle_rank.yaml")
    real = run_scenario(sc, "mstar")
    model = model_of(sc)
    assert disagreements(run_scenario(model), real) == []
    options = dict(model.runtime.options, acks=False)
    old = msgspec.structs.replace(model, runtime=msgspec.structs.replace(model.runtime, options=options))
    assert any(d.startswith("forwards") for d in disagreements(run_scenario(old), real))


def test_a_follower_that_consumes_a_stream_keeps_its_own_copy():
    """`gaps/tp_stream_to_a_follower.yaml`: in mstar the TP follower puts each streamed item in
    its own StreamBuffer and rank 0 sends nothing; the model agrees, the model as it was (rank 0
    streams to every consumer rank) does not."""
    import msgspec

    sc = load_scenario(Path(__file__).parent / "gaps" / "tp_stream_to_a_follower.yaml")
    real = run_scenario(sc, "mstar")
    model = model_of(sc)
    assert disagreements(run_scenario(model), real) == [] and real.outcome == "pass"
    routes = {(e.node, e.rank): [w for _, w in e.routes] for e in real.result.events
              if type(e).__name__ == "Forward" and e.node == "b" and e.rid == "r0"}
    assert routes == {("b", 0): ["client"], ("b", 1): ["stream:1"]}
    old = msgspec.structs.replace(model, runtime=msgspec.structs.replace(
        model.runtime, name="tests.fidelity.wrong:ModelStreamsFromTheLeaderOnly"))
    assert any(d.startswith("routes") for d in disagreements(run_scenario(old), real))


def test_a_tp_node_alone_in_another_walk_still_joins_its_collective(monkeypatch):
    """`gaps/tp_node_alone_in_another_walk.yaml`: c is tensor-parallel on ranks 0-1 in w0 and
    alone on rank 0 in w1. mstar's worker builds its TP group per node, and the forward's
    collectives run on it in every walk: r0's w1 batch waits for rank 1, which never runs a
    batch of c to meet it, and both requests hang. The model agrees on what ran and what hung;
    the model as it was (a lone batch joins no collective) ran r0 and passed it."""
    from simharness.runtime import worker_parts

    sc = load_scenario(Path(__file__).parent / "gaps" / "tp_node_alone_in_another_walk.yaml")
    real = run_scenario(sc, "mstar")
    model = run_scenario(model_of(sc))
    assert dict(real.result.outcomes) == dict(model.result.outcomes) == {"r0": "hung", "r1": "hung"}
    assert [d for d in disagreements(model, real) if not d.startswith(("outcome", "first"))] == []
    hang = next(v for v in model.violations if v.check == "liveness" and v.request == "r0")
    assert "waits in that batch's collective for rank 1" in hang.message

    def old_join(self, batch):
        batch.collective = batch.tp_number

    monkeypatch.setattr(worker_parts.Lockstep, "join", old_join)
    old = run_scenario(model_of(sc))
    assert old.result.outcomes["r0"] == "completed"


OPEN = sorted((Path(__file__).parent / "gaps" / "open").glob("*.yaml"))


@pytest.mark.parametrize("path", OPEN, ids=[p.stem for p in OPEN])
def test_an_open_difference_still_differs(path):
    """The differences the differential campaigns against the stack still find (docs/fidelity.md
    lists each with what is known of it). When one stops differing, this fails: move its file
    out of gaps/open/ and say in docs/fidelity.md what closed it."""
    sc = load_scenario(path)
    assert disagreements(run_scenario(model_of(sc)), run_scenario(sc, "mstar"))


def test_the_stack_arm_does_not_depend_on_the_hash_seed():
    """mstar sends to several workers by iterating sets of worker ids (string hash order, which
    PYTHONHASHSEED changes); the stack hands its sends to the network ordered by destination, so
    a jittered TP race gives the same trace in every process. Before, hash seeds 0 and 2 gave a
    failing and a passing run of this case."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = ("import simharness; r = simharness.run_scenario("
            "'scenarios/corpus/mstar-python__drain-dropped.yaml', 'mstar', seed=1, keep_trace=False); "
            "print(r.outcome, r.trace_digest)")
    got = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": h}, check=True).stdout
           for h in ("0", "2", "5")}
    assert len(got) == 1 and next(iter(got)).startswith("fail ")


@pytest.mark.parametrize("name", ["tp_follower_node_alone_in_another_walk.yaml",
                                  "replica_choice_with_tp.yaml"])
def test_a_tp_follower_never_schedules_the_node_it_follows_in(name):
    """`gaps/tp_follower_node_alone_in_another_walk.yaml` and `gaps/replica_choice_with_tp.yaml`:
    a rank that follows in a node's TP group runs that node only in its leader's batches, also
    in a walk where the node runs alone on it (mstar's TP groups are per node). The model agrees
    on every forward, route and violation; as it was (the follower scheduled the lone batch) it
    parted from the stack on both."""
    sc = load_scenario(Path(__file__).parent / "gaps" / name)
    model, stack = run_scenario(model_of(sc)), run_scenario(sc, "mstar")
    assert disagreements(model, stack) == []
    if name.startswith("tp_follower"):
        hang = next(v for v in model.violations if v.check == "liveness")
        assert "rank 1 runs a only in a batch of rank 0" in hang.message


def test_an_aborted_request_stays_open_until_every_rank_drained_it():
    """`gaps/abort_drain_with_a_stuck_rank.yaml`: the API gives up on a request whose rank waits
    in a collective for good; mstar's Conductor drains every rank before it removes an aborted
    request, and the stuck rank never answers, so the request stays open there. The model
    agrees; as it was (an aborted request dropped at once) it did not say so."""
    sc = load_scenario(Path(__file__).parent / "gaps" / "abort_drain_with_a_stuck_rank.yaml")
    model, stack = run_scenario(model_of(sc)), run_scenario(sc, "mstar")
    assert disagreements(model, stack) == []
    left = "the conductor ends with request r0 still open"
    assert any(v.message == left for v in model.violations)
    assert any(v.message == left for v in stack.violations)
    assert dict(model.result.outcomes) == {"r0": "hung"}


def test_a_tp_batch_is_in_flight_from_its_submit():
    """`gaps/tp_follower_batch_count.yaml`: mstar's TP leader submits a batch and reads its inbox
    at once (the collective is on the GPU), so a producer_done that comes while the follower is on
    its way is read after the batch; the leader pops its empty final chunk then, runs the consumer
    again on it and waits in that batch's collective for a follower that finished. The model
    agrees on every chunk, batch and violation; as it was (the batch started, and the inbox was
    read, only once the instance met) it popped the chunk during the batch and ran one batch."""
    sc = load_scenario(Path(__file__).parent / "gaps" / "tp_follower_batch_count.yaml")

    def pops(report):
        return [(e.t, e.index, e.final) for e in report.result.events
                if type(e).__name__ == "ChunkPopped" and e.rank == 0]

    model, stack = run_scenario(model_of(sc)), run_scenario(sc, "mstar")
    assert disagreements(model, stack) == []
    assert pops(model) == pops(stack)
    assert sorted(v.message for v in model.violations) == sorted(v.message for v in stack.violations)
    assert any("rank 0 ran 2" in v.message for v in model.violations)  # the leader's extra batch
