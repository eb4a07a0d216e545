"""What a fuzz campaign shows and returns: the progress line, the summary JSON, corpus writing.

The summary object (``simharness fuzz --json``) is::

    {"runtime": ..., "seed": N, "examples": N, "examples_per_s": X,
     "failures": [{"check": ..., "signature": ..., "case": PATH, "nodes": N, "ranks": N,
                   "count": N, "known": bool, "shrink_s": X}],
     "coverage": {"layout": {...}, "edges": {...}, "loops": {...}, "faults": {...},
                  "reached": "K/M", "examples": N},
     "outcomes": {"pass": N, "fail": N, "fault_induced": N, "invalid": N},
     "invalid": [...], "explore_s": X, "shrink_s": X, "reproduce": "simharness fuzz ..."}
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO, Any

from simharness.explore.campaign import DEFAULT_CHUNK, CampaignResult
from simharness.explore.corpus import find_case, write_case
from simharness.explore.coverage import UNIVERSE, summarize


class Progress:
    """Examples per second, failures by signature and coverage, on one updating line."""

    def __init__(self, stream: IO[str], every_s: float = 1.0) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.every = every_s if self.tty else 5.0
        self._last = 0.0

    def line(self, r: CampaignResult) -> str:
        total = sum(len(v) for v in UNIVERSE.values())
        reached = sum(1 for area, names in UNIVERSE.items() for n in names
                      if r.coverage.get(f"{area}.{n}"))
        fails = ", ".join(f"{s} x{f.count}" for s, f in sorted(r.findings.items())) or "none"
        return (f"fuzz {r.config.runtime} seed {r.config.seed}: {r.examples} examples "
                f"({r.examples_per_s:.0f}/s) | failures: {fails} | coverage {reached}/{total}")

    def __call__(self, r: CampaignResult) -> None:
        now = time.perf_counter()
        if now - self._last < self.every:
            return
        self._last = now
        text = self.line(r)
        if self.tty:
            self.stream.write("\r\x1b[K" + text[:200])
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self, r: CampaignResult) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(self.line(r) + "\n")
        if r.findings:
            self.stream.write(f"shrunk {len(r.shrunk)} failure(s) in {r.shrink_s:.1f} s\n")
        self.stream.flush()


def write_cases(r: CampaignResult, directory: str | Path) -> dict[str, tuple[Path, bool]]:
    """signature -> (corpus case, known before): writes each new failure, once per signature."""
    out: dict[str, tuple[Path, bool]] = {}
    runtime = r.config.runtime
    for sig in sorted(r.findings):
        known = find_case(directory, runtime, sig)
        if known is not None:
            out[sig] = (known.path, True)
            continue
        f = r.findings[sig]
        sh = r.shrunk.get(sig)
        raw, nodes, ranks = (sh.raw, sh.nodes, sh.ranks) if sh else (f.raw, f.nodes, f.ranks)
        path = write_case(directory, raw, runtime, sig, seed=r.config.seed,
                          example=f.chunk * r.config.chunk_size + f.example, nodes=nodes, ranks=ranks)
        out[sig] = (path, False)
    return out


def campaign_summary(r: CampaignResult, paths: dict[str, tuple[Path, bool]]) -> dict[str, Any]:
    failures = []
    for sig in sorted(r.findings):
        f = r.findings[sig]
        sh = r.shrunk.get(sig)
        path, known = paths.get(sig, (None, False))
        failures.append({
            "check": f.check, "signature": sig, "case": None if path is None else path.as_posix(),
            "nodes": sh.nodes if sh else f.nodes, "ranks": sh.ranks if sh else f.ranks,
            "count": f.count, "known": known,
            "shrink_s": round(sh.wall_s, 2) if sh else None,
            "message": f.messages[0] if f.messages else "",
        })
    cfg = r.config
    return {
        "runtime": cfg.runtime,
        "seed": cfg.seed,
        "examples": r.examples,
        "examples_per_s": round(r.examples_per_s, 1),
        "failures": failures,
        "coverage": summarize(r.coverage, r.examples),
        "outcomes": {k: r.statuses.get(k, 0) for k in ("pass", "fail", "fault_induced", "invalid")},
        "invalid": r.invalid[:5],
        "explore_s": round(r.explore_s, 2),
        "shrink_s": round(r.shrink_s, 2),
        "reproduce": (f"simharness fuzz --runtime {cfg.runtime} --seed {cfg.seed} "
                      f"--examples {r.examples}"
                      + (f" --chunk-size {cfg.chunk_size}" if cfg.chunk_size != DEFAULT_CHUNK else "")
                      + (" --tolerated-only" if cfg.tolerated_only else "")),
    }


def print_summary(summary: dict[str, Any], out: IO[str]) -> None:
    s = summary
    out.write(f"{s['examples']} examples under {s['runtime']} ({s['examples_per_s']}/s), "
              f"outcomes {s['outcomes']}\n")
    cov = s["coverage"]
    out.write(f"coverage {cov['reached']} graph features\n")
    for area in UNIVERSE:
        missed = [k for k, v in cov[area].items() if not v]
        if missed:
            out.write(f"  {area:<7} never: {', '.join(missed)}\n")
    if not s["failures"]:
        out.write("no failure found\n")
    for f in s["failures"]:
        where = f["case"] or "(not written)"
        state = "known" if f["known"] else "new"
        out.write(f"FAIL {f['signature']} x{f['count']}: {f['nodes']} nodes on {f['ranks']} "
                  f"rank(s), {state} case {where}\n     {f['message'][:300]}\n")
    out.write(f"reproduce: {s['reproduce']}\n")
