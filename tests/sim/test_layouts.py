"""Every shipped layout runs as mstar derives it; the mechanisms behave as mstar's code does."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from simharness.rng import draw_stop
from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS

SHIPPED = sorted(p.stem for p in SCENARIOS.glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("runtime", ["mstar-python", "mstar-rust"])
def test_every_shipped_scenario_passes_under_correct_runtimes(name, runtime):
    report = run_scenario(load_scenario(SCENARIOS / f"{name}.yaml"), runtime)
    assert report.violations == [], [v.message for v in report.violations][:5]
    assert set(report.result.outcomes.values()) == {"completed"}


def _forwards(report):
    out = defaultdict(int)
    for e in report.result.events:
        if type(e).__name__ == "Forward":
            out[(e.rid, e.walk, e.node, e.rank)] += 1
    return out


def _kinds(report):
    return {e.rid: e.request_kind for e in report.result.events if type(e).__name__ == "Admitted"}


def snac_passes(items: int, window: int = 28, stride: int = 7) -> int:
    """mstar's SlidingWindow pass count: normal pops while at least a window is buffered, then
    one final flush (reference/mstar_semantics.md 6.3)."""
    return ((items - window) // stride + 1 if items >= window else 0) + 1


@pytest.mark.parametrize("name", ["orpheus", "orpheus_pd", "orpheus_tp2"])
def test_orpheus_counts_follow_the_token_count_and_the_28_7_window(name):
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    report = run_scenario(sc, "mstar-python")
    fw = _forwards(report)
    kinds = _kinds(report)
    decode_rank = 1 if name == "orpheus_pd" else 0
    snac_rank = 1 if name == "orpheus" else 0
    for rid, kind in kinds.items():
        tokens = draw_stop(sc.seed, rid, "LLM", 1, "decode_loop", sc.requests[kind].stops["decode_loop"])
        assert fw[(rid, "prefill", "LLM", 0)] == 1
        assert fw[(rid, "decode", "LLM", decode_rank)] == tokens
        assert fw[(rid, "snac_chunk", "snac_decoder", snac_rank)] == snac_passes(1 + tokens)
    # The decode loop speculates: each request's stop leaves exactly one discarded overshoot,
    # except on TP ranks, which never speculate.
    overshoots = Counter(e.rid for e in report.result.events if type(e).__name__ == "Overshoot")
    assert overshoots == ({} if name == "orpheus_tp2" else dict.fromkeys(kinds, 1))


def test_bagel_chat_prefills_once_and_decodes_until_eos():
    sc = load_scenario(SCENARIOS / "bagel_pd.yaml")
    report = run_scenario(sc, "mstar-python")
    fw = _forwards(report)
    for rid, kind in _kinds(report).items():
        assert fw[(rid, "prefill_text", "LLM", 0)] == 1
        if kind == "chat":
            n = draw_stop(sc.seed, rid, "default", 1, "decode_loop", sc.requests[kind].stops["decode_loop"])
            assert fw[(rid, "decode", "LLM", 1)] == n
    pulls = [e for e in report.result.events if type(e).__name__ == "KvPulled"]
    assert pulls and all(e.src == 0 and e.rank == 1 and e.tokens == 128 for e in pulls)


def test_tp2_cfg_layout_shows_the_stray_pass_on_every_rank_of_each_peer_group():
    report = run_scenario(load_scenario(SCENARIOS / "bagel_cfg_tp2.yaml"), "mstar-rust-prefix")
    fw = _forwards(report)
    rids = sorted(_kinds(report))
    for node, ranks in (("LLM", (0, 1)), ("LLM_cfg_text", (2, 3)), ("LLM_cfg_img", (4, 5))):
        for rank in ranks:
            assert [fw[(rid, "image_gen_cfg", node, rank)] for rid in rids] == [50] * len(rids)
    assert all(fw[(rid, "image_gen_cfg", "combine_cfg", 0)] == 49 for rid in rids)


def test_tp_followers_run_the_leaders_batches_in_order():
    report = run_scenario(load_scenario(SCENARIOS / "orpheus_tp2.yaml"), "mstar-python")
    seq = defaultdict(list)
    for e in report.result.events:
        if type(e).__name__ == "BatchStarted" and e.node == "LLM":
            seq[e.rank].append((e.walk, e.rids))
    assert seq[0] == seq[1] and len(seq[0]) > 100


def test_qwen_streams_and_partitions():
    sc = load_scenario(SCENARIOS / "qwen3omni_2gpu.yaml")
    report = run_scenario(sc, "mstar-python")
    done = [(e.rid, e.partition, e.reason) for e in report.result.events
            if type(e).__name__ == "PartitionDone"]
    kinds = _kinds(report)
    for rid, kind in kinds.items():
        parts = {p: r for q, p, r in done if q == rid}
        if kind == "chat":
            assert parts == {"Thinker": "walks_done"}
        else:
            assert parts == {"Thinker": "walks_done", "Talker": "walks_done", "Code2Wav": "final_chunk"}
    # Fixed(1) with continue_after_done never marks a chunk final; LeftContext ends with one.
    finals = Counter((e.edge, e.final) for e in report.result.events if type(e).__name__ == "ChunkPopped")
    assert finals[("thinker_states", True)] == 0
    assert finals[("codec_tokens", True)] == sum(1 for k in kinds.values() if k != "chat")


def test_max_output_tokens_ends_a_partition_at_a_pass_boundary():
    from tests.helpers import build, node, raw_scenario
    walk = node("LLM", ["text_inputs"], [("new_token", "client")])
    raw = raw_scenario({"prefill": walk}, [{"node_names": ["LLM"], "ranks": [0]}],
                       requests={"r": {"walks": [{"walk": "prefill", "times": 4}], "inputs": ["text_inputs"],
                                       "max_output_tokens": 2}})
    raw["graph"]["walks"]["prefill"]["outputs"][0]["new_token"] = True
    report = run_scenario(build(raw), "mstar-python")
    assert report.violations == []
    done = [e for e in report.result.events if type(e).__name__ == "PartitionDone"]
    assert [(e.partition, e.reason) for e in done] == [("default", "max_tokens")]
    assert sum(1 for e in report.result.events if type(e).__name__ == "Forward") == 2


@pytest.mark.parametrize("name", ["orpheus_tp2", "qwen3omni_2gpu", "bagel_pd"])
def test_layouts_are_deterministic(name):
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    assert run_scenario(sc, "mstar-python").trace_digest == run_scenario(sc, "mstar-python").trace_digest
