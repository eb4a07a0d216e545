"""Campaigns are deterministic (same seed, same result, wherever the chunks run) and shrink the
loop-exit drift to a minimal case that replays exactly."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

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
def test_dask_workers_give_the_in_process_result():
    cfg = dict(runtime="mstar-rust-prefix", seed=5, examples=40, chunk_size=10, shrink=False)
    here = run_campaign(CampaignConfig(**cfg))
    there = run_campaign(CampaignConfig(**cfg, workers=2))
    assert _fingerprint(there) == _fingerprint(here)
    # a differential campaign too: its chunks carry the second runtime to the workers
    diff = dict(cfg, against="mstar-python")
    here = run_campaign(CampaignConfig(**diff))
    there = run_campaign(CampaignConfig(**diff, workers=2))
    assert _fingerprint(there) == _fingerprint(here) and here.findings
    assert all(s.startswith("diff:") for s in here.findings)


CFG = dict(runtime="mstar-rust-prefix", seed=5, examples=40, chunk_size=10, shrink=False)

# Runs in a fresh interpreter: the campaign, then again after importing a module of literals
# Hypothesis has not seen; prints both results and a digest of every example each generated.
_IMPORT_BETWEEN_TWO_RUNS = """
import hashlib, json
from simharness.explore import campaign
from tests.property.test_campaign import CFG, _plain

seen = []
real_execute = campaign.execute

def recording(raw, *args, **kw):
    seen.append(json.dumps(raw, sort_keys=True))
    return real_execute(raw, *args, **kw)

campaign.execute = recording

def generated():
    seen.clear()
    r = campaign.run_campaign(campaign.CampaignConfig(**CFG))
    return [hashlib.sha256("\\n".join(seen).encode()).hexdigest(), _plain(r)]

before = generated()
import many_literals
print(json.dumps([before, generated()]))
"""


def _plain(r):
    """The fingerprint as JSON lists, in an order that does not depend on the hash seed."""
    return [r.examples, sorted(map(list, r.statuses.items())), sorted(map(list, r.coverage.items())),
            sorted([s, f.chunk, f.example, f.count] for s, f in r.findings.items())]


def test_what_the_process_imported_does_not_change_a_campaign(tmp_path):
    # Hypothesis now and then draws a literal from the source of a local module loaded in the
    # process (here: the scenario's `seed`). In a full test session, a test module that imported
    # real_backends.transport added its port numbers and turned this campaign's 30 pass / 4 fail
    # / 6 fault_induced into 33 / 4 / 3. Campaigns run with that pool off (`local_constants`).
    ints = ", ".join(str(n) for n in range(100, 1000, 3))
    (tmp_path / "many_literals.py").write_text(
        f'"""Literals for Hypothesis to find."""\n\nINTS = ({ints}, 65000, 200000)\n')
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), root])}
    done = subprocess.run([sys.executable, "-c", _IMPORT_BETWEEN_TWO_RUNS], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (examples, fresh), (examples_after, after) = json.loads(done.stdout)
    assert examples_after == examples, "the import changed the examples generated"
    assert after == fresh
    # This process has imported whatever pytest collected (all of tests/ in a full session).
    assert _plain(run_campaign(CampaignConfig(**CFG))) == fresh


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


def test_hypothesis_gets_its_local_constants_back_after_the_last_campaign():
    from hypothesis.internal.conjecture import providers

    from simharness.explore.local_constants import without_local_constants

    original = providers._get_local_constants
    with without_local_constants():
        with without_local_constants():
            assert len(providers._get_local_constants()) == 0
        # the inner exit must not restore the pool while the outer campaign still runs
        assert len(providers._get_local_constants()) == 0
    assert providers._get_local_constants is original


def test_a_shrunk_case_reports_the_size_and_messages_of_the_scenario_it_returns(monkeypatch):
    # A stand-in for `execute` that fails every scenario and reports its nodes and ranks, so
    # that a stale size (Hypothesis's example's, not the reduced scenario's) would show.
    from simharness.explore import campaign
    from simharness.explore.execute import Outcome

    def names(tree):
        if isinstance(tree, dict):
            own = {tree["node"]} if isinstance(tree.get("node"), str) else set()
            return own.union(*map(names, tree.values()))
        return set().union(*map(names, tree)) if isinstance(tree, list) else set()

    def fails_always(raw, runtime, reference=None, against=None, schedule=None):
        nodes = names(raw["graph"]["walks"])
        ranks = {r for g in raw["placement"]["node_groups"] for r in g.get("ranks", [])}
        return Outcome("fail", "fake", "fake:any", sorted(nodes), nodes=len(nodes),
                       ranks=len(ranks))

    reduced = []
    reduce_scenario = campaign.reduce_scenario

    def recording(raw, *args):
        out = reduce_scenario(raw, *args)
        reduced.append((raw, out[0]))
        return out

    monkeypatch.setattr(campaign, "execute", fails_always)
    monkeypatch.setattr(campaign, "reduce_scenario", recording)
    # Skip the chunk's first examples (the simplest ones Hypothesis draws) and let Hypothesis run
    # one example only, so that the reduction has walks and nodes to delete.
    finding = campaign.Finding("fake:any", "fake", 0, 5, {}, 0, 0, [])
    sh = campaign.shrink(campaign.ChunkSpec("mstar-rust-prefix", 0, 0, 10), finding, max_calls=6)
    (started, returned), = reduced
    assert fails_always(started, "").nodes > fails_always(returned, "").nodes  # it deleted nodes
    assert sh.shrunk and sh.raw == returned
    again = fails_always(sh.raw, "")
    assert (sh.nodes, sh.ranks, sh.messages) == (again.nodes, again.ranks, again.messages)


def test_every_name_the_campaign_patches_is_in_the_installed_hypothesis():
    """Loud when a Hypothesis upgrade moves what `without_local_constants` patches: the
    campaign's replayability rests on it."""
    from hypothesis.internal.conjecture import providers

    from simharness.explore.local_constants import PATCHED

    assert [n for n in PATCHED if not hasattr(providers, n)] == []


def test_a_campaign_refuses_to_run_when_a_patched_name_is_gone(monkeypatch):
    from hypothesis.internal.conjecture import providers

    from simharness.explore.local_constants import HypothesisChanged, without_local_constants

    monkeypatch.delattr(providers, "_get_local_constants")
    with pytest.raises(HypothesisChanged, match="_get_local_constants"), without_local_constants():
        pass
