"""Coverage names the mechanisms a scenario uses and a run exercises: the shipped scenarios
written after real models show the stream, dynamic-loop, TP and KV features they hold."""

from __future__ import annotations

import pytest

from simharness.explore.coverage import UNIVERSE, CoverageObserver, static_features
from simharness.run import simulate
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS

ONE = ["workload=[{request: tts, count: 1}]",
       "graph.requests.tts.stops.decode_loop={uniform: [20, 40]}"]


def _features(name, sets=()):
    sc = load_scenario(SCENARIOS / f"{name}.yaml", list(sets))
    cov = CoverageObserver(sc)
    result, _ = simulate(sc, "mstar-python", keep_trace=False, observers=[cov])
    return static_features(sc, result.layout) | cov.features


@pytest.mark.parametrize("name,sets,expected", [
    ("orpheus", ONE, {"streams.sliding_window", "streams.producer_in_loop",
                      "streams.producer_outside_loop", "streams.final_chunk",
                      "streams.partial_final", "streams.producer_done", "edges.stream",
                      "dynamic.stop", "dynamic.drawn_count", "dynamic.speculating",
                      "dynamic.stop_self", "dynamic.overshoot", "kv.kv_node"}),
    ("orpheus_pd", ONE, {"kv.pd_walk_scoped", "kv.pull", "kv.remote_pages"}),
    ("orpheus_tp2", ONE, {"tp.tp_group", "tp.tp_loop", "kv.kv_node"}),
    ("qwen3omni_2gpu", ["workload=[{request: speech, count: 1}, {request: chat, count: 1}]"],
     {"streams.fixed_continue", "streams.left_context", "streams.consumer_loop",
      "streams.skipped_partition", "streams.empty_chunk"}),
    ("bagel_cfg_tp2", ["workload=[{request: t2i, count: 1}]"],
     {"tp.tp_group", "tp.tp_loop", "tp.tp1_and_tp"}),
])
def test_shipped_scenarios_show_their_mechanisms(name, sets, expected):
    got = _features(name, sets)
    assert expected <= got, sorted(expected - got)
    known = {f"{area}.{n}" for area, names in UNIVERSE.items() for n in names}
    assert got <= known, sorted(got - known)


def test_a_plain_loop_scenario_shows_none_of_them(bagel):
    cov = CoverageObserver(bagel)
    result, _ = simulate(bagel, "mstar-python", keep_trace=False, observers=[cov])
    got = static_features(bagel, result.layout) | cov.features
    assert not {f for f in got if f.split(".")[0] in ("streams", "dynamic", "tp", "kv")}
