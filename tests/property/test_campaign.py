"""Campaigns are deterministic (same seed, same result, wherever the chunks run) and shrink the
loop-exit drift to a minimal case that replays exactly."""

from __future__ import annotations

import importlib.util

import pytest

from simharness.explore.campaign import CampaignConfig, run_campaign
from simharness.explore.corpus import replay, write_case
from simharness.explore.strategies import FAMILIES


def _fingerprint(r):
    return (r.examples, dict(r.statuses), dict(r.coverage),
            {s: (f.chunk, f.example, f.count) for s, f in r.findings.items()},
            {s: (sh.nodes, sh.ranks, sh.calls) for s, sh in r.shrunk.items()})


def test_same_seed_same_campaign():
    cfg = dict(runtime="mstar-rust-prefix", seed=3, examples=40, chunk_size=20, max_shrink_calls=40)
    a = run_campaign(CampaignConfig(**cfg))
    b = run_campaign(CampaignConfig(**cfg))
    assert a.findings and _fingerprint(a) == _fingerprint(b)
    c = run_campaign(CampaignConfig(**{**cfg, "seed": 4, "shrink": False}))
    assert _fingerprint(c)[:4] != _fingerprint(a)[:4]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs dask.distributed")
# Open defect, not a test to trust blindly: in one clean CI run of the whole suite the
# in-process campaign (not the Dask one) came out 34 pass / 3 fail / 3 fault_induced instead of
# 30 / 4 / 6, although fresh processes, other hash seeds and repeated runs in one process all give
# 30 / 4 / 6. Something in a long test session changes what the in-process campaign generates;
# until it is found this comparison may fail, and it must not block the suite.
@pytest.mark.xfail(strict=False, reason="the in-process campaign once differed inside a full test "
                   "session (open determinism defect; see the comment above)")
def test_dask_workers_give_the_in_process_result():
    cfg = dict(runtime="mstar-rust-prefix", seed=5, examples=40, chunk_size=10, shrink=False)
    here = run_campaign(CampaignConfig(**cfg))
    there = run_campaign(CampaignConfig(**cfg, workers=2))
    assert _fingerprint(there) == _fingerprint(here)


def test_the_drift_shrinks_to_a_tiny_case_that_replays_exactly(tmp_path):
    # The loop family: new mechanisms in the default generator do not move this search.
    loops = FAMILIES["loops"]
    r = run_campaign(CampaignConfig("mstar-rust-prefix", seed=0, examples=50, chunk_size=50,
                                    features=loops))
    assert "loop_exit:peer" in r.findings
    sh = r.shrunk["loop_exit:peer"]
    assert sh.shrunk and sh.nodes <= 4 and sh.ranks <= 2
    path = write_case(tmp_path, sh.raw, "mstar-rust-prefix", "loop_exit:peer", seed=0, example=0,
                      nodes=sh.nodes, ranks=sh.ranks)
    again = replay(path)
    assert again.ok, again.message
    assert again.digest == again.expected_digest
    for runtime in ("mstar-python", "mstar-rust"):
        r2 = run_campaign(CampaignConfig(runtime, seed=0, examples=50, chunk_size=50, shrink=False,
                                         features=loops))
        assert not any(s.startswith("loop_exit") for s in r2.findings)
