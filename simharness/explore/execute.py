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

The signature names the root cause and its mechanism (`explore.signatures`, which holds
its rules; `signature` is here too for the callers that import it from here).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simharness import differential
from simharness.checks import BUILTIN_CHECKS, KNOWN_CHECKS, Check, Violation
from simharness.errors import RuntimeRefused, ScenarioError
from simharness.explore.coverage import CoverageObserver, static_features
from simharness.explore.signatures import signature
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
    #: the example as it failed where a searched schedule made it fail (``schedule.deliveries``
    #: added), else None: the example as drawn
    raw: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.status == "fail"


def size_of(scenario: Scenario) -> tuple[int, int]:
    """(distinct node names, ranks) of a scenario: how big a failing case is."""
    nodes = {n for wf in scenario.walk_facts.values() for n in wf.nodes}
    return len(nodes), scenario.placement.num_ranks


def execute(raw: dict[str, Any], runtime: str, reference: str = REFERENCE,
            checks: Sequence[type[Check]] = BUILTIN_CHECKS, against: str | None = None,
            schedule: str | None = None, schedule_runs: int = 3) -> Outcome:
    """Run one generated example under `runtime` with every check of `checks` and classify it;
    with `against`, under both runtimes, the second as the oracle. With ``schedule="pct"`` an
    example that passes also runs under `schedule_runs` PCT schedules (seeded by the example
    itself), and one that fails there is returned with that schedule (`Outcome.raw`)."""
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
    raw_failed = None
    if not violations and schedule == "pct" and not scenario.schedule.deliveries:
        violations, raw_failed = _searched(raw, scenario, runtime, checks, schedule_runs)
        features |= {"schedule:pct"}
    if not violations:
        return Outcome("pass", features=features, nodes=nodes, ranks=ranks)
    check, key = signature(violations, checks=(*KNOWN_CHECKS, *checks))
    out = Outcome("fail", check, f"{check}:{key}", [v.message for v in violations[:3]], features,
                  nodes, ranks, raw=raw_failed)
    untolerated = any(not f.tolerated for f in scenario.faults)
    if untolerated and (runtime == reference
                        or simulate(scenario, reference, keep_trace=False, digest=False, checks=checks)[1]):
        out.status = "fault_induced"
    return out


def _searched(raw: dict[str, Any], scenario: Scenario, runtime: str,
              checks: Sequence[type[Check]], runs: int) -> tuple[list[Violation], dict[str, Any] | None]:
    """A few PCT schedules of a passing example: the violations of the first that fails, and the
    example with that schedule (shrunk to the deliveries it needs); ([], None) if none fails."""
    import hashlib
    import json

    from simharness.explore import search

    seed = int.from_bytes(hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode())
                          .digest()[:4], "big")
    found = search.search(scenario, runtime, "pct", runs + 1, seed=seed, checks=checks,
                          stop_at_first=True)
    if not found.found:
        return [], None
    sig, first = next(iter(found.found.items()))
    # a bounded number of replays, not a time: a campaign's result must not depend on the machine
    moved = search.shrink(scenario, runtime, first.moved, sig, checks=checks, max_calls=60)
    failed = copy.deepcopy(raw)
    failed["schedule"] = {"deliveries": search.schedule_entries(moved)}  # the search's, alone
    _, violations = simulate(search.with_deliveries(search.bare(scenario), moved), runtime,
                             keep_trace=False, digest=False, checks=checks)
    return violations, failed


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

