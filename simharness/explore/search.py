"""Schedule search: is there an order of deliveries, within what mstar's transport permits, that
breaks this layout?

Every search runs the scenario many times under a delivery control (`engine.deliveries`): each
message is due at its link's nominal time, and the search's policy decides which messages wait.
The transport's one guarantee is kept throughout (FIFO per sender-receiver link); messages on
different links overtake each other freely, within ``max_delay_s`` of their due time where a bound
is given. Three policies search the same space:

* ``pct``: probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010), with links as the
  threads (each link is a FIFO sequence of deliveries, as a thread is a sequence of steps) and the
  clock, which lets the ranks compute, as one more thread. Each run draws a priority per link and
  one for the clock; a link below the clock is held: its messages wait while anything else can
  happen, and when the run comes to rest the highest held link goes first. ``depth - 1`` change
  points, drawn among the steps (deliveries) of an unperturbed run, each drop the link that
  delivered at that step below all others, from then on. A bug that needs `d` orderings is found
  with probability at least ``1 / (n * k^(d-1))`` per run;
* ``random``: every message is held a delay drawn uniformly from ``[0, max_delay_s]`` (today's
  link jitter, as the baseline: the same space, searched blindly);
* ``exhaustive``: stateless search with partial-order reduction. A run's deliveries to one
  receiver from different links whose second was not sent in answer to the first (vector
  clocks) *race*; each race is reversed in a new run (hold the first until the second has
  arrived), recursively, and a run whose order at every receiver was seen already is not
  expanded again (deliveries to different receivers commute). When no new order is left the
  search is complete.

A failing run's moved deliveries replay it bit for bit (``schedule.deliveries``, see
`engine.deliveries`); `shrink` removes the ones the failure does not need.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from simharness.checks import BUILTIN_CHECKS, Check
from simharness.engine.deliveries import Delivery, DeliveryControl, MessageId
from simharness.explore.signatures import signature_of
from simharness.rng import RandomStreams
from simharness.run import simulate
from simharness.scenario.model import MovedDelivery, Scenario
from simharness.scenario.sections import delivery_entry

SCHEDULES = ("pct", "random", "exhaustive")
#: the bound of ``random`` when none is given: a delay it can draw from
RANDOM_DEFAULT_DELAY_S = 1e-3
#: the share of PCT runs that hold whole links from the start (the rest hold from change points)
LINK_RUNS = 1 / 3


class Pct:
    """PCT's priorities over links and the clock, for one run (`DeliveryPolicy`)."""

    def __init__(self, rng: Any, depth: int, steps: int, variant: str | None = None) -> None:
        self._rng = rng
        #: which of the two kinds of run this is (the module's docstring)
        self.variant = variant or ("links" if rng.random() < LINK_RUNS else "sends")
        self.clock = float(rng.random()) if self.variant == "links" else -1.0
        self._prio: dict[tuple[int, int], float] = {}
        n = max(steps, depth)
        picks = rng.choice(n, size=min(depth - 1, n), replace=False) + 1 if depth > 1 else []
        self.change_points = sorted(int(x) for x in picks)
        self._steps = 0
        self._sends = 0
        self._lowered = 0

    def _priority(self, link: tuple[int, int]) -> float:
        p = self._prio.get(link)
        if p is None:
            p = self._prio[link] = float(self._rng.random())
        return p

    def decide(self, msg: MessageId, kind: str) -> bool:
        if self.variant == "sends":
            self._sends += 1
            if self._sends in self.change_points:
                self._lowered += 1
                self._prio[(msg[0], msg[1])] = -2.0 - self._lowered
        return self._priority((msg[0], msg[1])) < self.clock

    def delivered(self, d: Delivery) -> Iterable[MessageId]:
        self._steps += 1
        if self.variant == "links" and self._steps in self.change_points:
            self._lowered += 1
            self._prio[(d.src, d.dst)] = -float(self._lowered)  # below the clock and every link
        return ()

    def still_held(self, msg: MessageId) -> bool:
        return True

    def pick(self, heads: Sequence[tuple[MessageId, float]]) -> int:
        return max(range(len(heads)), key=lambda i: self._priority((heads[i][0][0], heads[i][0][1])))


class RandomDelays:
    """Every message held a delay drawn from ``[0, bound]`` (`DeliveryPolicy`)."""

    def __init__(self, rng: Any, bound_s: float) -> None:
        self._rng = rng
        self.bound = bound_s

    def decide(self, msg: MessageId, kind: str) -> float:
        return float(self._rng.uniform(0.0, self.bound))

    def delivered(self, d: Delivery) -> Iterable[MessageId]:
        return ()

    def still_held(self, msg: MessageId) -> bool:
        return True

    def pick(self, heads: Sequence[tuple[MessageId, float]]) -> int:
        return min(range(len(heads)), key=lambda i: heads[i][1])


class Reversals:
    """Hold each constrained message until the messages it must follow have arrived
    (`DeliveryPolicy` of the exhaustive search)."""

    def __init__(self, constraints: Iterable[tuple[MessageId, MessageId]]) -> None:
        self.waits: dict[MessageId, set[MessageId]] = {}
        self._after: dict[MessageId, list[MessageId]] = {}
        for a, b in sorted(constraints):
            self.waits.setdefault(a, set()).add(b)
            self._after.setdefault(b, []).append(a)
        self._arrived: set[MessageId] = set()

    def decide(self, msg: MessageId, kind: str) -> bool:
        return self.still_held(msg)

    def delivered(self, d: Delivery) -> Iterable[MessageId]:
        self._arrived.add(d.id)
        return self._after.get(d.id, ())

    def still_held(self, msg: MessageId) -> bool:
        return any(b not in self._arrived for b in self.waits.get(msg, ()))

    def pick(self, heads: Sequence[tuple[MessageId, float]]) -> int:
        return min(range(len(heads)), key=lambda i: (heads[i][1], heads[i][0]))


@dataclass
class Found:
    """One failure a search found: its signature, the run that first showed it, how many runs
    did, and that run's schedule (the deliveries it moved)."""

    signature: str
    run: int
    messages: list[str]
    moved: list[MovedDelivery]
    count: int = 1


@dataclass
class SearchResult:
    schedule: str
    runtime: str
    runs: int = 0
    #: distinct orders of deliveries (per receiver) among the runs
    distinct: int = 0
    found: dict[str, Found] = field(default_factory=dict)
    #: exhaustive only: True when every distinct order was run
    complete: bool | None = None
    #: why the search stopped before its runs, or ""
    stopped: str = ""
    #: deliveries of the unperturbed run (PCT's step count)
    steps: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.found)


def bare(scenario: Scenario) -> Scenario:
    """`scenario` with no schedule of its own: no jitter, no recorded deliveries (a search
    decides the deliveries; faults stay)."""
    return msgspec.structs.replace(scenario, schedule=msgspec.structs.replace(
        scenario.schedule, service_jitter=0.0, link_jitter_us=0.0, shuffle_ties=False, deliveries=()))


def with_deliveries(scenario: Scenario, moved: Sequence[MovedDelivery]) -> Scenario:
    return msgspec.structs.replace(scenario, schedule=msgspec.structs.replace(
        scenario.schedule, deliveries=tuple(moved)))


def run_once(scenario: Scenario, runtime: str, policy: Any = None, bound_s: float | None = None,
             checks: Sequence[type[Check]] = BUILTIN_CHECKS) -> tuple[DeliveryControl, list[Any]]:
    """One controlled run: its control (what it delivered, what it moved) and its violations."""
    def make(clock: Any) -> DeliveryControl:
        return DeliveryControl(clock, policy, bound_s)

    result, violations = simulate(scenario, runtime, keep_trace=False, digest=False,
                                  control=None if scenario.schedule.deliveries else make,
                                  checks=checks)
    return result.control, violations


def search(scenario: Scenario, runtime: str, schedule: str, runs: int, *, depth: int = 3,
           seed: int = 0, max_delay_s: float | None = None,
           checks: Sequence[type[Check]] = BUILTIN_CHECKS, until: float | None = None,
           stop_at_first: bool = False, stop_on: Callable[[str], bool] | None = None,
           on_run: Callable[[int, str | None], None] | None = None) -> SearchResult:
    """Run `scenario` under `runtime` up to `runs` times, the schedule `schedule` deciding the
    deliveries (`SCHEDULES`). `until`: a `time.perf_counter` reading the search stops at (a
    ``--time`` budget). `stop_at_first`: stop at the first failure; `stop_on`: at the first
    whose signature it accepts."""
    if stop_at_first:
        stop_on = _any
    sc = bare(scenario)
    out = SearchResult(schedule, runtime)
    base, violations = run_once(sc, runtime, checks=checks)
    out.steps = len(base.deliveries)
    orders = {order_key(base)}
    out.runs = 1
    _note(out, 0, base, violations)
    if on_run is not None:
        on_run(0, signature_of(violations))
    if schedule == "exhaustive":
        _exhaustive(sc, runtime, runs, max_delay_s, checks, until, stop_on, on_run, out, base,
                    orders)
        out.distinct = len(orders)
        return out
    streams = RandomStreams(seed)
    bound = max_delay_s if max_delay_s is not None or schedule != "random" else RANDOM_DEFAULT_DELAY_S
    for i in range(1, runs):
        if stop_on is not None and any(stop_on(sig) for sig in out.found):
            out.stopped = "first failure"
            break
        if until is not None and time.perf_counter() >= until:
            out.stopped = "time"
            break
        rng = streams.stream(f"schedule.{schedule}.{i}")
        policy = Pct(rng, depth, out.steps) if schedule == "pct" else RandomDelays(rng, bound or 0.0)
        control, violations = run_once(sc, runtime, policy, bound, checks)
        out.runs += 1
        orders.add(order_key(control))
        _note(out, i, control, violations)
        if on_run is not None:
            on_run(i, signature_of(violations))
    out.distinct = len(orders)
    return out


def _any(sig: str) -> bool:
    return True


def _note(out: SearchResult, i: int, control: DeliveryControl, violations: list[Any]) -> None:
    sig = signature_of(violations)
    if sig is None:
        return
    if sig in out.found:
        out.found[sig].count += 1
        return
    out.found[sig] = Found(sig, i, [v.message for v in violations[:3]], list(control.moved))


def _exhaustive(sc: Scenario, runtime: str, max_runs: int, bound: float | None,
                checks: Sequence[type[Check]], until: float | None,
                stop_on: Callable[[str], bool] | None,
                on_run: Callable[[int, str | None], None] | None, out: SearchResult,
                base: DeliveryControl, orders: set[str]) -> None:
    """Depth first over race reversals (module docstring); `orders` already holds the base
    run's."""
    Constraints = frozenset[tuple[MessageId, MessageId]]
    stack: list[Constraints] = []
    tried: set[Constraints] = {frozenset()}

    def expand(cons: Constraints, control: DeliveryControl) -> None:
        # pushed in reverse so that the earliest race is reversed first
        for race in reversed(races(control)):
            child = cons | {race}
            if child not in tried:
                tried.add(child)
                stack.append(child)

    expand(frozenset(), base)
    while stack:
        if stop_on is not None and any(stop_on(sig) for sig in out.found):
            out.stopped = "first failure"
            break
        if out.runs >= max_runs:
            out.stopped = "max runs"
            break
        if until is not None and time.perf_counter() >= until:
            out.stopped = "time"
            break
        cons = stack.pop()
        control, violations = run_once(sc, runtime, Reversals(cons), bound, checks)
        i = out.runs
        out.runs += 1
        _note(out, i, control, violations)
        if on_run is not None:
            on_run(i, signature_of(violations))
        key = order_key(control)
        if key in orders:
            continue  # an order seen already: its races were reversed from there
        orders.add(key)
        expand(cons, control)
    out.complete = not stack and not out.stopped


def replays(scenario: Scenario, runtime: str, moved: Sequence[MovedDelivery], signature: str,
            checks: Sequence[type[Check]] = BUILTIN_CHECKS) -> bool:
    """Whether `scenario` with the schedule `moved` fails with `signature`."""
    _, violations = simulate(with_deliveries(bare(scenario), moved), runtime, keep_trace=False,
                             digest=False, checks=checks)
    return signature_of(violations) == signature


def shrink(scenario: Scenario, runtime: str, moved: Sequence[MovedDelivery], signature: str, *,
           checks: Sequence[type[Check]] = BUILTIN_CHECKS, until: float | None = None,
           max_calls: int | None = None) -> list[MovedDelivery]:
    """The fewest moved deliveries, by removing chunks then single ones (ddmin), with which the
    scenario still fails with `signature`. Stops, keeping what it has, at `until` or after
    `max_calls` replays."""
    current = list(moved)
    chunk = max(1, len(current) // 2)
    calls = 0
    while current:
        removed = False
        i = 0
        while i < len(current):
            if until is not None and time.perf_counter() >= until:
                return current
            if max_calls is not None and calls >= max_calls:
                return current
            calls += 1
            candidate = current[:i] + current[i + chunk:]
            if replays(scenario, runtime, candidate, signature, checks):
                current = candidate
                removed = True
            else:
                i += chunk
        if chunk == 1 and not removed:
            break
        chunk = max(1, chunk // 2) if not removed or chunk > 1 else 1
    return current


def schedule_entries(moved: Sequence[MovedDelivery]) -> list[dict[str, Any]]:
    """``schedule.deliveries`` for a scenario file."""
    return [delivery_entry(d) for d in moved]


# -- reading a run ------------------------------------------------------------------------------

def order_key(control: DeliveryControl) -> str:
    """A short digest of the run's order of deliveries at each receiver: its class under
    partial-order reduction (deliveries to different receivers commute). Two runs with the same
    key delivered every message to every receiver in the same order."""
    by_dst: dict[int, list[MessageId]] = {}
    for d in control.deliveries:
        by_dst.setdefault(d.dst, []).append(d.id)
    h = hashlib.sha256()
    for dst, ids in sorted(by_dst.items()):
        h.update(repr((dst, ids)).encode())
    return h.hexdigest()[:16]


def races(control: DeliveryControl) -> list[tuple[MessageId, MessageId]]:
    """Pairs (a, b) of deliveries to one receiver, a first, from different links, where b's send
    did not happen after a's delivery (its vector clock had not seen it): the two could have come
    the other way round, by holding a until b arrives."""
    by_dst: dict[int, list[Delivery]] = {}
    for d in control.deliveries:
        by_dst.setdefault(d.dst, []).append(d)
    out = []
    for dst, ds in sorted(by_dst.items()):
        for i, a in enumerate(ds):
            for b in ds[i + 1:]:
                if b.src != a.src and b.sent_clock.get(dst, 0) < a.index:
                    out.append((a.id, b.id))
    return out
