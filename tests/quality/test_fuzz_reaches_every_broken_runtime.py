"""Reach: every runtime broken on purpose in this folder is found by a small fuzz search.

tests/README.md's rule, for every check (streams, tp_agreement, kv_handoff and worker_graphs
included): a search over generated scenarios, restricted to the feature family that holds the
mechanism (`strategies.FAMILIES`), turns up a scenario on which the broken runtime fails the check
it breaks while the reference runtime (mstar-python) does not fail that check. Only tolerated
perturbations are generated, so the failure is the runtime's.

Each search is bounded by a number of examples, never by time (speed lives in benchmarks):
`MAX_EXAMPLES` at the slowest rate a family runs on one loaded core (about 10 examples per second)
is the issue's 60 s bound per campaign. The seed is fixed, so the example that finds each runtime
is the same on every run; most are found within a few dozen examples, the slowest within 300.
"""

from __future__ import annotations

import copy
from random import Random

import pytest
from hypothesis import HealthCheck, Phase, find, settings

from simharness import strategies as sst
from simharness.explore.execute import REFERENCE
from simharness.explore.local_constants import without_local_constants
from simharness.run import simulate
from simharness.scenario import parse_scenario

#: A campaign of at most 60 s: 600 examples at 10 per second.
CAMPAIGN_BOUND_S = 60
MAX_EXAMPLES = 600

BUDGET = settings(max_examples=MAX_EXAMPLES, database=None, phases=[Phase.generate], deadline=None,
                  derandomize=False, suppress_health_check=list(HealthCheck))

Q = "tests.quality."

#: (broken runtime, the checks that catch it, the feature family that reaches its mechanism)
CASES = [
    # streams
    ("broken:LosesFinalItem", {"streams"}, "streams"),
    ("broken:DuplicatesFinalChunk", {"streams"}, "streams"),
    ("broken_streams:SkipsChunkIndex", {"streams"}, "streams"),
    ("broken_streams:DropsMiddleItem", {"streams"}, "streams"),
    ("broken_streams:FinalDespiteContinue", {"streams"}, "streams"),
    ("broken_streams:ChunkAfterFinal", {"streams"}, "streams"),
    ("broken_streams:ReplaysChunks", {"streams"}, "streams"),
    # dynamic loops, STOP_LOOPS, speculation
    # (a late STOP_LOOPS lets the peer's copy route its loop-back: an extra pass, or a hang)
    ("broken:LateStopLoops", {"forwards", "liveness"}, "dynamic"),
    ("broken_streams:SpeculatesPastStop", {"forwards"}, "dynamic"),
    # TP instances
    ("broken:FollowerEmits", {"tp_agreement"}, "tp"),
    ("broken_teardown:FollowerOwnOrder", {"tp_agreement"}, "tp"),
    ("broken_teardown:LeaderSpeculates", {"tp_agreement"}, "tp"),
    # KV hand-off
    ("broken:SkipsKvPull", {"kv_handoff"}, "kv"),
    # worker-graph accounting, forwards outside loops, replicas, teardown, admission
    ("broken:MissingWorkerGraphsDone", {"worker_graphs"}, "teardown"),
    ("broken_streams:RerunsLastNode", {"forwards"}, "teardown"),
    ("broken_streams:RunsEveryReplica", {"forwards"}, "teardown"),
    ("broken_teardown:LeaksRequestState", {"drain"}, "teardown"),
    ("broken_teardown:StaysBusy", {"drain"}, "teardown"),
    ("broken_teardown:ForgetsEndedRequests", {"drain"}, "teardown"),
    ("broken_teardown:NeverAdmitsQueued", {"liveness"}, "teardown"),
    # loops (also searched by full campaigns in test_fuzz_finds_broken_runtimes.py)
    ("broken:OffByOneLoop", {"forwards"}, "loops"),
    ("broken:NeverDropsLoopBacks", {"loop_exit"}, "loops"),
    ("broken:LeavesLoopState", {"drain"}, "loops"),
    ("broken:LosesCrossRankEdges", {"liveness"}, "loops"),
]


def _checks(raw, runtime):
    sc = parse_scenario(copy.deepcopy(raw))
    return {v.check for v in simulate(sc, runtime, keep_trace=False)[1]}


def search(runtime: str, checks: set[str], family: str, seed: int = 0):
    """The first generated scenario of `family` on which `runtime` fails one of `checks` and the
    reference runtime fails none of them (hypothesis.errors.NoSuchExample when there is none)."""

    def caught(raw):
        hit = _checks(raw, runtime) & checks
        return bool(hit) and not (_checks(raw, REFERENCE) & hit)

    # Without the literals of whatever modules the test session has loaded (as campaigns run):
    # they change the draws, so the search's result depended on which tests ran before it.
    with without_local_constants():
        return find(sst.scenarios(features=sst.FAMILIES[family], tolerated_only=True), caught,
                    settings=BUDGET, random=Random(seed))


#: Searches that start from another seed than 0, with how often 600 examples reach the mechanism
#: (seeds 0-9, measured when a dynamic loop's first stage became one node, docs/fuzzing.md
#: "Triage of the later campaigns"): a late STOP_LOOPS shows only on a dynamic loop split across
#: ranks with work after the stopper on the other rank, 7 of 10 (before: 4); a skipped KV pull
#: 8 of 10 (before: 8). Seed 0 is among the misses of both.
SEEDS = {"broken:LateStopLoops": 4, "broken:SkipsKvPull": 1}


@pytest.mark.parametrize("runtime,checks,family", CASES, ids=[c[0].split(":")[1] for c in CASES])
def test_a_small_search_finds_the_broken_runtime(runtime, checks, family):
    raw = search(Q + runtime, checks, family, SEEDS.get(runtime, 0))
    assert _checks(raw, Q + runtime) & checks


def test_every_check_is_reached_by_some_search():
    reached = set().union(*(c[1] for c in CASES))
    # determinism and expect are searched in test_fuzz_finds_broken_runtimes.py
    assert {"streams", "tp_agreement", "kv_handoff", "worker_graphs", "forwards", "loop_exit",
            "drain", "liveness"} <= reached


def test_each_family_generates_its_mechanism():
    """A family restricted search really builds the mechanism it is named for."""
    want = {"streams": lambda r: "streams" in r["graph"],
            "dynamic": lambda r: "stops" in str(r["graph"]["requests"]),
            "tp": lambda r: any(g.get("tp_size", 1) > 1 for g in r["placement"]["node_groups"]),
            "kv": lambda r: "kv_label" in str(r["graph"].get("nodes", {}))}
    for family, has in want.items():
        find(sst.scenarios(features=sst.FAMILIES[family]), has, settings=BUDGET, random=Random(0))
