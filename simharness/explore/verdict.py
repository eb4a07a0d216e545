"""A verdict for every finding: is it mstar's, the runtime under test's, or ours?

A failure found under one runtime says nothing yet about mstar itself. `verdict` runs the case
under the real mstar stack (``--runtime mstar``: mstar-ai's own Conductor, Workers and
scheduler) and under the other model profiles (recorded with it: which of them fail, and how), and says:

* ``real``: the real stack fails the same way (the same check; at the case's seed, or, for a
  case whose schedule draws random delays, at the first of `OTHER_SEEDS` that shows it, since
  the stack sends more messages than the model and so draws its delays in another order);
* ``runtime-specific``: the real stack passes and so does our model of it (``mstar-python``
  under the stack's loop policy, `differential.aligned`): the behaviour belongs to the runtime
  under test (the pre-fix Rust profile's loop-exit drift; the reference profile's older loop
  and teardown policy);
* ``model-only``: the real stack passes where our model of it fails: a bug of ours, said loudly;
* ``unverified``: the real stack could not run it here (mstar-ai missing, or it refuses the
  layout), said with why.

A differential case (``diff:*``) is judged by which arm the real stack agrees with: an arm that
is the stack itself makes the divergence ``model-only``; otherwise the arm that parts from the
stack is the one the behaviour belongs to.

And the faults under which it happens, since mstar promises some and not others:

* ``none``;
* ``transport``: only what mstar's transport can do (delays, reordering across links, jitter, a
  slow rank);
* ``beyond``: a dropped or duplicated message or a crashed rank: a failure under those is not a
  bug of mstar by itself, and the verdict says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simharness.scenario.model import Scenario

#: the real stack's runtime name
STACK = "mstar"
#: our model of it
MODEL = "mstar-python"
#: seeds tried when the case's own does not show it and its schedule draws random delays
OTHER_SEEDS = range(40)

VERDICTS = ("real", "runtime-specific", "model-only", "unverified")
#: PCT runs of the real stack's own messages a searched schedule's verdict tries, at most (a count,
#: not a time: a recorded verdict must come out the same on any machine)
STACK_SEARCH_RUNS = 30
#: why a verdict is unverified where the real stack cannot run
NOT_INSTALLED = "mstar-ai's stack is not installed here (pip install 'simharness[mstar]')"
FAULTS = ("none", "transport", "beyond")


@dataclass
class Verdict:
    mstar: str
    faults: str
    #: the real stack's signature on the case (None: it passes), "" when it did not run
    stack: str | None
    #: the seed the stack was judged at
    stack_seed: int | None = None
    #: why the stack did not run (``unverified``)
    why: str = ""
    #: the beyond-promise faults, by kind
    fault_kinds: list[str] = field(default_factory=list)
    #: a differential finding's verdict (the runtimes part; nothing "fails")
    differential: bool = False
    #: the other model profiles on the case: name -> signature, or "pass"
    profiles: dict[str, str] = field(default_factory=dict)
    #: a searched schedule's case: the PCT run of the stack's own messages that showed it
    stack_run: int | None = None

    def text(self) -> str:
        """One line: what the verdict means."""
        at = ("" if self.stack_seed is None else f" (seed {self.stack_seed})") if self.stack_run is None \
            else f" (PCT run {self.stack_run} of its own messages)"
        if self.differential:
            head = {
                "real": f"real mstar behaviour{at}",
                "runtime-specific": f"specific to the runtime under test: the other runtime "
                                    f"agrees with the real stack{at}",
                "model-only": f"MODEL-ONLY: our model parts from the real stack here{at}; a bug "
                              f"of simharness's model, not of mstar",
                "unverified": f"unverified: {self.why}",
            }[self.mstar]
            return f"{head}; {self._faults_text()}"
        # the stack passes, or fails only in another way (its own root cause)
        other = "" if self.stack is None else f"fails otherwise ({self.stack})"
        head = {
            "real": f"real mstar behaviour: mstar-ai's own stack fails the same way{at}",
            "runtime-specific": (f"specific to the runtime under test: the real stack and our "
                                 f"model of it pass{at}" if not other else
                                 f"specific to the runtime under test: the real stack {other} and "
                                 f"our model of it not this way{at}"),
            "model-only": f"MODEL-ONLY: the real stack {other or 'passes'}{at}; a bug of "
                          f"simharness's model, not of mstar",
            "unverified": f"unverified: {self.why}",
        }[self.mstar]
        return f"{head}; {self._faults_text()}"

    def _faults_text(self) -> str:
        return {
            "none": "no fault injected",
            "transport": "under delays mstar's transport can make",
            "beyond": (f"under {', '.join(self.fault_kinds)}, beyond what mstar promises to "
                       f"survive: not a bug of mstar by itself"),
        }[self.faults]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mstar": self.mstar, "faults": self.faults}
        if not self.differential:  # a differential finding compares arms: nothing passes
            out["stack"] = self.stack if self.stack is not None else "pass"
        if self.stack_seed is not None:
            out["stack_seed"] = self.stack_seed
        if self.stack_run is not None:
            out["stack_run"] = self.stack_run
        if self.profiles:
            out["profiles"] = dict(self.profiles)
        out["text"] = self.text()
        return out


def faults_class(scenario: Scenario) -> tuple[str, list[str]]:
    """(`FAULTS` entry, the kinds beyond mstar's promise) of a scenario's faults and schedule."""
    beyond = sorted({f.kind for f in scenario.faults if not f.tolerated})
    if beyond:
        return "beyond", beyond
    if scenario.faults or scenario.schedule.active or scenario.schedule.deliveries:
        return "transport", []
    return "none", []


def stack_runs_here() -> bool:
    """Whether the real stack can run in this environment (mstar-ai and its extra installed)."""
    from simharness.runtime import registry

    return STACK in registry.runnable()


def verdict(scenario: Scenario, runtime: str, signature: str, against: str | None = None,
            until: float | None = None) -> Verdict:
    """The verdict on a finding: `signature` under `runtime` (``against`` for a differential
    one) on `scenario`. `until` (a `time.perf_counter` reading): no other seed is tried past it,
    so a campaign's budget holds."""
    faults, kinds = faults_class(scenario)
    if against is not None:
        return _differential(scenario, runtime, against, faults, kinds)
    check = signature.partition(":")[0]
    found = _verdict(scenario, runtime, signature, check, faults, kinds, until)
    found.profiles = _profiles(scenario, runtime)
    return found


def _profiles(scenario: Scenario, runtime: str) -> dict[str, str]:
    """How each model profile other than `runtime` fares on the case, at its seed."""
    from simharness.explore.signatures import signature_of
    from simharness.run import simulate
    from simharness.runtime.registry import PROFILES

    out = {}
    for name in PROFILES:
        if name != runtime:
            _, violations = simulate(scenario, name, keep_trace=False, digest=False)
            out[name] = signature_of(violations) or "pass"
    return out


def _verdict(scenario: Scenario, runtime: str, signature: str, check: str, faults: str,
             kinds: list[str], until: float | None) -> Verdict:
    from simharness.differential import blind_checks

    if check in blind_checks(STACK):
        return Verdict("unverified", faults, None, None,
                       f"the real stack cannot show a {check} failure (its fake engine has no "
                       f"KV-cache readiness)", kinds)
    run = seed = None
    # A searched schedule moves the model's messages; the stack sends its own: search its orders.
    searched = bool(scenario.schedule.deliveries) and runtime != STACK
    if searched:
        hit, why = stack_searched(scenario, check, until)
        stack_sig, run = (hit.signature, hit.run) if hit is not None else (None, None)
    else:
        stack_sig, seed, why = _stack(scenario, check, until)
    if why:
        return Verdict("unverified", faults, None, None, why, kinds)
    if stack_sig is not None and stack_sig.partition(":")[0] == check:
        return Verdict("real", faults, stack_sig, seed, stack_run=run, fault_kinds=kinds)
    if searched:
        return Verdict("unverified", faults, None, None,
                       f"the real stack showed no {check} failure in "
                       f"{STACK_SEARCH_RUNS} PCT runs of its own messages", kinds)
    if _fails(scenario, MODEL, check):
        return Verdict("model-only", faults, stack_sig, seed, fault_kinds=kinds)
    return Verdict("runtime-specific", faults, stack_sig, seed, fault_kinds=kinds)


def stack_searched(scenario: Scenario, check: str, until: float | None = None
                   ) -> tuple[Any, str]:
    """(the failure of `check` a search of the real stack's own orders of delivery found, a
    `search.Found`, or None; why the search could not run, or "") (`explore.search`)."""
    from simharness.errors import RuntimeRefused
    from simharness.explore.search import search

    if not stack_runs_here():
        return None, NOT_INSTALLED
    try:
        found = search(scenario, STACK, "pct", STACK_SEARCH_RUNS, seed=0, until=until,
                       stop_on=lambda sig: sig.partition(":")[0] == check)
    except RuntimeRefused as exc:
        return None, str(exc)
    for sig, f in found.found.items():
        if sig.partition(":")[0] == check:
            return f, ""
    if found.stopped == "time":
        return None, (f"the real stack showed no {check} failure in {found.runs} PCT runs of "
                      f"its own messages before the time budget ran out")
    return None, ""


def _fails(scenario: Scenario, runtime: str, check: str) -> bool:
    """Whether `runtime`, run as when compared with the stack (its loop policy), fails `check`."""
    from simharness.differential import aligned
    from simharness.run import simulate

    _, violations = simulate(aligned(scenario, runtime, STACK), runtime, keep_trace=False,
                             digest=False)
    return any(v.check == check for v in violations)


def _stack(scenario: Scenario, check: str, until: float | None = None
           ) -> tuple[str | None, int | None, str]:
    """(the stack's signature, the seed it was judged at, why it could not run: "" if it ran)."""
    import time

    import msgspec

    from simharness.errors import RuntimeRefused
    from simharness.explore.signatures import signature_of
    from simharness.run import simulate

    if not stack_runs_here():
        return None, None, NOT_INSTALLED
    seeds = [scenario.seed]
    if scenario.schedule.active:
        seeds += [s for s in OTHER_SEEDS if s != scenario.seed]
    first: str | None = None
    for seed in seeds:
        if seed != scenario.seed and until is not None and time.perf_counter() >= until:
            return None, None, (f"the real stack passes at the case's seed {scenario.seed}; the "
                                f"time budget ran out before other seeds were tried")
        sc = msgspec.structs.replace(scenario, seed=seed)
        try:
            _, violations = simulate(sc, STACK, keep_trace=False, digest=False)
        except RuntimeRefused as exc:
            return None, None, str(exc)
        sig = signature_of(violations)
        if seed == scenario.seed:
            first = sig
        if sig is not None and sig.partition(":")[0] == check:
            return sig, seed, ""
    return first, scenario.seed, ""


def _differential(scenario: Scenario, runtime: str, against: str, faults: str,
                  kinds: list[str]) -> Verdict:
    from simharness import differential
    from simharness.errors import RuntimeRefused
    from simharness.explore.execute import run_arms

    if STACK in (runtime, against):
        # the stack is one arm: the other is our model, and where they part the model is wrong
        return Verdict("model-only", faults, None, scenario.seed, fault_kinds=kinds,
                       differential=True)
    if not stack_runs_here():
        return Verdict("unverified", faults, None, None, NOT_INSTALLED, kinds)
    parts: list[str] = []
    for arm in (runtime, against):
        try:
            a, b, _ = run_arms(scenario, arm, STACK)
        except RuntimeRefused as exc:
            return Verdict("unverified", faults, None, None, str(exc), kinds)
        if differential.divergences(a, b):
            parts.append(arm)
    if parts == [runtime] or parts == [against]:
        mine = "model-only" if parts == [MODEL] else "runtime-specific"
        return Verdict(mine, faults, None, scenario.seed, fault_kinds=kinds, differential=True)
    return Verdict("unverified", faults, None, None,
                   "both arms part from the real stack" if parts else
                   "neither arm parts from the real stack", kinds)


__all__ = ["FAULTS", "NOT_INSTALLED", "OTHER_SEEDS", "VERDICTS", "Verdict", "faults_class",
           "stack_runs_here", "verdict"]
