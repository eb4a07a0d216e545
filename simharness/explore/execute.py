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
root cause (the reporting check of the lowest `Check.priority`: ``loop_exit`` before the
``forwards`` and ``drain`` symptoms it causes) and the kind of its most telling violation (its
`Check.kinds` order: where a stray loop-back went; an extra, missing or misnumbered forward; a
hang, a timeout or a runaway; what was left behind). Both come from the checks, which set each
violation's kind where they make it: no message's wording enters a signature.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simharness.checks import BUILTIN_CHECKS, KNOWN_CHECKS, UNRANKED, Check, Violation
from simharness.errors import ScenarioError
from simharness.explore.coverage import CoverageObserver, static_features
from simharness.run import simulate
from simharness.scenario.loader import parse_scenario
from simharness.scenario.model import Scenario

REFERENCE = "mstar-python"


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


def execute(raw: dict[str, Any], runtime: str, reference: str = REFERENCE,
            checks: Sequence[type[Check]] = BUILTIN_CHECKS) -> Outcome:
    """Run one generated example under `runtime` with every check of `checks` and classify it."""
    try:
        scenario = parse_scenario(copy.deepcopy(raw), source="<fuzz>", default_name="fuzz")
    except ScenarioError as err:
        return Outcome("invalid", error=str(err))
    nodes, ranks = size_of(scenario)
    cov = CoverageObserver(scenario)
    result, violations = simulate(scenario, runtime, keep_trace=False, observers=[cov], digest=False,
                                  checks=checks)
    features = static_features(scenario, result.layout) | cov.features
    if not violations:
        return Outcome("pass", features=features, nodes=nodes, ranks=ranks)
    check, key = signature(violations, checks=(*KNOWN_CHECKS, *checks))
    out = Outcome("fail", check, f"{check}:{key}", [v.message for v in violations[:3]], features,
                  nodes, ranks)
    untolerated = any(not f.tolerated for f in scenario.faults)
    if untolerated and (runtime == reference
                        or simulate(scenario, reference, keep_trace=False, digest=False, checks=checks)[1]):
        out.status = "fault_induced"
    return out


def signature(violations: list[Violation], scenario: Scenario | None = None,
              checks: Iterable[type[Check]] = KNOWN_CHECKS) -> tuple[str, str]:
    """(check, kind) naming the root cause among a run's violations: the reporting check of the
    lowest priority, and the first of its kinds (in its `Check.kinds` order) among its
    violations. `checks`: the classes that may have reported (a check of another name ranks
    last). The scenario is not needed (each violation carries its kind); callers may pass it.
    """
    classes = {c.name: c for c in checks}
    by_check: dict[str, list[Violation]] = {}
    for v in violations:
        by_check.setdefault(v.check, []).append(v)
    check = min(by_check, key=lambda name: priority_of(name, classes))
    cls = classes.get(check)
    order = cls.kinds if cls is not None else ()
    key = min((v.kind for v in by_check[check]),
              key=lambda k: order.index(k) if k in order else len(order))
    return check, key


def priority_of(name: str, classes: dict[str, type[Check]] | None = None) -> int:
    """The priority of the check called `name` among `classes` (name -> class; the known
    checks by default), `UNRANKED` for one of another name."""
    cls = (classes if classes is not None else _KNOWN).get(name)
    return cls.priority if cls is not None else UNRANKED


_KNOWN = {c.name: c for c in KNOWN_CHECKS}
