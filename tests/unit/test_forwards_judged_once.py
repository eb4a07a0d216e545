"""The forwards check judges requests that ran alike once: a request whose forwards, admission,
walks and passes are the very interned values of a request already found clean is clean too.
What sets a request apart must still be judged on its own: these tests replay a clean run's
events into the check with one request changed after its twins were judged."""

from __future__ import annotations

import msgspec

from simharness import events as ev
from simharness.checks.base import RunContext, RunSetup
from simharness.checks.forwards import ForwardsCheck
from simharness.run import simulate
from simharness.scenario.loader import load_scenario
from tests.conftest import SCENARIOS

#: a request judged after three of its twins were found clean
ODD = "r3"


def _clean_run():
    sc = load_scenario(SCENARIOS / "bagel_cfg.yaml")
    result, violations = simulate(sc, "mstar-python")
    assert violations == []
    return sc, result


def _judge(sc, result, events) -> list:
    check = ForwardsCheck(RunSetup(sc, result.layout))
    for e in events:
        handler = getattr(check, f"on_{type(e).__name__}", None)
        if handler is not None:
            handler(e)
    return check.finish(RunContext(sc, result.layout, result.outcomes))


def test_a_clean_run_replayed_is_clean_and_its_requests_share_their_verdict():
    sc, result = _clean_run()
    assert _judge(sc, result, result.events) == []
    check = ForwardsCheck(RunSetup(sc, result.layout))
    for e in result.events:
        handler = getattr(check, f"on_{type(e).__name__}", None)
        if handler is not None:
            handler(e)
    ctx = RunContext(sc, result.layout, result.outcomes)
    # bagel_cfg's seven requests run alike: one verdict stands for all of them
    assert len({check._alike(ctx, f"r{i}") for i in range(7)}) == 1
    assert check._alike(ctx, "r0") is not None


def test_a_request_placed_otherwise_with_the_same_forwards_is_judged_on_its_own():
    sc, result = _clean_run()
    cfg_text = result.layout.wg_of[("image_gen_cfg", "LLM_cfg_text")]

    def placed_wider(e):
        if type(e) is ev.Admitted and e.rid == ODD:
            placement = tuple((wg, (*ranks, 2) if wg == cfg_text else ranks) for wg, ranks in e.placement)
            return msgspec.structs.replace(e, placement=placement)
        return e

    found = _judge(sc, result, [placed_wider(e) for e in result.events])
    assert found, "the request placed on one more rank was taken for its twins"
    assert {(v.request, v.node, v.rank) for v in found} == {(ODD, "LLM_cfg_text", 2)}


def test_a_request_with_one_forward_missing_is_judged_on_its_own():
    sc, result = _clean_run()
    first = next(i for i, e in enumerate(result.events)
                 if type(e) is ev.Forward and e.rid == ODD and e.node == "LLM_cfg_img")
    found = _judge(sc, result, result.events[:first] + result.events[first + 1:])
    assert {(v.request, v.node) for v in found} == {(ODD, "LLM_cfg_img")}


def test_requests_that_ran_alike_get_the_violations_each_would_get_judged_alone(monkeypatch):
    # Under the pre-fix Rust profile every request runs the same stray pass: each is judged
    # once for all, and each must still get its own violations, named for it.
    from simharness.checks.forwards import ForwardLog

    sc = load_scenario(SCENARIOS / "bagel_cfg.yaml")
    compared = []
    compare = ForwardsCheck._compare

    def counted(self, ctx, keys, *rest):
        compared.append(keys[0][3])
        return compare(self, ctx, keys, *rest)

    monkeypatch.setattr(ForwardsCheck, "_compare", counted)
    result, shared = simulate(sc, "mstar-rust-prefix")
    assert {"forwards", "expect"} <= {v.check for v in shared}
    assert len(compared) < len(result.outcomes), "no request was judged as another one was"
    monkeypatch.setattr(ForwardsCheck, "_alike", lambda self, ctx, rid: None)
    monkeypatch.setattr(ForwardLog, "frozen", lambda self, rid: None)  # expect's likeness
    _, alone = simulate(sc, "mstar-rust-prefix")
    assert [v.to_json() for v in shared] == [v.to_json() for v in alone]
    per_request = {v.request for v in shared if v.check == "forwards"}
    assert per_request == {f"r{i}" for i in range(7)}
