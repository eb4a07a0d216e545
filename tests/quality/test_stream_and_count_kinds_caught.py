"""Each kind of `streams`, `forwards` and `expect` violation, caused on purpose, is reported with
its own message."""

from __future__ import annotations

from simharness import events as ev
from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS

#: one tts_300 request: 300 decode steps, 301 streamed tokens, 41 SNAC chunks (see orpheus.yaml)
ONE_TTS_300 = "workload=[{request: tts_300, count: 1}]"


def _load(name, *sets):
    return load_scenario(SCENARIOS / f"{name}.yaml", list(sets))


def _messages(violations):
    return [v.message for v in violations]


# -- expect -------------------------------------------------------------------------------------


def test_a_per_request_kind_expectation_is_checked_and_named():
    sc = _load("orpheus", ONE_TTS_300, "expect.per_request_kind.tts_300.prefill.LLM=2")
    rep = run_scenario(sc, "mstar-python")
    assert [(v.check, v.message) for v in rep.violations] == [
        ("expect", "expected 2 forwards of LLM in prefill per request "
                   "(expect.per_request_kind.tts_300), got 1 on rank 0")]


def test_each_expect_message_names_the_key_its_count_came_from():
    sc = _load("orpheus", "workload=[{request: tts_300, count: 1}, {request: tts, count: 1}]",
               "expect.forwards_per_request.prefill.LLM=2")
    rep = run_scenario(sc, "mstar-python")
    # tts has no count of its own for prefill; tts_300's own count (1) wins over the shared one.
    kind = {e.rid: e.request_kind for e in rep.result.events if type(e) is ev.Admitted}
    assert [(kind[v.request], v.message) for v in rep.violations] == [
        ("tts", "expected 2 forwards of LLM in prefill per request (expect.forwards_per_request), "
                "got 1 on rank 0")]
