"""The other runtime as the oracle: what two runs of one scenario must share, and where they part.

Two runtimes that both "work" can still drift apart (the project's first bug was such a drift:
one profile routed a loop-back past the loop's end, the other did not). `divergences` compares
two runs of the same scenario and seed and lists every difference, in the order of `KINDS`:

* ``forwards``: how many times a node ran per (walk, node, rank, request);
* ``counters``: the same number of forwards, with other loop counters;
* ``routes``: per completion (the k-th forward of a node for a request on a rank, in a pass),
  the multiset of routed edges ``(name, destination, where)``, what was filtered at loop exit
  and which loops finished;
* ``outcome``: pass or fail, each request's end, and the violations per check (but for the
  checks one arm cannot show: the real stack's fake engine has no KV readiness, so
  ``kv_handoff`` is left out of a comparison with it).

The first of them names a differential finding (``diff:<kind>``, `signature`): the most telling
difference, since a forward that runs once more also changes the routes and often the outcome.

Comparing a model with the real stack (``--runtime mstar``) means comparing like with like: the
stack runs mstar-ai 0.2.1's worker loop (which batch it picks first, when an idle rank wakes),
so a model arm compared with it runs that loop too (`aligned`, the runtime class's
``model_policy``). And a run of the stack that shows a mechanism the model has no part for at
all (its runtime class's ``beyond_model``) is not compared event by event: it is *incomparable*,
counted, and said so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from simharness import events as ev
from simharness.checks.forward_log import collect_forwards
from simharness.scenario.model import RuntimeChoice, Scenario

#: the kinds of difference, most telling first (a signature names the first one present)
KINDS = ("forwards", "counters", "routes", "outcome")

#: the check name of a differential finding (signatures ``diff:<kind>``)
CHECK = "diff"


@dataclass(frozen=True)
class Arm:
    """One side of a comparison: a runtime's run, as the comparison reads it."""

    runtime: str
    events: Sequence[Any]
    #: request -> how it ended
    outcomes: dict[str, str]
    violations: Sequence[Any]

    @classmethod
    def of(cls, report: Any) -> Arm:
        """The arm of a `simharness.run.RunReport` (its events kept)."""
        return cls(report.runtime, report.result.events, dict(report.result.outcomes),
                   report.violations)


@dataclass(frozen=True)
class Divergence:
    kind: str
    #: what differs: a (walk, node, rank, request) key, a completion, or "outcome"
    where: str
    first: str
    other: str

    def text(self, names: tuple[str, str]) -> str:
        return f"{self.kind} {self.where}: {names[0]} {self.first}, {names[1]} {self.other}"


CompletionKey = tuple[str, str, str, int, int, int]  # rid, walk, node, rank, pass, k-th


def completions(events: Sequence[Any]) -> dict[CompletionKey, tuple[Any, ...]]:
    """Per completion, what it routed (a sorted multiset), filtered and finished, and its
    loop counter."""
    seen: Counter[tuple[str, str, str, int, int]] = Counter()
    out: dict[CompletionKey, tuple[Any, ...]] = {}
    for e in events:
        if type(e) is not ev.Forward:
            continue
        base = (e.rid, e.walk, e.node, e.rank, e.pass_no)
        k = seen[base]
        seen[base] += 1
        routes = tuple(sorted(Counter((s.name, s.dest, where) for s, where in e.routes).items()))
        # the loops one forward finishes: a set (the order a runtime lists them in is not a
        # semantic)
        out[(*base, k)] = (routes, tuple(sorted(e.filtered)), tuple(sorted(e.finished_loops)),
                           e.counter)
    return out


def outcome(arm: Arm, blind: frozenset[str] = frozenset()) -> tuple[Any, ...]:
    """Pass or fail, each request's end, and the number of violations per check, leaving out
    the `blind` checks (those one arm of a comparison cannot show)."""
    seen = [v for v in arm.violations if v.check not in blind]
    return ("fail" if seen else "pass", tuple(sorted(arm.outcomes.items())),
            tuple(sorted(Counter(v.check for v in seen).items())))


def declared(runtime: str, attr: str, default: Any = None) -> Any:
    """What a shipped runtime's class declares for a comparison (``model_policy``,
    ``unaligned_features``, ``blind_checks``, ``beyond_model``), `default` where it declares
    nothing or is no shipped runtime (a model, a plugin)."""
    from simharness.runtime import registry

    path = registry.BUILTIN.get(runtime)
    return default if path is None else getattr(registry.load_path(path), attr, default)


def blind_checks(*runtimes: str) -> frozenset[str]:
    """The checks any of `runtimes` cannot show (its runtime class's ``blind_checks``)."""
    return frozenset(c for name in runtimes for c in declared(name, "blind_checks", ()))


def divergences(a: Arm, b: Arm) -> list[Divergence]:
    """Every difference between two runs of one scenario, `KINDS` order, each kind's in key
    order."""
    found: dict[str, list[Divergence]] = {k: [] for k in KINDS}
    fa, fb = collect_forwards(a.events), collect_forwards(b.events)
    for fkey in sorted(set(fa) | set(fb), key=str):
        ca, cb = fa.get(fkey, []), fb.get(fkey, [])
        where = "{}/{} rank {} {}".format(*fkey)
        if len(ca) != len(cb):
            found["forwards"].append(Divergence("forwards", where, str(len(ca)), str(len(cb))))
        elif ca != cb:
            found["counters"].append(Divergence("counters", where, str(ca), str(cb)))
    pa, pb = completions(a.events), completions(b.events)
    for key in sorted(set(pa) | set(pb), key=str):
        if pa.get(key) != pb.get(key):
            rid, walk, node, rank, pass_no, k = key
            where = f"{walk}/{node} rank {rank} {rid} pass {pass_no} completion {k + 1}"
            found["routes"].append(Divergence("routes", where, _completion(pa.get(key)),
                                              _completion(pb.get(key))))
    blind = blind_checks(a.runtime, b.runtime)
    oa, ob = outcome(a, blind), outcome(b, blind)
    if oa != ob:
        found["outcome"].append(Divergence("outcome", "of the run", _outcome(oa), _outcome(ob)))
    return [d for k in KINDS for d in found[k]]


def signature(found: Sequence[Divergence]) -> str | None:
    """``diff:<kind>`` of the first divergence, None when the runs agree."""
    return f"{CHECK}:{found[0].kind}" if found else None


def _completion(c: tuple[Any, ...] | None) -> str:
    if c is None:
        return "(none)"
    routes, filtered, finished, _counter = c
    text = ", ".join(f"{n}->{d} ({w})" + (f" x{k}" if k > 1 else "") for (n, d, w), k in routes)
    text = f"routed [{text}]"
    if filtered:
        text += " filtered [" + ", ".join(f"{n}->{d}" for n, d in filtered) + "]"
    if finished:
        text += " finished [" + ", ".join(finished) + "]"
    return text


def _outcome(o: tuple[Any, ...]) -> str:
    status, ends, checks = o
    odd = [f"{rid} {end}" for rid, end in ends if end != "completed"]
    text = status + (f" ({', '.join(odd)})" if odd else "")
    if checks:
        text += " [" + ", ".join(f"{c} x{n}" for c, n in checks) + "]"
    return text


# ---------------------------------------------------------------------------------------------
# like with like


def model_policy(runtime: str) -> Any:
    """The loop policy a model arm takes when compared with `runtime` (None: its own)."""
    return declared(runtime, "model_policy")


def takes_policy(runtime: str) -> bool:
    """Whether `runtime` is one of our models (a profile), whose loop policy may be set."""
    from simharness.runtime import registry

    return runtime in registry.PROFILES


def aligned(scenario: Scenario, runtime: str, other: str) -> Scenario:
    """`scenario` as `runtime` runs it when compared with `other`: a model compared with the real
    stack runs the stack's loop policy (the scenario's own options for it kept where they do not
    collide); otherwise unchanged. Run the result with `runtime` named."""
    policy = model_policy(other)
    if policy is None or not takes_policy(runtime):
        return scenario
    options = {f: getattr(policy, f) for f in policy.__struct_fields__}
    if scenario.runtime.name == runtime:
        options = {**options, **dict(scenario.runtime.options)}
    return msgspec.structs.replace(scenario, runtime=RuntimeChoice(runtime, options))


def left_out(runtime: str, other: str) -> tuple[str, ...]:
    """Generated features a differential campaign of `runtime` against `other` leaves out: those
    either runtime class names ``unaligned_features`` (what its runs cannot line up with a
    model's), in `strategies.FEATURES` order."""
    out: list[str] = []
    for name in (runtime, other):
        out += [f for f in declared(name, "unaligned_features", ()) if f not in out]
    return tuple(out)


def arms_text(runtime: str, other: str) -> str:
    """How the two arms of a comparison run, in words (for a summary's first line)."""
    notes = []
    for a, b in ((runtime, other), (other, runtime)):
        if model_policy(b) is not None and takes_policy(a):
            notes.append(f"{a} under {b}'s loop policy")
    return f"{runtime} against {other}" + (f" ({'; '.join(notes)})" if notes else "")


def incomparable(arm: Arm, scenario: Scenario) -> list[str]:
    """The mechanisms an arm shows that a model has no part for (labels, from the runtime
    class's ``beyond_model``; empty for a runtime without one, as every model)."""
    beyond = declared(arm.runtime, "beyond_model")
    return [] if beyond is None else list(beyond(arm.events, scenario))


__all__ = ["CHECK", "KINDS", "Arm", "blind_checks", "Divergence", "aligned", "arms_text", "completions",
           "declared", "divergences", "incomparable", "left_out", "model_policy", "outcome", "signature"]
