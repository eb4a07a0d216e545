"""What a fuzz campaign shows and returns: the progress line, corpus writing, the summary JSON.

The summary object (``simharness fuzz --json``) is::

    {"runtime": ..., "against": null or the second runtime, "arms": null or in words,
     "left_out": [features a differential campaign does not generate], "seed": N,
     "examples": N, "examples_per_s": X, "slowest_example_s": X,
     "failures": [{"check": ..., "signature": ..., "known": bool, "case": PATH or null,
                   "replay": "simharness replay PATH" or null, "not_written": why or null,
                   "nodes": N, "ranks": N,
                   "count": N, "shrunk": bool, "shrink_s": X, "shrink_stopped": "" | "time" |
                   "calls" | "interrupted", "message": ...,
                   "verdict": {"mstar": real | runtime-specific | model-only | unverified,
                               "faults": none | transport | beyond, "stack": ..., "text": ...}
                              or null (a known case recorded without one)}],
     "new": [signature, ...], "known": [signature, ...],
     "coverage": {"layout": {...}, "edges": {...}, "loops": {...}, "faults": {...},
                  "reached": "K/M", "examples": N},
     "outcomes": {"pass": N, "fail": N, "fault_induced": N, "invalid": N} (and
                  "incomparable": N in a differential campaign),
     "invalid": [...], "explore_s": X, "shrink_s": X, "interrupted": bool,
     "reproduce": "simharness fuzz ..."}

A *known* failure is one the corpus already holds for this runtime (same signature): it is
reported with the existing case and never written again. `nodes`, `ranks` and `message`
describe the case on disk: the shrunk example for a new failure, the corpus case for a known
one. Messages are shortened at a word boundary, never cut mid-word.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import IO, Any

from simharness import differential
from simharness.explore.campaign import DEFAULT_CHUNK, CampaignResult
from simharness.explore.corpus import Case, cases, write_case
from simharness.explore.coverage import UNIVERSE, summarize
from simharness.wording import plural

#: an example's outcomes, in the order they are counted (``incomparable``: differential only)
OUTCOMES = ("pass", "fail", "fault_induced", "incomparable", "invalid")

#: the longest failure message printed (the JSON keeps the whole first message)
MESSAGE_CHARS = 300


def shorten(text: str, width: int) -> str:
    """`text` on one line, at most `width` characters, cut at a word boundary."""
    return textwrap.shorten(" ".join(text.split()), width, placeholder=" ...")


def known_cases(directory: str | Path, runtime: str, against: str | None = None) -> dict[str, Case]:
    """signature -> corpus case, for the cases of `runtime` (of `runtime` against `against`, for
    a differential campaign) in `directory`."""
    return {c.signature: c for c in cases(directory)
            if c.meta is not None and c.runtime == runtime and c.against == against}


class Progress:
    """Examples per second, failures by signature and coverage (the search phase; the command
    line shows the shrink phase on a status line of its own)."""

    def __init__(self, stream: IO[str], every_s: float = 1.0) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.every = every_s if self.tty else 5.0
        self._last = 0.0

    def line(self, r: CampaignResult) -> str:
        total = sum(len(v) for v in UNIVERSE.values())
        reached = sum(1 for area, names in UNIVERSE.items() for n in names
                      if r.coverage.get(f"{area}.{n}"))
        vs = f" against {r.config.against}" if r.config.against else ""
        head = f"fuzz {r.config.runtime}{vs} seed {r.config.seed}: "
        fails = ", ".join(f"{s} x{f.count}" + (" (known)" if s in r.config.known else "")
                          for s, f in sorted(r.findings.items())) or "none"
        return (head + f"{plural(r.examples, 'example')} ({r.examples_per_s:.0f}/s) | failures: {fails} | "
                f"coverage {reached}/{total}")

    def __call__(self, r: CampaignResult) -> None:
        now = time.perf_counter()
        if now - self._last < self.every:
            return
        self._last = now
        text = self.line(r)
        if self.tty:
            self.stream.write("\r\x1b[K" + shorten(text, 200))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self, r: CampaignResult) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(self.line(r) + "\n")
        if r.shrunk:
            cut = [s for s, sh in r.shrunk.items() if sh.stopped]
            note = f" ({len(cut)} stopped early: the budget ran out)" if cut else ""
            self.stream.write(f"shrunk {plural(len(r.shrunk), 'failure')} in {r.shrink_s:.1f} s{note}\n")
        if r.cut_chunk:
            self.stream.write("the deadline cut the last chunk: its examples are not counted\n")
        self.stream.flush()


class CaseWriter:
    """Writes each new failure to the corpus as soon as it is final; remembers every path."""

    def __init__(self, directory: str | Path | None, known: dict[str, Case]) -> None:
        self.directory = directory
        self.known = known
        #: signature -> written case (new failures only)
        self.paths: dict[str, Path] = {}
        #: signature -> why its case could not be written (the campaign goes on without it)
        self.unwritten: dict[str, str] = {}
        #: signature -> the verdict on each new failure (`simharness.explore.verdict`), as JSON
        self.verdicts: dict[str, dict[str, Any]] = {}
        #: a perf_counter reading past which verdicts try no more seeds (a --time budget)
        self.until: float | None = None

    def __call__(self, r: CampaignResult, sig: str, note: str = "") -> None:
        if sig in self.known or sig in self.paths or sig in self.unwritten or sig in self.verdicts:
            return
        f = r.findings[sig]
        sh = r.shrunk.get(sig)
        raw, nodes, ranks = (sh.raw, sh.nodes, sh.ranks) if sh else (f.raw, f.nodes, f.ranks)
        try:
            self.verdicts[sig] = judge(raw, r.config.runtime, sig, r.config.against, self.until)
        except Exception as exc:  # a verdict that cannot be given must not cost the case
            self.verdicts[sig] = {"mstar": "unverified", "faults": "none", "stack": "pass",
                                  "text": f"unverified: the verdict could not be given "
                                          f"({type(exc).__name__}: {exc})"}
        if self.directory is None:
            return
        if sh is not None and sh.stopped == "time":
            note = note or "Shrinking stopped early: the campaign's time budget ran out."
        try:
            self.paths[sig] = write_case(self.directory, raw, r.config.runtime, sig,
                                         seed=r.config.seed,
                                         example=f.chunk * r.config.chunk_size + f.example,
                                         nodes=nodes, ranks=ranks, note=note,
                                         against=r.config.against, judged=self.verdicts[sig])
        except OSError as exc:
            # A full disk or a folder gone mid-campaign: the failures found so far still count
            # and are still shown; only this case is missing from the corpus.
            self.unwritten[sig] = f"cannot write to {self.directory}: {exc.strerror or exc}"

    def rest(self, r: CampaignResult, note: str) -> None:
        """Write the new failures that never became final (an interrupted campaign)."""
        for sig in r.new_signatures():
            self(r, sig, note)


def judge(raw: dict[str, Any], runtime: str, sig: str, against: str | None,
          until: float | None = None) -> dict[str, Any]:
    """The verdict on a failing example (`simharness.explore.verdict`), as JSON."""
    import copy

    from simharness.explore.verdict import verdict
    from simharness.scenario.loader import parse_scenario

    sc = parse_scenario(copy.deepcopy(raw), source="<fuzz>", default_name="fuzz")
    return verdict(sc, runtime, sig, against, until).to_json()


def campaign_summary(r: CampaignResult, writer: CaseWriter | None = None,
                     interrupted: str = "") -> dict[str, Any]:
    known = writer.known if writer is not None else {}
    written = writer.paths if writer is not None else {}
    unwritten = writer.unwritten if writer is not None else {}
    failures = []
    for sig in sorted(r.findings):
        f = r.findings[sig]
        entry: dict[str, Any] = {"check": f.check, "signature": sig, "count": f.count}
        path: Path | None  # the case file, if there is one
        if sig in known:
            case = known[sig]
            meta = case.meta
            assert meta is not None  # known_cases holds corpus cases only
            path = case.path
            entry.update(known=True, nodes=meta.nodes, ranks=meta.ranks,
                         shrunk=None, shrink_s=None, shrink_stopped="",
                         message=str(meta.note), verdict=meta.verdict)
        else:
            sh = r.shrunk.get(sig)
            path = written.get(sig)
            stopped = sh.stopped if sh else ("interrupted" if interrupted else "")
            messages = sh.messages if sh else f.messages
            entry.update(known=False, nodes=sh.nodes if sh else f.nodes,
                         ranks=sh.ranks if sh else f.ranks,
                         shrunk=bool(sh and sh.shrunk),
                         shrink_s=round(sh.wall_s, 2) if sh else None, shrink_stopped=stopped,
                         message=messages[0] if messages else "",
                         verdict=writer.verdicts.get(sig) if writer is not None else None)
        entry["case"] = None if path is None else Path(path).as_posix()
        entry["replay"] = None if path is None else f"simharness replay {Path(path).as_posix()}"
        entry["not_written"] = unwritten.get(sig)
        failures.append(entry)
    cfg = r.config
    return {
        "runtime": cfg.runtime,
        "against": cfg.against,
        "arms": None if cfg.against is None else differential.arms_text(cfg.runtime, cfg.against),
        "left_out": [] if cfg.against is None else list(differential.left_out(cfg.runtime, cfg.against)),
        "seed": cfg.seed,
        "examples": r.examples,
        "examples_per_s": round(r.examples_per_s, 1),
        "slowest_example_s": round(r.slowest_s, 3),
        "failures": failures,
        "new": [f["signature"] for f in failures if not f["known"]],
        "known": [f["signature"] for f in failures if f["known"]],
        "coverage": summarize(r.coverage, r.examples),
        "outcomes": {k: r.statuses.get(k, 0) for k in OUTCOMES if k != "incomparable" or cfg.against},
        "invalid": r.invalid[:5],
        "explore_s": round(r.explore_s, 2),
        "shrink_s": round(r.shrink_s, 2),
        "interrupted": bool(interrupted),
        "reproduce": (f"simharness fuzz --runtime {cfg.runtime} "
                      + (f"--against {cfg.against} " if cfg.against else "")
                      + (f"--schedule {cfg.schedule} " if cfg.schedule else "")
                      + f"--seed {cfg.seed} "
                      f"--examples {r.examples}"
                      + (f" --chunk-size {cfg.chunk_size}" if cfg.chunk_size != DEFAULT_CHUNK else "")
                      + (" --tolerated-only" if cfg.tolerated_only else "")),
    }


def outcomes_text(outcomes: dict[str, int]) -> str:
    """``1 pass, 0 fail, 0 fault_induced, 0 invalid``: the campaign's outcome counts."""
    return ", ".join(f"{n} {k}" for k, n in outcomes.items())


_STOPPED = {"time": "shrinking stopped early: the time budget ran out",
            "calls": "shrinking stopped at its test-call budget",
            "interrupted": "not shrunk: the campaign was interrupted"}


def print_summary(summary: dict[str, Any], out: IO[str]) -> None:
    s = summary
    arms = s.get("arms") or s["runtime"]
    out.write(f"{plural(s['examples'], 'example')} under {arms} ({s['examples_per_s']}/s, "
              f"slowest {s['slowest_example_s']:.2f} s), outcomes: {outcomes_text(s['outcomes'])}\n")
    if s.get("left_out"):
        out.write(f"left out of generation (the arms cannot line them up): "
                  f"{', '.join(s['left_out'])}\n")
    cov = s["coverage"]
    out.write(f"coverage {cov['reached']} graph features\n")
    for area in UNIVERSE:
        missed = [k for k, v in cov[area].items() if not v]
        if missed:
            out.write(f"  {area:<7} never: {', '.join(missed)}\n")
    if not s["failures"]:
        out.write("no failure found\n")
    for f in s["failures"]:
        size = ("size not recorded" if f["nodes"] is None or f["ranks"] is None
                else f"{plural(f['nodes'], 'node')} on {plural(f['ranks'], 'rank')}")
        if f["known"]:
            out.write(f"known {f['signature']} x{f['count']}: already in the corpus ({size})\n")
        else:
            how = _STOPPED.get(f["shrink_stopped"], "")
            if not how:
                # shrink_s is None exactly when no shrink ran (--no-shrink); a shrink that ran
                # and gave nothing smaller is not --no-shrink's doing
                how = ("shrunk" if f["shrunk"] else "as found (--no-shrink)" if f["shrink_s"] is None
                       else "as found (the shrinker could not reduce it)")
                if f["shrunk"] and f["shrink_s"] is not None:
                    how += f" in {f['shrink_s']:.1f} s"
            out.write(f"FAIL {f['signature']} x{f['count']} (new): {size}, {how}\n")
            if f["message"]:
                out.write(f"     {shorten(f['message'], MESSAGE_CHARS)}\n")
        if f.get("verdict"):
            out.write(f"     verdict: {f['verdict']['text']}\n")
        unwritten = f"not written: {f['not_written']}" if f.get("not_written") else "not written (--no-write)"
        out.write(f"     {f['replay'] or unwritten}\n")
    new, known = len(s["new"]), len(s["known"])
    out.write(f"{plural(new, 'new failure')}, {known} known\n")
    out.write(f"reproduce: {s['reproduce']}\n")
