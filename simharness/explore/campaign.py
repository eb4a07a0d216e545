"""Fuzz campaigns: explore generated scenarios in chunks, merge, shrink each distinct failure.

A campaign is a sequence of *chunks*. Chunk ``i`` of a campaign with seed ``s`` runs Hypothesis's
generate phase over `strategies.scenarios` for ``chunk_size`` examples from a seed derived from
``(s, i)`` alone, with the example database off and no constants drawn from whatever modules the
process imported (`local_constants`). A chunk's result (example counts, coverage, the
first failing example per signature) therefore depends on nothing but its seed and the code, so
chunks can run anywhere, in any order: in this process, or on Dask workers (a LocalCluster of N
workers, or an existing scheduler). Results are merged in chunk order and failures deduplicated
by signature, keeping the smallest example (the earliest among equals); each distinct failure
is then shrunk.

A differential campaign (``against``: a second runtime) runs every example under both and
counts a divergence as a failure (``diff:<kind>``, `execute`); shrinking keeps the divergence of
the same kind, so what is left is the smallest scenario on which the two runtimes part that way.

Shrinking replays the failing example's chunk (same seed, same size) with Hypothesis's shrink
phase on and a test that fails only on the *same signature*, so layout, workload, schedule and
faults shrink together and the shrinker cannot wander to another bug; `reduce_scenario` then
deletes whole walks, nodes, kinds and ranks that Hypothesis could not. A failure already in
the corpus (`CampaignConfig.known`) is not shrunk again. Shrinking is bounded by a number of test
calls and, in a ``--time`` campaign, by the time the search left (shared among the failures);
a shrink cut short keeps the smallest failing example so far and says why it stopped.

Same seed and same number of examples, same campaign result. A ``--time`` campaign runs whole
chunks until the budget is spent, less a reserve for shrinking what it found; a chunk the
deadline cuts is dropped whole, so the examples reported are whole chunks, and ``--examples``
with that number reproduces the search. The whole campaign, shrinking included, ends by the
deadline (give or take one example: an example is never interrupted, and the runaway guard of
the liveness check keeps each one short).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from msgspec import Struct

from simharness import differential, interrupts
from simharness.explore.execute import REFERENCE, execute
from simharness.explore.local_constants import without_local_constants
from simharness.explore.reduce import reduce_scenario
from simharness.explore.signatures import priority_of
from simharness.explore.strategies import scenarios
from simharness.pool import Pool

DEFAULT_CHUNK = 50
DEFAULT_SHRINK_CALLS = 3000
#: The share of a failure's shrink time Hypothesis may use; `reduce_scenario` gets the rest ...
HYPOTHESIS_SHARE = 0.7
#: ... and at most this many runs (a count, so an --examples campaign stays deterministic).
REDUCE_CALLS = 200
#: Seconds of a ``--time`` budget the search leaves per new failure for shrinking it ...
SHRINK_RESERVE_S = 5.0
#: ... but never more than this share of the whole budget.
SHRINK_RESERVE_SHARE = 0.3


def keep_hypothesis_files_out_of_cwd() -> None:
    """Point Hypothesis's own files (its constants cache) at the user's cache folder.

    Hypothesis keeps them under ``./.hypothesis`` by default, which would litter the folder a
    user runs ``simharness fuzz`` in. ``HYPOTHESIS_STORAGE_DIRECTORY``, when set, wins. Called
    by the command line and by Dask tasks (worker processes), not on import: a test session that
    imports this module keeps its own setting.
    """
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    from hypothesis.configuration import set_hypothesis_home_dir

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    set_hypothesis_home_dir(os.path.join(base, "simharness", "hypothesis"))


class OutOfTime(BaseException):
    """Raised inside a Hypothesis test when the budget is spent.

    A BaseException, like KeyboardInterrupt: Hypothesis lets it through at once instead of
    treating it as a failure to shrink.
    """


class ChunkSpec(Struct, frozen=True):
    """Everything a chunk's result depends on (it travels to Dask workers as is)."""

    runtime: str
    campaign_seed: int
    index: int
    size: int
    reference: str = REFERENCE
    tolerated_only: bool = False
    max_ranks: int = 8
    max_nodes: int = 10
    #: the swarm features examples may use (None: all); `strategies.FAMILIES` names useful sets
    features: frozenset[str] | None = None
    #: a differential campaign's second runtime, the oracle (None: the checks are)
    against: str | None = None
    #: ``pct``: each passing example also runs under a few PCT schedules (`execute`)
    schedule: str | None = None

    @property
    def seed(self) -> int:
        text = f"simharness-fuzz:{self.campaign_seed}:{self.index}".encode()
        return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")

    def strategy(self) -> Any:
        return scenarios(features=self.features, tolerated_only=self.tolerated_only,
                         max_ranks=self.max_ranks, max_nodes=self.max_nodes)


@dataclass
class Finding:
    """The first example of a chunk (or campaign) that failed with one signature."""

    signature: str
    check: str
    chunk: int
    example: int
    raw: dict[str, Any]
    nodes: int
    ranks: int
    messages: list[str]
    count: int = 1

    @property
    def order(self) -> tuple[int, int, int, int]:
        """Which example of a signature to keep: the smallest (nodes, then ranks), then the
        earliest. Shrinking starts from it, and a small start shrinks further and faster."""
        return (self.nodes, self.ranks, self.chunk, self.example)


@dataclass
class ChunkResult:
    index: int
    examples: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    coverage: Counter[str] = field(default_factory=Counter)
    findings: dict[str, Finding] = field(default_factory=dict)
    invalid: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    #: the longest single example (generation, run and checks), in seconds of wall time
    slowest_s: float = 0.0


def _settings(n: int, phases: tuple[Phase, ...]) -> settings:
    # Built on the default profile, not on whatever profile a test run loaded.
    return settings(settings.get_profile("default"), max_examples=n, database=None, phases=phases,
                    deadline=None, derandomize=False, suppress_health_check=list(HealthCheck),
                    verbosity=Verbosity.quiet, report_multiple_bugs=False, print_blob=False)


def explore_chunk(spec: ChunkSpec, budget_s: float | None = None) -> ChunkResult | None:
    """Generate and run one chunk of examples (no shrinking).

    With `budget_s`, a chunk still running after that many seconds is abandoned and None is
    returned: a partial chunk would depend on the machine's speed.
    """
    out = ChunkResult(spec.index)
    t0 = time.perf_counter()
    # `budget_s` is all the time left of the campaign: a chunk may use the same share of it that
    # Hypothesis gets of a shrink, and leaves the rest for shrinking what the search finds (a chunk
    # cut off is dropped whole, so running it to the very end would only waste that time).
    deadline = None if budget_s is None else t0 + HYPOTHESIS_SHARE * budget_s

    @_settings(spec.size, (Phase.generate,))
    @seed(spec.seed)
    @given(spec.strategy())
    def run(raw: dict[str, Any]) -> None:
        interrupts.check()  # a Ctrl-C or SIGTERM stops the chunk here, between examples
        t = time.perf_counter()
        if deadline is not None and t >= deadline:
            raise OutOfTime
        o = execute(raw, spec.runtime, spec.reference, against=spec.against, schedule=spec.schedule)
        out.slowest_s = max(out.slowest_s, time.perf_counter() - t)
        i = out.examples
        out.examples += 1
        out.statuses[o.status] += 1
        out.coverage.update(o.features)
        if o.status == "invalid":
            out.invalid.append(o.error)
        elif o.status == "fail":
            assert o.signature is not None and o.check is not None
            f = out.findings.get(o.signature)
            if f is None or (o.nodes, o.ranks) < (f.nodes, f.ranks):
                out.findings[o.signature] = Finding(o.signature, o.check, spec.index, i,
                                                    copy.deepcopy(o.raw or raw), o.nodes, o.ranks, o.messages,
                                                    1 if f is None else f.count + 1)
            else:
                f.count += 1

    try:
        with without_local_constants(), interrupts.polled():
            run()
    except OutOfTime:
        return None
    out.wall_s = time.perf_counter() - t0
    return out


class _Found(Exception):
    """Raised inside the shrink test when an example fails with the target signature."""


@dataclass
class Shrunk:
    signature: str
    raw: dict[str, Any]
    nodes: int
    ranks: int
    calls: int
    wall_s: float
    shrunk: bool
    #: the shrunk example's first violation messages (what the printed line describes)
    messages: list[str] = field(default_factory=list)
    #: why shrinking ended early: "" (it finished), "time" or "calls" (a budget ran out)
    stopped: str = ""


def shrink(spec: ChunkSpec, finding: Finding, max_calls: int = DEFAULT_SHRINK_CALLS,
           budget_s: float | None = None) -> Shrunk:
    """The smallest example Hypothesis finds that fails with `finding`'s signature.

    It stops after `max_calls` test calls or `budget_s` seconds, keeping the smallest failing
    example found so far (``stopped`` says which budget ended it).
    """
    target = finding.signature
    failing: set[str] = set()
    last: list[tuple[dict[str, Any], int, int, list[str]]] = []
    calls = [0]
    stopped = [""]
    t0 = time.perf_counter()
    # Hypothesis gets most of the budget; the scenario-level reduction after it the rest.
    deadline = None if budget_s is None else t0 + HYPOTHESIS_SHARE * budget_s

    @_settings(spec.size, (Phase.generate, Phase.shrink))
    @seed(spec.seed)
    @given(spec.strategy())
    def run(raw: dict[str, Any]) -> None:
        interrupts.check()
        if deadline is not None and time.perf_counter() >= deadline:
            stopped[0] = "time"
            raise OutOfTime
        calls[0] += 1
        if calls[0] <= finding.example:
            # The generate phase replays the chunk: the examples before the finding pass here
            # unrun, so the shrink starts from the kept (smallest) example, not from the
            # chunk's first one with this signature, and costs nothing to get there.
            return
        key = json.dumps(raw, sort_keys=True)
        hit = key in failing
        if not hit and calls[0] > max_calls:
            stopped[0] = "calls"
        if not hit and calls[0] <= max_calls:
            # Past the budget everything new counts as passing: the best so far stands.
            o = execute(raw, spec.runtime, spec.reference, against=spec.against, schedule=spec.schedule)
            if o.status == "fail" and o.signature == target:
                failing.add(key)
                last[:] = [(copy.deepcopy(o.raw or raw), o.nodes, o.ranks, o.messages)]
                hit = True
        if hit:
            # One raise site: Hypothesis tells failures apart by where they are raised.
            raise _Found

    try:
        with without_local_constants(), interrupts.polled():
            run()
    except (_Found, OutOfTime):
        pass
    except Exception:  # any Hypothesis complaint: keep the unshrunk example
        last.clear()
    if not last:
        return Shrunk(target, finding.raw, finding.nodes, finding.ranks, calls[0],
                      time.perf_counter() - t0, False, finding.messages, stopped[0])
    # Hypothesis removes what was drawn last more easily than what was drawn first; delete
    # whole walks, kinds and ranks from the scenario itself too (`reduce_scenario`).
    def still_fails(raw: dict[str, Any]) -> bool:
        o = execute(raw, spec.runtime, spec.reference, against=spec.against, schedule=spec.schedule)
        if o.status == "fail" and o.signature == target:
            last[:] = [(copy.deepcopy(o.raw or raw), o.nodes, o.ranks, o.messages)]
            return True
        return False

    until = t0 + budget_s if budget_s is not None else None
    # The reduced scenario is read from `last`, not from what `reduce_scenario` returns: the
    # two are the same scenario (each kept deletion is the latest call for which `still_fails`
    # was true; with none kept, both are the scenario it started from), and `last` carries that
    # scenario's nodes, ranks and messages too, which its returned value would need another
    # run to learn.
    _, extra = reduce_scenario(last[0][0], still_fails, until, REDUCE_CALLS)
    calls[0] += extra
    raw, nodes, ranks, messages = last[0]
    return Shrunk(target, raw, nodes, ranks, calls[0], time.perf_counter() - t0, True, messages,
                  stopped[0])


def _shrink_task(args: tuple[ChunkSpec, Finding, int, float | None]) -> Shrunk:
    keep_hypothesis_files_out_of_cwd()
    return shrink(*args)


# ---------------------------------------------------------------------------------------------
# campaigns


@dataclass
class CampaignConfig:
    runtime: str
    seed: int = 0
    examples: int | None = None
    time_s: float | None = None
    workers: int = 1
    scheduler: str | None = None
    chunk_size: int = DEFAULT_CHUNK
    reference: str = REFERENCE
    tolerated_only: bool = False
    shrink: bool = True
    max_shrink_calls: int = DEFAULT_SHRINK_CALLS
    max_ranks: int = 8
    max_nodes: int = 10
    features: frozenset[str] | None = None
    #: signatures the corpus already holds for this runtime: reported, not shrunk again
    known: frozenset[str] = frozenset()
    #: a differential campaign's second runtime (`ChunkSpec.against`)
    against: str | None = None
    #: ``pct``: PCT schedules for every passing example (`ChunkSpec.schedule`)
    schedule: str | None = None

    def spec(self, index: int, size: int) -> ChunkSpec:
        return ChunkSpec(self.runtime, self.seed, index, size, self.reference, self.tolerated_only,
                         self.max_ranks, self.max_nodes, self.generated_features(), self.against,
                         self.schedule)

    def generated_features(self) -> frozenset[str] | None:
        """The features examples may use: `features`, less what a differential campaign cannot
        line up between its arms (`differential.left_out`)."""
        if self.against is None:
            return self.features
        out = differential.left_out(self.runtime, self.against)
        if not out:
            return self.features
        from simharness.explore.strategies import FEATURES

        return frozenset(f for f in (self.features or FEATURES) if f not in out)


@dataclass
class CampaignResult:
    config: CampaignConfig
    examples: int = 0
    chunks: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    coverage: Counter[str] = field(default_factory=Counter)
    findings: dict[str, Finding] = field(default_factory=dict)
    shrunk: dict[str, Shrunk] = field(default_factory=dict)
    invalid: list[str] = field(default_factory=list)
    explore_s: float = 0.0
    shrink_s: float = 0.0
    #: the longest single example of the search, in seconds of wall time
    slowest_s: float = 0.0
    #: "explore", then "shrink", then "done"
    phase: str = "explore"
    #: a chunk the deadline cut (its examples are not counted)
    cut_chunk: bool = False

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.explore_s if self.explore_s else 0.0

    def new_signatures(self) -> list[str]:
        """Failures the corpus does not hold yet, root-cause checks first (the shrink order)."""
        def order(sig: str) -> tuple[int, str]:
            check = sig.partition(":")[0]
            return (priority_of(check), sig)
        return sorted((s for s in self.findings if s not in self.config.known), key=order)


def _chunk_sizes(cfg: CampaignConfig) -> Iterator[int]:
    if cfg.examples is not None:
        left = cfg.examples
        while left > 0:
            yield min(cfg.chunk_size, left)
            left -= cfg.chunk_size
    else:
        while True:
            yield cfg.chunk_size


def _explore_task(args: tuple[ChunkSpec, float | None, bool]) -> ChunkResult | None:
    spec, budget, worker = args
    if worker:  # a Dask worker process; here, the caller decides
        keep_hypothesis_files_out_of_cwd()
    return explore_chunk(spec, budget)


def _reserve(cfg: CampaignConfig, result: CampaignResult) -> float:
    """Seconds of a --time budget kept back for shrinking the new failures found so far."""
    if not cfg.shrink or cfg.time_s is None:
        return 0.0
    n = len(result.new_signatures())
    return min(SHRINK_RESERVE_SHARE * cfg.time_s, SHRINK_RESERVE_S * n)


def run_campaign(cfg: CampaignConfig,
                 progress: Callable[[CampaignResult], None] | None = None,
                 on_final: Callable[[CampaignResult, str], None] | None = None,
                 result: CampaignResult | None = None,
                 started: float | None = None,
                 on_shrink: Callable[[int, int, str | None], None] | None = None) -> CampaignResult:
    """Search, then shrink each new failure.

    `progress(result)` is called after each chunk; `on_shrink(done, total, signature)` before
    each failure's shrink (signature None once all are done), so a long shrink is not silent;
    `on_final(result, signature)` as soon as a new failure is final (shrunk, or kept as found),
    so a caller can write it at once. `result`, if given, is filled in place: an interrupted
    campaign (KeyboardInterrupt) leaves in it everything found so far. `started` (a
    perf_counter time, default now) is when the ``--time`` budget began: the command line
    counts its own start-up against it.
    """
    if cfg.examples is None and cfg.time_s is None:
        cfg.time_s = 60.0
    if result is None:
        result = CampaignResult(cfg)
    specs = (cfg.spec(i, size) for i, size in enumerate(_chunk_sizes(cfg)))
    t0 = time.perf_counter()
    begin = t0 if started is None else min(started, t0)
    hard = None if cfg.examples is not None else begin + float(cfg.time_s or 0)

    def left() -> float | None:
        return None if hard is None else max(0.0, hard - time.perf_counter())

    def stop_at() -> float | None:
        return None if hard is None else hard - _reserve(cfg, result)

    ex = Pool(cfg.workers, cfg.scheduler)
    try:
        # Each chunk gets the seconds left when it starts (read as the pool takes the item),
        # not a clock reading: workers' clocks differ.
        remote = ex.client is not None
        for chunk in ex.ordered(_explore_task, ((spec, left(), remote) for spec in specs), stop_at):
            if chunk is None:
                result.cut_chunk = True
                break
            _merge(result, chunk)
            result.explore_s = time.perf_counter() - t0
            if progress is not None:
                progress(result)
        result.explore_s = time.perf_counter() - t0
        new = result.new_signatures()
        if cfg.shrink and new:
            result.phase = "shrink"
            t1 = time.perf_counter()
            tasks = [(cfg.spec(result.findings[s].chunk, _size_of(cfg, result.findings[s].chunk)),
                      result.findings[s], cfg.max_shrink_calls) for s in new]
            for shrunk in _shrinks(ex, tasks, hard, on_shrink):
                result.shrunk[shrunk.signature] = shrunk
                result.shrink_s = time.perf_counter() - t1
                if on_final is not None:
                    on_final(result, shrunk.signature)
            if on_shrink is not None:
                on_shrink(len(new), len(new), None)
            result.shrink_s = time.perf_counter() - t1
        elif on_final is not None:
            for s in new:
                on_final(result, s)
        result.phase = "done"
    finally:
        ex.close()
    return result


def _shrinks(ex: Pool, tasks: list[tuple[ChunkSpec, Finding, int]], hard: float | None,
             on_shrink: Callable[[int, int, str | None], None] | None) -> Iterator[Shrunk]:
    """Shrink each task's finding, yielding each as soon as it is final.

    Here they run one after another, root causes first, each taking twice the share of those
    after it (of n left, 2/(n+1) of the time left; time one does not use goes to the next); on
    a cluster they run side by side and each may use all of it.
    """
    total = len(tasks)
    if ex.client is None or total < 2:
        for i, (spec, finding, calls) in enumerate(tasks):
            if on_shrink is not None:
                on_shrink(i, total, finding.signature)
            budget = None
            if hard is not None:
                budget = max(0.0, hard - time.perf_counter()) * 2 / (total - i + 1)
            yield shrink(spec, finding, calls, budget)
        return
    if on_shrink is not None:
        on_shrink(0, total, ", ".join(f.signature for _, f, _ in tasks))
    left = None if hard is None else max(0.0, hard - time.perf_counter())
    yield from ex.map(_shrink_task, [(spec, f, calls, left) for spec, f, calls in tasks])


def _size_of(cfg: CampaignConfig, index: int) -> int:
    for i, size in enumerate(_chunk_sizes(cfg)):
        if i == index:
            return size
    raise AssertionError("unreachable")


def _merge(result: CampaignResult, chunk: ChunkResult) -> None:
    result.chunks += 1
    result.examples += chunk.examples
    result.statuses.update(chunk.statuses)
    result.coverage.update(chunk.coverage)
    result.invalid.extend(chunk.invalid)
    result.slowest_s = max(result.slowest_s, chunk.slowest_s)
    for sig, f in chunk.findings.items():
        have = result.findings.get(sig)
        if have is None:
            result.findings[sig] = copy.copy(f)
        else:
            have.count += f.count
            if f.order < have.order:
                count = have.count
                result.findings[sig] = copy.copy(f)
                result.findings[sig].count = count
