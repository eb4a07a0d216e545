"""Sweeps: every scenario x every seed x every runtime, run in parallel, in one table.

A sweep is the regression run of a runtime change: each *cell* (scenario, runtime, seed) is one
simulation with every built-in check, run in this process or on Dask workers (`simharness.pool`,
as fuzz campaigns are). Cells are independent and each is deterministic, so the sweep's result
does not depend on where or in which order its cells ran.

Each cell has an *expected* verdict, and the sweep fails (exit 1) when any cell's verdict differs
from it:

* with ``--baseline FILE`` (the ``--json`` output of an earlier sweep), the cell's verdict in that
  file: a sweep before and after a change says exactly which cells changed, whether they passed
  or failed before. With ``--strict`` a changed trace digest counts as a change too (what a
  refactor that must not change behaviour wants). Digests made under another digest scheme
  (`simharness.trace`) cannot be compared: ``--strict`` refuses such a baseline, and without it
  the sweep says that digests were not compared;
* otherwise a corpus case (a scenario with a ``corpus:`` block) under the runtime it was recorded
  for is expected to fail with its recorded signature while its status is ``open``, and to pass
  once ``fixed``; every other cell is expected to pass, but a cell of a runtime declared with
  ``--expect-fail`` (a runtime known to fail, such as the pre-fix profile), which is expected
  to fail, whatever the check.

The unexpected cells are listed one line per (scenario, runtime, verdict), with the seeds each
covers.

A verdict is ``pass`` or ``fail:<signature>`` (the corpus's failure signature: the root-cause
check and a short key), or ``error: ...`` when the harness itself raised; an error is never
expected. Cells and rows are reported in a fixed order (scenario, runtime, seed as given).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msgspec import Struct

from simharness import interrupts
from simharness.errors import ScenarioError, UsageError
from simharness.fields import describe
from simharness.scenario import loader
from simharness.scenario.model import CorpusMeta
from simharness.scenario.reading import read_bytes
from simharness.scenario.sections import parse_corpus
from simharness.trace import DIGEST_SCHEME, other_scheme
from simharness.wording import plural

PASS = "pass"
#: the expected verdict of a cell whose runtime is declared to fail (``--expect-fail``): any
#: failure of a check is as expected, a pass or a harness error is not
ANY_FAILURE = "fail:*"
#: Most seeds one sweep runs: a range beyond this is a typo, not a sweep (its list alone would
#: fill the memory).
MAX_SEEDS = 100_000


class Cell(Struct, frozen=True):
    """One run of a sweep; travels to a Dask worker as is."""

    scenario: str  #: the scenario file
    overrides: tuple[str, ...]
    runtime: str | None  #: None: the scenario's own
    seed: int | None  #: None: the scenario's own


@dataclass
class CellResult:
    scenario: str  #: the scenario's name
    path: str
    runtime: str
    seed: int
    verdict: str
    trace_digest: str = ""
    requests: dict[str, int] = field(default_factory=dict)
    checks: dict[str, int] = field(default_factory=dict)  #: violations per check
    sim_time_s: float = 0.0
    wall_s: float = 0.0
    expected: str = PASS
    why_expected: str = "default"
    digest_changed: bool = False

    @property
    def unexpected(self) -> bool:
        if self.expected == ANY_FAILURE:
            return not self.verdict.startswith("fail:")
        return self.verdict != self.expected

    def key(self) -> tuple[str, str, int]:
        return (self.scenario, self.runtime, self.seed)

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "path": self.path, "runtime": self.runtime,
                "seed": self.seed, "verdict": self.verdict, "expected": self.expected,
                "expected_from": self.why_expected, "unexpected": self.unexpected,
                "trace_digest": self.trace_digest, "digest_changed": self.digest_changed,
                "requests": self.requests, "violations": self.checks,
                "sim_time_s": round(self.sim_time_s, 6), "wall_s": round(self.wall_s, 4)}


def parse_seeds(text: str) -> list[int]:
    """``A..B`` (both included) or a single seed ``N``."""
    a, sep, b = text.partition("..")
    try:
        lo, hi = (int(a), int(b)) if sep else (int(a), int(a))
    except ValueError:
        raise UsageError(f"--seeds {text!r}: expected A..B (both included) or N, e.g. 0..99") from None
    if lo < 0 or hi < lo:
        raise UsageError(f"--seeds {text!r}: expected 0 <= A <= B")
    if hi - lo + 1 > MAX_SEEDS:
        raise UsageError(f"--seeds {text!r}: {hi - lo + 1:,} seeds; at most {MAX_SEEDS:,} in one sweep")
    return list(range(lo, hi + 1))


def run_cell(cell: Cell) -> CellResult:
    """Run one cell (on whichever worker got it)."""
    from simharness.explore.signatures import signature
    from simharness.report.summary import request_counts
    from simharness.run import run_scenario
    from simharness.scenario.loader import load_scenario

    t0 = time.perf_counter()
    sc = load_scenario(cell.scenario, list(cell.overrides))
    seed = sc.seed if cell.seed is None else cell.seed
    try:
        report = run_scenario(sc, cell.runtime, seed, keep_trace=False)
    except (ScenarioError, UsageError):
        raise
    except Exception as exc:  # a harness error in one cell must not lose the others
        return CellResult(sc.name, cell.scenario, cell.runtime or sc.runtime.name, seed,
                          f"error: {type(exc).__name__}: {exc}", wall_s=time.perf_counter() - t0)
    verdict = PASS
    if report.violations:
        check, key = signature(report.violations)
        verdict = f"fail:{check}:{key}"
    return CellResult(sc.name, cell.scenario, report.runtime, seed, verdict, report.trace_digest,
                      request_counts(report), dict(Counter(v.check for v in report.violations)),
                      report.result.sim_time_s, time.perf_counter() - t0)


@dataclass
class SweepResult:
    cells: list[CellResult]
    wall_s: float
    workers: int
    baseline: str | None = None
    #: what the reader must know about the comparison (a baseline of another digest scheme)
    notes: list[str] = field(default_factory=list)

    @property
    def unexpected(self) -> list[CellResult]:
        return [c for c in self.cells if c.unexpected]

    @property
    def exit_code(self) -> int:
        return 1 if self.unexpected else 0

    def rows(self) -> list[dict[str, Any]]:
        """One row per (scenario, runtime): counts over its seeds, and one digest of all of them
        (sha256 over the cells' trace digests in seed order), so two sweeps compare at a glance."""
        groups: dict[tuple[str, str], list[CellResult]] = {}
        for c in self.cells:
            groups.setdefault((c.scenario, c.runtime), []).append(c)
        out = []
        for (name, runtime), cells in groups.items():
            h = hashlib.sha256()
            for c in sorted(cells, key=lambda c: c.seed):
                h.update(f"{c.seed} {c.trace_digest}\n".encode())
            verdicts = Counter(c.verdict for c in cells)
            out.append({
                "scenario": name, "runtime": runtime, "runs": len(cells),
                "pass": verdicts.get(PASS, 0),
                "fail": sum(n for v, n in verdicts.items() if v != PASS),
                "unexpected": sum(1 for c in cells if c.unexpected),
                "digest_changed": sum(1 for c in cells if c.digest_changed),
                "verdicts": dict(sorted(verdicts.items())),
                "unexpected_seeds": [c.seed for c in cells if c.unexpected],
                "sweep_digest": "sha256:" + h.hexdigest(),
                "requests": sum(c.requests.get("submitted", 0) for c in cells),
            })
        return out

    def to_json(self) -> dict[str, Any]:
        return {"runs": len(self.cells), "unexpected": len(self.unexpected),
                "outcome": "fail" if self.unexpected else "pass", "baseline": self.baseline,
                "notes": self.notes,
                "workers": self.workers, "wall_s": round(self.wall_s, 3),
                "rows": self.rows(), "cells": [c.to_json() for c in self.cells]}


def plan(scenarios: list[str], overrides: list[str], runtimes: list[str],
         seeds: list[int] | None) -> list[Cell]:
    """The cells of a sweep, validating every scenario and runtime first (bad input is exit 2
    before any work starts)."""
    from simharness.runtime import registry
    from simharness.scenario.loader import load_scenario

    if not scenarios:
        raise UsageError("sweep needs at least one scenario file")
    for name in runtimes:
        try:
            registry.resolve(name)
        except UsageError as exc:
            raise UsageError(f"--runtime {name}: {exc}") from None
    cells = []
    named: list[str | None] = [*runtimes]
    for path in scenarios:
        load_scenario(path, overrides)  # raises ScenarioError naming the file and key
        for rt in named or [None]:
            for seed in seeds if seeds is not None else [None]:
                cells.append(Cell(str(path), tuple(overrides), rt, seed))
    return cells


def _baseline_cells(data: Any, baseline: str) -> list[dict[str, Any]]:
    """The cells of a --baseline file, each checked to be a cell of a sweep's --json output; a
    refusal names the file and the place in it."""
    def bad(where: str, what: str) -> UsageError:
        return UsageError(f"--baseline {baseline}: {where} {what} (expected the --json output of "
                          f"a sweep: cells[] with scenario, runtime, seed and verdict)")

    if not isinstance(data, dict) or "cells" not in data:
        raise bad("the file", "has no cells")
    if not isinstance(data["cells"], list):
        raise bad("cells", f"is {describe(data['cells'])}, not a list")
    for i, c in enumerate(data["cells"]):
        if not isinstance(c, dict):
            raise bad(f"cells[{i}]", f"is {describe(c)}, not a mapping")
        for key in ("scenario", "runtime", "verdict"):
            if not isinstance(c.get(key), str):
                raise bad(f"cells[{i}].{key}", "is missing" if key not in c
                          else f"is {describe(c[key])}, not a string")
        if isinstance(c.get("seed"), bool) or not isinstance(c.get("seed"), int):
            raise bad(f"cells[{i}].seed", "is missing" if "seed" not in c
                      else f"is {describe(c['seed'])}, not an integer")
    return data["cells"]


class Expectations:
    """Sets a cell's expected verdict (see the module docstring): called once per cell."""

    def __init__(self, baseline: str | None, strict: bool = False,
                 expect_fail: frozenset[str] = frozenset()) -> None:
        self.baseline = baseline
        #: runtimes declared to fail (``--expect-fail``): every cell of theirs is expected to
        self.expect_fail = expect_fail
        self.recorded: dict[tuple[str, str, int], dict[str, Any]] = {}
        #: whether the baseline's digests can be compared with this run's (same scheme)
        self.digests_comparable = True
        self.notes: list[str] = []
        self.corpus: dict[str, CorpusMeta | None] = {}
        if baseline is not None:
            self._read(baseline, strict)

    def _read(self, baseline: str, strict: bool) -> None:
        try:
            data = json.loads(read_bytes(baseline, what="file"))
        except ScenarioError as err:  # missing, a folder, a pipe, too large, unreadable
            raise UsageError(f"--baseline {baseline}: {err.message}") from None
        except ValueError as exc:  # not UTF-8, not JSON
            raise UsageError(f"--baseline {baseline}: not JSON ({exc})") from None
        for c in _baseline_cells(data, baseline):
            self.recorded[(c["scenario"], c["runtime"], c["seed"])] = c
        if self.recorded and not any(c.get("trace_digest") for c in self.recorded.values()):
            self.notes.append("the baseline records no trace digests: digests were not compared")
        schemes = sorted({s for c in self.recorded.values() if c.get("trace_digest")
                          and (s := other_scheme(str(c["trace_digest"]))) is not None})
        if schemes:
            old = ", ".join(schemes)
            if strict:
                raise UsageError(f"--baseline {baseline}: its trace digests were made under digest "
                                 f"scheme {old} and this simharness makes {DIGEST_SCHEME}, so "
                                 f"--strict cannot compare them; sweep without --strict (verdicts "
                                 f"still compare) and keep its --json as the new baseline")
            self.digests_comparable = False
            self.notes.append(f"the baseline's trace digests were made under digest scheme {old} "
                              f"(this simharness makes {DIGEST_SCHEME}): digests were not compared")

    def __call__(self, cell: CellResult) -> None:
        if self.baseline is not None:
            before = self.recorded.get(cell.key())
            if before is not None:
                cell.expected, cell.why_expected = before["verdict"], "baseline"
                # a baseline cell without a digest (an error, an older file) has none to differ
                cell.digest_changed = (self.digests_comparable and bool(before.get("trace_digest"))
                                       and before["trace_digest"] != cell.trace_digest)
                return
            cell.why_expected = "default (not in the baseline)"
        if cell.runtime in self.expect_fail:
            cell.expected, cell.why_expected = ANY_FAILURE, "--expect-fail"
            return
        if cell.path not in self.corpus:
            # `plan` loaded every scenario: a corpus block here is a valid one
            block = loader.read_yaml(Path(cell.path)).get("corpus")
            self.corpus[cell.path] = parse_corpus(block) if block is not None else None
        meta = self.corpus[cell.path]
        if meta is not None and meta.runtime == cell.runtime:
            if meta.status == "open":
                cell.expected, cell.why_expected = f"fail:{meta.signature}", "corpus (open)"
            else:
                cell.expected, cell.why_expected = PASS, "corpus (fixed)"


def run_sweep(cells: list[Cell], workers: int = 1, scheduler: str | None = None,
              baseline: str | None = None, strict: bool = False,
              progress: Callable[[CellResult], None] | None = None,
              expect_fail: frozenset[str] = frozenset()) -> SweepResult:
    from simharness.pool import Pool

    # a bad baseline is refused before any work
    expect = Expectations(baseline, strict, expect_fail)
    t0 = time.perf_counter()
    results: list[CellResult] = []
    used = workers
    try:
        with Pool(workers, scheduler) as pool:
            used = pool.workers
            for r in pool.ordered(run_cell, cells):
                expect(r)
                if strict and r.digest_changed and not r.unexpected:
                    r.expected = f"{r.expected} (same trace digest)"
                results.append(r)
                if progress is not None:
                    progress(r)
    except KeyboardInterrupt as exc:
        # SIGINT or SIGTERM (simharness.interrupts): hand the runs that finished to the caller.
        stop = interrupts.as_interrupted(exc)
        stop.partial = SweepResult(results, time.perf_counter() - t0, used, baseline, expect.notes)
        raise stop from None
    return SweepResult(results, time.perf_counter() - t0, used, baseline, expect.notes)


def render(result: SweepResult, out: Any) -> None:
    """The sweep's table: one line per (scenario, runtime), then every unexpected cell."""
    from simharness.report.table import cell, line, render_table

    body = []
    for r in result.rows():
        verdicts = ", ".join(f"{v} x{n}" for v, n in r["verdicts"].items())
        body.append([r["scenario"], r["runtime"], r["runs"], r["pass"], r["fail"],
                     cell(r["unexpected"], "bad" if r["unexpected"] else None),
                     r["sweep_digest"][7:23], verdicts])
    render_table(out, ["scenario", "runtime", "runs", "pass", "fail", "unexp", "sweep digest", "verdicts"],
                 body, align=["left", "left", "right", "right", "right", "right", "left", "left"])
    bad = result.unexpected
    if bad:
        # one line per (scenario, runtime, verdict, expectation), with the seeds it covers
        groups: dict[tuple[str, str, str, str, str], list[int]] = {}
        for c in bad:
            groups.setdefault((c.scenario, c.runtime, c.verdict, c.expected, c.why_expected),
                              []).append(c.seed)
        print(f"\nunexpected ({len(bad)}, {plural(len(groups), 'distinct')}):", file=out)
        for (scenario, runtime, verdict, expected, why), seeds in list(groups.items())[:50]:
            print(f"  {scenario} {runtime} {seed_text(seeds)}: {verdict}, expected {expected} "
                  f"[{why}]", file=out)
        if len(groups) > 50:
            print(f"  ... and {len(groups) - 50} more (--json lists every run)", file=out)
    changed = sum(1 for c in result.cells if c.digest_changed)
    if changed:
        print(f"\n{plural(changed, 'run')} {'has' if changed == 1 else 'have'} a trace digest other "
              f"than the baseline's", file=out)
    for note in result.notes:
        print(f"\nnote: {note}", file=out)
    verdict = "FAIL" if bad else "PASS"
    print(file=out)
    line(out, f"{verdict}: {plural(len(result.cells), 'run')}, {len(bad)} unexpected, "
              f"{result.wall_s:.1f} s on {plural(result.workers, 'worker')}", "bad" if bad else "good")


def seed_text(seeds: list[int]) -> str:
    """``seed 3``, ``seeds 0-9``, ``seeds 0-4, 7, 9-12``: seeds as ranges."""
    ordered = sorted(set(seeds))
    spans: list[tuple[int, int]] = []
    for n in ordered:
        if spans and n == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
    return f"seed {text}" if len(ordered) == 1 else f"seeds {text}"
