"""Fuzz campaigns: explore generated scenarios in chunks, merge, shrink each distinct failure.

A campaign is a sequence of *chunks*. Chunk ``i`` of a campaign with seed ``s`` runs Hypothesis's
generate phase over `strategies.scenarios` for ``chunk_size`` examples from a seed derived from
``(s, i)`` alone, with the example database off. A chunk's result (example counts, coverage, the
first failing example per signature) therefore depends on nothing but its seed and the code, so
chunks can run anywhere, in any order: in this process, or on Dask workers (a LocalCluster of N
workers, or an existing scheduler). Results are merged in chunk order and failures deduplicated
by signature, keeping the earliest example; each distinct failure is then shrunk.

Shrinking replays the failing example's chunk (same seed, same size) with Hypothesis's shrink
phase on and a test that fails only on the *same signature*, so layout, workload, schedule and
faults shrink together and the shrinker cannot wander to another bug. Shrinking is bounded by a
number of test calls, not by time, so it is deterministic too, with one caveat: Hypothesis itself
stops any shrink after 300 s of wall time. At a few milliseconds per call our budget of 3,000
calls stays far inside that; a machine slow enough to reach it would get a less shrunk case.

Same seed and same number of examples, same campaign result. A ``--time`` campaign runs whole
chunks until the budget is spent and reports how many examples it ran; ``--examples`` with that
number reproduces it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings

from simharness.explore.execute import REFERENCE, execute
from simharness.explore.strategies import scenarios
from simharness.pool import Pool

DEFAULT_CHUNK = 50
DEFAULT_SHRINK_CALLS = 3000


@dataclass(frozen=True)
class ChunkSpec:
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
    def order(self) -> tuple[int, int]:
        return (self.chunk, self.example)


@dataclass
class ChunkResult:
    index: int
    examples: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    coverage: Counter[str] = field(default_factory=Counter)
    findings: dict[str, Finding] = field(default_factory=dict)
    invalid: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def _settings(n: int, phases: tuple[Phase, ...]) -> settings:
    # Built on the default profile, not on whatever profile a test run loaded.
    return settings(settings.get_profile("default"), max_examples=n, database=None, phases=phases,
                    deadline=None, derandomize=False, suppress_health_check=list(HealthCheck),
                    verbosity=Verbosity.quiet, report_multiple_bugs=False, print_blob=False)


def explore_chunk(spec: ChunkSpec) -> ChunkResult:
    """Generate and run one chunk of examples (no shrinking)."""
    out = ChunkResult(spec.index)
    t0 = time.perf_counter()

    @_settings(spec.size, (Phase.generate,))
    @seed(spec.seed)
    @given(spec.strategy())
    def run(raw: dict[str, Any]) -> None:
        o = execute(raw, spec.runtime, spec.reference)
        i = out.examples
        out.examples += 1
        out.statuses[o.status] += 1
        out.coverage.update(o.features)
        if o.status == "invalid":
            out.invalid.append(o.error)
        elif o.status == "fail":
            assert o.signature is not None and o.check is not None
            f = out.findings.get(o.signature)
            if f is None:
                out.findings[o.signature] = Finding(o.signature, o.check, spec.index, i,
                                                    copy.deepcopy(raw), o.nodes, o.ranks, o.messages)
            else:
                f.count += 1

    run()
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


def shrink(spec: ChunkSpec, finding: Finding, max_calls: int = DEFAULT_SHRINK_CALLS) -> Shrunk:
    """The smallest example Hypothesis finds that fails with `finding`'s signature."""
    target = finding.signature
    failing: set[str] = set()
    last: list[tuple[dict[str, Any], int, int]] = []
    calls = [0]
    t0 = time.perf_counter()

    @_settings(spec.size, (Phase.generate, Phase.shrink))
    @seed(spec.seed)
    @given(spec.strategy())
    def run(raw: dict[str, Any]) -> None:
        calls[0] += 1
        key = json.dumps(raw, sort_keys=True)
        hit = key in failing
        if not hit and calls[0] <= max_calls:
            # Past the budget everything new counts as passing: the best so far stands.
            o = execute(raw, spec.runtime, spec.reference)
            if o.status == "fail" and o.signature == target:
                failing.add(key)
                last[:] = [(copy.deepcopy(raw), o.nodes, o.ranks)]
                hit = True
        if hit:
            # One raise site: Hypothesis tells failures apart by where they are raised.
            raise _Found

    try:
        run()
    except _Found:
        pass
    except Exception:  # any Hypothesis complaint: keep the unshrunk example
        last.clear()
    wall = time.perf_counter() - t0
    if not last:
        return Shrunk(target, finding.raw, finding.nodes, finding.ranks, calls[0], wall, False)
    raw, nodes, ranks = last[0]
    return Shrunk(target, raw, nodes, ranks, calls[0], wall, True)


def _shrink_task(args: tuple[ChunkSpec, Finding, int]) -> Shrunk:
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

    def spec(self, index: int, size: int) -> ChunkSpec:
        return ChunkSpec(self.runtime, self.seed, index, size, self.reference, self.tolerated_only,
                         self.max_ranks, self.max_nodes, self.features)


@dataclass
class CampaignResult:
    config: CampaignConfig
    examples: int
    chunks: int
    statuses: Counter[str]
    coverage: Counter[str]
    findings: dict[str, Finding]
    shrunk: dict[str, Shrunk]
    invalid: list[str]
    explore_s: float
    shrink_s: float

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.explore_s if self.explore_s else 0.0


def _chunk_sizes(cfg: CampaignConfig) -> Iterator[int]:
    if cfg.examples is not None:
        left = cfg.examples
        while left > 0:
            yield min(cfg.chunk_size, left)
            left -= cfg.chunk_size
    else:
        while True:
            yield cfg.chunk_size


def run_campaign(cfg: CampaignConfig,
                 progress: Callable[[CampaignResult], None] | None = None,
                 on_shrink: Callable[[int, int, str | None], None] | None = None) -> CampaignResult:
    """Explore, then shrink each distinct failure. `progress(result)` is called after each chunk;
    `on_shrink(done, total, signature)` before each failure's shrink (signature None once all
    are done), so a long shrink is not silent."""
    if cfg.examples is None and cfg.time_s is None:
        cfg.time_s = 60.0
    result = CampaignResult(cfg, 0, 0, Counter(), Counter(), {}, {}, [], 0.0, 0.0)
    specs = (cfg.spec(i, size) for i, size in enumerate(_chunk_sizes(cfg)))
    ex = Pool(cfg.workers, cfg.scheduler)
    try:
        t0 = time.perf_counter()
        deadline = None if cfg.examples is not None else t0 + float(cfg.time_s or 0)
        for chunk in ex.ordered(explore_chunk, specs, deadline):
            _merge(result, chunk)
            result.explore_s = time.perf_counter() - t0
            if progress is not None:
                progress(result)
        result.explore_s = time.perf_counter() - t0
        if cfg.shrink and result.findings:
            t1 = time.perf_counter()
            order = sorted(result.findings)
            tasks = [(cfg.spec(result.findings[s].chunk, _size_of(cfg, result.findings[s].chunk)),
                      result.findings[s], cfg.max_shrink_calls) for s in order]
            if ex.client is None:
                # In this process: one at a time, saying which.
                for k, (s, task) in enumerate(zip(order, tasks, strict=True)):
                    if on_shrink is not None:
                        on_shrink(k, len(order), s)
                    result.shrunk[s] = _shrink_task(task)
            else:
                if on_shrink is not None:
                    on_shrink(0, len(order), ", ".join(order))
                for s, shrunk in zip(order, ex.map(_shrink_task, tasks), strict=True):
                    result.shrunk[s] = shrunk
            if on_shrink is not None:
                on_shrink(len(order), len(order), None)
            result.shrink_s = time.perf_counter() - t1
    finally:
        ex.close()
    return result


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
