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

A *differential* example (``against``: a second runtime) runs under both, and the other runtime
is the oracle (`simharness.differential`): the example fails when the two runs part in forward
counts, loop counters, routed edges or outcome, named ``diff:<first kind>``, whatever the checks
say of either run. An example whose real-stack arm shows a mechanism the model has no part for
is ``incomparable`` (counted, not compared).

The signature keeps what identifies a bug and drops what shrinking changes: the check that saw the
root cause (the reporting check of the lowest `Check.priority`: ``loop_exit`` before the
``forwards`` and ``drain`` symptoms it causes) and the kind of its most telling violation (its
`Check.kinds` order: where a stray loop-back went; an extra, missing or misnumbered forward; a
hang, a timeout or a runaway; what was left behind), then, where the check names one, the
mechanism within that kind (`Violation.mechanism`: ``drain:dropped:remove_request:tp-follower``).
All come from the checks, which set them on each violation where they make it: no message's
wording enters a signature.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simharness import differential
from simharness.checks import BUILTIN_CHECKS, KNOWN_CHECKS, UNRANKED, Check, Violation
from simharness.errors import RuntimeRefused, ScenarioError
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
            checks: Sequence[type[Check]] = BUILTIN_CHECKS, against: str | None = None) -> Outcome:
    """Run one generated example under `runtime` with every check of `checks` and classify it;
    with `against`, under both runtimes, the second as the oracle."""
    try:
        scenario = parse_scenario(copy.deepcopy(raw), source="<fuzz>", default_name="fuzz")
    except ScenarioError as err:
        return Outcome("invalid", error=str(err))
    nodes, ranks = size_of(scenario)
    if against is not None:
        return _differential(scenario, runtime, against, checks, nodes, ranks)
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


def run_arms(scenario: Scenario, runtime: str, against: str,
             checks: Sequence[type[Check]] = BUILTIN_CHECKS, observers: Sequence[Any] = (),
             digest: bool = False) -> tuple[differential.Arm, differential.Arm, list[Any]]:
    """Both arms of a differential run, each as `differential.aligned` makes it, and their
    results (for digests)."""
    arms, results = [], []
    for i, (name, other) in enumerate(((runtime, against), (against, runtime))):
        sc = differential.aligned(scenario, name, other)
        result, violations = simulate(sc, name, keep_trace=True, digest=digest, checks=checks,
                                      observers=observers if i == 0 else ())
        arms.append(differential.Arm(name, result.events, dict(result.outcomes), violations))
        results.append(result)
    return arms[0], arms[1], results


def _differential(scenario: Scenario, runtime: str, against: str, checks: Sequence[type[Check]],
                  nodes: int, ranks: int) -> Outcome:
    cov = CoverageObserver(scenario)
    try:
        a, b, results = run_arms(scenario, runtime, against, checks, [cov])
    except RuntimeRefused as exc:  # the real code refuses the layout: nothing to compare
        return Outcome("incomparable", messages=[str(exc)], nodes=nodes, ranks=ranks)
    features = static_features(scenario, results[0].layout) | cov.features
    beyond = differential.incomparable(a, scenario) + differential.incomparable(b, scenario)
    if beyond:
        return Outcome("incomparable", messages=beyond, features=features, nodes=nodes, ranks=ranks)
    found = differential.divergences(a, b)
    sig = differential.signature(found)
    if sig is None:
        return Outcome("pass", features=features, nodes=nodes, ranks=ranks)
    return Outcome("fail", differential.CHECK, sig, [d.text((runtime, against)) for d in found[:3]],
                   features, nodes, ranks)


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
    # ... then the mechanism within that kind, where the check names one (the least, so that a
    # run showing two names the same one every time)
    mechanisms = sorted({v.mechanism for v in by_check[check] if v.kind == key and v.mechanism})
    return check, f"{key}:{mechanisms[0]}" if mechanisms else key


def signature_of(violations: list[Violation]) -> str | None:
    """``check:key`` of a run's violations (the corpus's failure signature), None for a pass."""
    if not violations:
        return None
    check, key = signature(violations)
    return f"{check}:{key}"


def priority_of(name: str, classes: dict[str, type[Check]] | None = None) -> int:
    """The priority of the check called `name` among `classes` (name -> class; the known
    checks by default), `UNRANKED` for one of another name."""
    cls = (classes if classes is not None else _KNOWN).get(name)
    return cls.priority if cls is not None else UNRANKED


_KNOWN = {c.name: c for c in KNOWN_CHECKS}
