"""Run one generated example, classify its outcome and name its failure.

`execute` parses a generated scenario (plain data), runs it under the runtime under test with
every built-in check plus a coverage observer, and classifies it:

* ``pass``: no violation;
* ``fail``: a runtime bug, named by its `signature` (``check:key``);
* ``fault_induced``: the scenario injects a fault mstar has no defence against (a duplicated or
  dropped message, a crashed rank) and the reference runtime (``mstar-python``) fails under the
  very same scenario too: the fault, not the runtime, is to blame. Under tolerated perturbations
  (delays, jitter, tie order, a slow rank) every failure counts;
* ``invalid``: the loader refused the example (a bug in the strategies; reported, never hidden).

The signature keeps what identifies a bug and drops what shrinking changes: the check that saw the
root cause (``loop_exit`` before the ``forwards`` and ``drain`` symptoms it causes) and a short
key for its kind (where a stray loop-back went; an extra, missing or misnumbered forward; a hang,
a timeout or a runaway; what was left behind).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from simharness.checks import Violation
from simharness.errors import ScenarioError
from simharness.events import LOCKSTEP_HOLD
from simharness.explore.coverage import CoverageObserver, static_features
from simharness.graph.derive import loop_back_pairs, loop_external_inputs
from simharness.run import simulate
from simharness.scenario.loader import parse_scenario
from simharness.scenario.model import Scenario

REFERENCE = "mstar-python"
#: Checks in the order their violations point at a root cause.
CHECK_PRIORITY = ("loop_exit", "forwards", "liveness", "streams", "tp_agreement", "kv_handoff",
                  "drain", "worker_graphs", "expect", "determinism")


@dataclass
class Outcome:
    status: str
    check: str | None = None
    signature: str | None = None
    messages: list[str] = field(default_factory=list)
    features: frozenset[str] = frozenset()
    nodes: int = 0
    ranks: int = 0
    error: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "fail"


def size_of(scenario: Scenario) -> tuple[int, int]:
    """(distinct node names, ranks) of a scenario: how big a failing case is."""
    nodes = {n for wf in scenario.walk_facts.values() for n in wf.nodes}
    return len(nodes), scenario.placement.num_ranks


def execute(raw: dict[str, Any], runtime: str, reference: str = REFERENCE) -> Outcome:
    try:
        scenario = parse_scenario(copy.deepcopy(raw), source="<fuzz>", default_name="fuzz")
    except ScenarioError as err:
        return Outcome("invalid", error=str(err))
    nodes, ranks = size_of(scenario)
    cov = CoverageObserver(scenario)
    result, violations = simulate(scenario, runtime, keep_trace=False, observers=[cov], digest=False)
    features = static_features(scenario, result.layout) | cov.features
    if not violations:
        return Outcome("pass", features=features, nodes=nodes, ranks=ranks)
    check, key = signature(violations, scenario)
    out = Outcome("fail", check, f"{check}:{key}", [v.message for v in violations[:3]], features,
                  nodes, ranks)
    untolerated = any(not f.tolerated for f in scenario.faults)
    if untolerated and (runtime == reference
                        or simulate(scenario, reference, keep_trace=False, digest=False)[1]):
        out.status = "fault_induced"
    return out


def signature(violations: list[Violation], scenario: Scenario | None = None) -> tuple[str, str]:
    """(check, key) naming the root cause among a run's violations.

    With the scenario, a hang's key also says what the blocked node waits for (`_wait_kind`).
    """
    by_check: dict[str, list[Violation]] = {}
    for v in violations:
        by_check.setdefault(v.check, []).append(v)
    check = min(by_check, key=lambda c: CHECK_PRIORITY.index(c) if c in CHECK_PRIORITY else 99)
    kinds = {_kind(v, scenario) for v in by_check[check]}
    order = _KEY_ORDER.get(check, ())
    key = min(kinds, key=lambda k: order.index(k) if k in order else len(order))
    return check, key


_KEY_ORDER = {
    "loop_exit": ("peer", "sibling", "self", "local"),
    "forwards": ("extra-after-loop", "extra", "unexpected", "missing", "counters"),
    "liveness": ("runaway", "hang-gate", "hang-lockstep", "hang-reinjection", "hang-seed",
                 "hang-loop-back", "hang-input", "hang-edge", "hang", "timeout-gate",
                 "timeout-lockstep", "timeout-reinjection", "timeout-seed",
                 "timeout-loop-back", "timeout-input", "timeout-edge", "timeout",
                 "never-admitted"),
    "drain": ("held-at-teardown", "dropped", "parked", "state-left", "conductor-left", "busy"),
    "worker_graphs": ("unexpected-report", "never-reported"),
    "streams": ("order", "order-across-ranks", "finals", "unconsumed", "passes", "other"),
}

#: streams: what a violation's message says went wrong -> its key. Items out of order on one
#: link (a link that reorders), items of several producer ranks in another order than sent
#: (mstar orders nothing across links) and the final-chunk race mstar leaves open
#: (producer_done overtaking the last item, quirk Q7) are different failures, and the corpus
#: must not know one as the other.
_STREAM_KEYS = (("out of order, lost or duplicated", "order"), ("was due", "order"),
                ("in another order than sent", "order-across-ranks"),
                ("final chunk", "finals"), ("never consumed", "unconsumed"),
                ("passes for", "passes"))


def _kind(v: Violation, scenario: Scenario | None = None) -> str:
    msg = v.message
    if v.check == "loop_exit":
        wg = v.details.get("wg")
        kinds = set()
        for e in v.details.get("edges", []):
            to = e["to"]
            if to.startswith("rank:"):
                kinds.add("self" if int(to[5:]) == v.rank else "peer")
            elif to.startswith("local:"):
                kinds.add("local" if to[6:] == wg else "sibling")
        order = _KEY_ORDER["loop_exit"]
        return min(kinds, key=order.index) if kinds else "local"
    if v.check == "forwards":
        if "after the loop ended" in msg:
            return "extra-after-loop"
        if "extra forward" in msg:
            return "extra"
        if "where none were expected" in msg:
            return "unexpected"
        if "stopped" in msg:
            return "missing"
        return "counters"
    if v.check == "liveness":
        if "never admitted" in msg:
            return "never-admitted"
        if v.details.get("reason") == "runaway":
            return "runaway"
        head = "timeout" if v.details.get("reason") == "timeout" else "hang"
        wait = _wait_kind(v, scenario)
        return f"{head}-{wait}" if wait else head
    if v.check == "drain":
        for needle, key in (("while it still held", "held-at-teardown"),
                            ("parked for removed", "parked"),
                            ("dropped", "dropped"),
                            ("still holds state", "state-left"),
                            ("the conductor ends", "conductor-left"),
                            ("still busy", "busy")):
            if needle in msg:
                return key
        return "other"
    if v.check == "worker_graphs":
        return "unexpected-report" if "unexpected" in msg else "never-reported"
    if v.check == "streams":
        return next((key for needle, key in _STREAM_KEYS if needle in msg), "other")
    return "count" if v.check == "expect" else "other"


def _wait_kind(v: Violation, scenario: Scenario | None) -> str:
    """What a hang waits for, the most telling kind among its blocked nodes.

    ``gate``: an engine gate; ``lockstep``: a TP follower's ready node, held because the
    follower runs only its leader's batches; ``reinjection``: a loop's external input that the loop re-routes
    at each advance; ``seed``: the first copy of a loop-back input (from the conductor or a node
    before the loop); ``loop-back``: a later copy, from inside the loop; ``input``: a walk-start
    input; ``edge``: a signal from another node.
    """
    if scenario is None or not v.walk or not v.details.get("chain"):
        return ""
    wf = scenario.walk_facts[v.walk]
    kinds = [_entry_kind(entry, wf) for entry in v.details["chain"]]
    kinds = [k for k in kinds if k]
    return min(kinds, key=_WAIT_ORDER.index) if kinds else ""


_WAIT_ORDER = ("gate", "lockstep", "reinjection", "seed", "loop-back", "input", "edge")


def _entry_kind(entry: dict[str, Any], wf: Any) -> str:
    gate = entry.get("gate")
    if gate:
        return "lockstep" if gate.startswith(LOCKSTEP_HOLD) else "gate"
    missing = entry.get("missing") or []
    if not missing:
        return ""
    node, name, counter = entry["node"], missing[0], entry.get("counter")
    pair = (name, node)
    loops = wf.loops_of.get(node, ())
    if loops:
        if pair in loop_back_pairs(loops[-1]):
            return "seed" if not counter else "loop-back"
        if counter and any(pair in loop_external_inputs(lp) for lp in loops):
            return "reinjection"
    if pair in wf.start_inputs:
        return "input"
    return "edge"
