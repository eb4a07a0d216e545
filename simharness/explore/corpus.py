"""The fuzz corpus: minimal failing scenarios as YAML files that replay bit for bit.

A corpus case is an ordinary scenario file (``scenarios/corpus/*.yaml``) with one more top-level
block, ``corpus:``, which the loader checks and the run ignores:

```yaml
corpus:
  signature: loop_exit:peer      # check:key, as `simharness.explore.execute.signature` names it
  check: loop_exit
  runtime: mstar-rust-prefix     # the runtime it was found under (replay uses it)
  status: open                   # open: must still fail this way; fixed: must pass
  seed: 0                        # the campaign seed ...
  example: 3                     # ... and the example's index in that campaign
  nodes: 2
  ranks: 2
  trace_digest: v2-sha256:...    # what replay must reproduce exactly (scheme: simharness.trace)
  note: ...                      # why it fails: a real gap in the runtime, or a model error fixed
```

The block has one reader, the loader's `parse_corpus` (a `CorpusMeta`, kept as
`Scenario.corpus`); the cases here are read through it too. `replay` runs a case under its
runtime and compares: the signature (an ``open`` case that now passes says so: mark it
``fixed``), then the trace digest (a different digest with the same failure means the simulator
changed since the case was recorded: ``--update`` records it anew, rewriting that one value and
nothing else of the file). A digest recorded under an older digest scheme is named as such, not
as a changed trace.
The corpus is deduplicated by (runtime, against, signature): a campaign that finds a known
failure reports the existing case instead of writing another one.

A *differential* case (found by ``fuzz --against B``) records the second runtime too::

  corpus:
    signature: diff:routes        # diff:<first divergence kind>, `simharness.differential`
    runtime: mstar-rust-prefix
    against: mstar-python
    trace_digest: ...             # the first runtime's run ...
    against_trace_digest: ...     # ... and the second's

and its replay runs both arms and compares them: an ``open`` case must still diverge that way.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simharness.errors import ScenarioError, UsageError
from simharness.explore.execute import execute
from simharness.explore.signatures import signature_of
from simharness.fileio import write_text
from simharness.run import RunReport, run_scenario, simulate
from simharness.scenario.loader import load_scenario, parse_scenario, read_yaml
from simharness.scenario.model import CorpusMeta, Scenario
from simharness.scenario.sections import parse_corpus
from simharness.trace import DIGEST_SCHEME, other_scheme

DEFAULT_DIR = Path("scenarios") / "corpus"

#: what marks a project's root folder, when no corpus is found above a folder
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", ".git")


@dataclass(frozen=True)
class Located:
    """Where a command's corpus is, and how it was found (for the line that says so)."""

    path: Path
    #: "found" (an existing corpus above the start), "project" (none yet, in the project a
    #: marker names) or "here" (no project: beside the start)
    how: str
    start: Path

    @property
    def exists(self) -> bool:
        return self.path.is_dir()

    def describe(self) -> str:
        n = len(list(self.path.glob("*.yaml"))) if self.exists else 0
        if self.how == "found":
            return f"corpus {self.path} ({n} case{'s' if n != 1 else ''}; found from {self.start})"
        where = (f"the project at {self.path.parent.parent}" if self.how == "project"
                 else f"{self.start}, in no project")
        return f"corpus {self.path} (none yet for {where}: created with the first case)"


def locate(start: str | Path | None = None) -> Located:
    """The corpus of the project `start` (a folder or a scenario file; default: the current
    folder) belongs to: the nearest ``scenarios/corpus`` folder at or above it; else
    ``scenarios/corpus`` in the nearest folder above it that holds a project marker
    (`PROJECT_MARKERS`); else ``scenarios/corpus`` in `start` itself."""
    here = Path.cwd() if start is None else Path(start)
    if here.is_file() or here.suffix in (".yaml", ".yml"):
        here = here.parent
    here = here.resolve()
    chain = [here, *here.parents]
    for d in chain:
        if (d / DEFAULT_DIR).is_dir():
            return Located(_shown(d / DEFAULT_DIR), "found", here)
    for d in chain:
        if any((d / m).exists() for m in PROJECT_MARKERS):
            return Located(_shown(d / DEFAULT_DIR), "project", here)
    return Located(_shown(here / DEFAULT_DIR), "here", here)


def _shown(path: Path) -> Path:
    """`path` relative to the current folder when it lies under it (as a user would type it)."""
    try:
        return path.relative_to(Path.cwd().resolve())
    except ValueError:
        return path


@dataclass
class Case:
    path: Path
    #: the file's ``corpus:`` block; None for a file without one
    meta: CorpusMeta | None

    @property
    def signature(self) -> str:
        return self._meta.signature

    @property
    def runtime(self) -> str:
        return self._meta.runtime

    @property
    def status(self) -> str:
        return self._meta.status

    @property
    def against(self) -> str | None:
        return self._meta.against

    @property
    def _meta(self) -> CorpusMeta:
        if self.meta is None:
            raise ScenarioError("corpus", "missing: not a corpus case", source=str(self.path))
        return self.meta


def read_case(path: Path) -> Case:
    """A corpus file's ``corpus:`` block, read as the loader reads it."""
    raw = read_yaml(path)
    try:
        return Case(path, parse_corpus(raw["corpus"]) if "corpus" in raw else None)
    except ScenarioError as err:
        raise err.with_source(str(path)) from None


def cases(directory: str | Path = DEFAULT_DIR) -> list[Case]:
    d = Path(directory)
    if not d.is_dir():
        return []
    return [read_case(p) for p in sorted(d.glob("*.yaml"))]


def find_case(directory: str | Path, runtime: str, sig: str, against: str | None = None) -> Case | None:
    for case in cases(directory):
        if (case.meta is not None and case.runtime == runtime and case.against == against
                and case.signature == sig):
            return case
    return None


def case_name(runtime: str, sig: str, against: str | None = None) -> str:
    arms = runtime if against is None else f"{runtime}__vs__{against}"
    return f"{arms}__{sig.replace(':', '-')}"


def digest_of(sc: Scenario, runtime: str) -> tuple[str | None, str]:
    """(signature or None, trace digest) of one run of `sc` under `runtime`."""
    result, violations = simulate(sc, runtime, keep_trace=False)
    return signature_of(violations), result.recorder.digest()


@dataclass
class DifferentialRun:
    """Both arms of a differential case's run: its signature and each arm's digest."""

    signature: str | None
    digests: tuple[str, str]
    divergences: list[Any]
    #: the first arm's run (what a report page shows)
    run: RunReport


def run_differential(sc: Scenario, runtime: str, against: str) -> DifferentialRun:
    import time

    from simharness import differential
    from simharness.explore.execute import run_arms

    t0 = time.perf_counter()
    a, b, results = run_arms(sc, runtime, against, digest=True)
    found = differential.divergences(a, b)
    digests = (results[0].recorder.digest(), results[1].recorder.digest())
    report = RunReport(sc, runtime, "sim", results[0], list(a.violations), digests[0],
                       time.perf_counter() - t0)
    return DifferentialRun(differential.signature(found), digests, found, report)




def write_case(directory: str | Path, raw: dict[str, Any], runtime: str, sig: str, *,
               seed: int, example: int, nodes: int, ranks: int, note: str = "",
               against: str | None = None, judged: dict[str, Any] | None = None,
               name: str | None = None, found_by: str = "fuzz") -> Path:
    """Write a shrunk failure as a corpus case (status ``open``); return its path. `against`:
    the second runtime of a differential failure. The case carries its verdict
    (`simharness.explore.verdict`: the real stack and the other profiles run it): `judged`, or
    one judged here. `name`: the file's stem (default `case_name`); `found_by`: the verb that found
    it, for the file's first line."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    name = name or case_name(runtime, sig, against)
    body = {k: v for k, v in copy.deepcopy(raw).items() if k != "corpus"}
    body["name"] = name
    sc = parse_scenario(copy.deepcopy(body), source="<corpus>")
    check, _, _key = sig.partition(":")
    meta: dict[str, Any] = {"signature": sig, "check": check, "runtime": runtime}
    if against is None:
        got, digest = digest_of(sc, runtime)
    else:
        diff = run_differential(sc, runtime, against)
        got, digest = diff.signature, diff.digests[0]
        meta.update(against=against, against_trace_digest=diff.digests[1])
    meta.update({"status": "open", "seed": seed, "example": example,
                 "nodes": nodes, "ranks": ranks, "trace_digest": digest})
    if judged is None:
        from simharness.explore.verdict import verdict

        judged = verdict(sc, runtime, sig, against).to_json()
    meta["verdict"] = judged
    if note:
        meta["note"] = note
    if got != sig:
        meta["note"] = (note + " " if note else "") + f"(replay gave {got or 'a pass'})"
    path = d / f"{name}.yaml"
    _dump(path, {"corpus": meta, **body}, found_by)
    return path


def _dump(path: Path, data: dict[str, Any], found_by: str = "fuzz") -> None:
    head = (f"# A minimal failing scenario found by `simharness {found_by}`.\n"
            f"# Replay it: simharness replay {path.as_posix()}\n")
    # Atomic: an interrupted campaign leaves whole cases or none, never half a file.
    write_text(path, head + yaml.safe_dump(data, sort_keys=False, width=100))


@dataclass
class Replay:
    path: Path
    runtime: str
    status: str
    expected: str
    got: str | None
    expected_digest: str | None
    digest: str
    ok: bool
    message: str
    #: the case's run, for whoever shows it (a console report, a report page)
    run: RunReport | None = field(default=None, compare=False, repr=False)
    #: a differential case's second runtime
    against: str | None = None
    #: the verdict on the case (`simharness.explore.verdict`), as JSON
    verdict: dict[str, Any] | None = None


def replay(path: str | Path, update: bool = False, keep_trace: bool = False,
           raw: dict[str, Any] | None = None, judge: bool = True) -> Replay:
    """Run a corpus case and say whether it behaves as recorded.

    The run comes back with the verdict (`Replay.run`), so that showing it needs no second run;
    `keep_trace` keeps its events, for a report page. `raw`: the file as already read, if it was
    (`load_scenario`). `judge`: also give the case its verdict (the real stack and our model of
    it run it; `simharness.explore.verdict`); ``update`` records it in the file."""
    p = Path(path)
    sc = load_scenario(p, raw=raw)  # validates, with the file name in any error
    meta = sc.corpus
    if meta is None:
        raise ScenarioError("corpus", "missing: not a corpus case (expected a corpus: block with "
                                      "signature, runtime and status)", source=str(p))
    runtime, status, expected = meta.runtime, meta.status, meta.signature
    against = meta.against
    other_digest: tuple[str, str] | None = None  # a differential case's second arm: recorded, got
    try:
        if against is None:
            run = run_scenario(sc, runtime, keep_trace=keep_trace)
            got, digest = signature_of(run.violations), run.trace_digest
        else:
            diff = run_differential(sc, runtime, against)
            run, got, digest = diff.run, diff.signature, diff.digests[0]
            other_digest = (meta.against_trace_digest or "", diff.digests[1])
    except UsageError as exc:  # the recorded runtime cannot run here: the case's key says which
        key = "corpus.runtime" if against is None or runtime in str(exc) else "corpus.against"
        raise ScenarioError(key, str(exc), source=str(p)) from None
    recorded = meta.trace_digest
    arms = runtime if against is None else f"{runtime} against {against}"
    renamed = ""  # an older, coarser name of the same failure (`renames`)
    if status == "open":
        if got == expected:
            ok, message = True, f"still fails as recorded ({expected})"
        elif renames(expected, got):
            ok, message = True, f"still fails as recorded ({expected}, now named {got})"
            renamed = str(got)
        elif got is None:
            ok, message = False, (f"now passes under {arms}: the {expected} failure is gone; "
                                  f"if the runtime was fixed, set corpus.status to fixed")
        else:
            ok, message = False, f"fails differently: {got} instead of {expected}"
    else:
        ok = got is None
        message = "passes, as a fixed case must" if ok else f"fails again ({got}): a regression"
    if ok and recorded and recorded != digest:
        if update:
            message += "; trace digest updated" + _record(p, sc, "trace_digest", digest)
        elif ":" not in recorded:  # not a digest of any scheme: a typo, not an old record
            ok = False
            message += (f"; corpus.trace_digest {recorded[:40]!r} is not a trace digest (expected "
                        f"{DIGEST_SCHEME}:...): simharness replay --update records this run's")
        elif (old := other_scheme(str(recorded))) is not None:
            ok = False
            message += (f"; its trace digest was recorded under another digest scheme ({old}; "
                        f"this simharness makes {DIGEST_SCHEME}): simharness replay --update "
                        f"records it in this one")
        else:
            ok = False
            message += (f"; but the trace differs from the recorded one ({recorded[:19]}... vs "
                        f"{digest[:19]}...): the simulator changed since it was recorded "
                        f"(simharness replay --update records the new trace)")
    elif ok and update and not recorded:
        message += "; trace digest recorded" + _record(p, sc, "trace_digest", digest)
    if ok and other_digest is not None and other_digest[0] != other_digest[1]:
        if update:
            message += ("; the second arm's trace digest updated"
                        + _record(p, sc, "against_trace_digest", other_digest[1]))
        else:
            ok = False
            message += (f"; but {against}'s trace differs from the recorded one: the simulator "
                        f"changed since it was recorded (simharness replay --update records it)")
    if renamed:
        if update:
            message += "; signature renamed" + _record(p, sc, "signature", renamed)
        else:
            message += ": simharness replay --update records the new name"
    judged = None
    if judge and status == "open":
        from simharness.explore.verdict import stack_runs_here, verdict

        if meta.verdict and not stack_runs_here():
            # no stack here to judge with: the verdict recorded where there was one stands
            judged = dict(meta.verdict)
        else:
            judged = verdict(sc, runtime, renamed or expected, against).to_json()
            if update and ok and judged != meta.verdict:
                message += "; verdict recorded" + _record(p, sc, "verdict", judged)
    return Replay(p, runtime, status, expected, got, recorded, digest, ok, message, run, against,
                  judged)


def renames(recorded: str, got: str | None) -> bool:
    """Whether `got` is the same failure as `recorded` under a finer name: a signature that
    names the mechanism too (``drain:dropped:remove_request:tp-follower``) renames the older
    ``drain:dropped``, so cases recorded before mechanisms were named still replay."""
    return got is not None and got.startswith(recorded + ":") and recorded.count(":") == 1


#: the corpus block: its first line, then its lines (indented, or blank) as group 1
_CORPUS_BLOCK = re.compile(r"^corpus:[ \t]*\n((?:(?:[ \t]+.*)?\n)*)", re.MULTILINE)
def _entry(key: str) -> re.Pattern[str]:
    """The block's `key` entry: its line and the lines indented under it (a mapping's)."""
    return re.compile(rf"^  {re.escape(key)}:.*\n(?:    .*\n)*", re.MULTILINE)


def _entry_lines(key: str, value: Any) -> str:
    """`key: value` as lines of the ``corpus:`` block (a mapping as YAML, indented under it)."""
    if isinstance(value, dict):
        dumped = yaml.safe_dump({key: value}, sort_keys=False, width=96)
        return "".join(f"  {line}\n" for line in dumped.splitlines())
    return f"  {key}: {value}\n"


def _record(path: Path, sc: Scenario, key: str, value: Any) -> str:
    """`_write_entry`; a file that cannot be written is one line naming it."""
    try:
        return _write_entry(path, sc, key, value)
    except OSError as exc:
        raise UsageError(f"{path}: cannot record the new {key.replace('_', ' ')}: "
                         f"{exc.strerror or exc}") from None


def _write_entry(path: Path, sc: Scenario, key: str, value: Any) -> str:
    """Write `value` as the case's ``corpus.<key>`` (a trace digest, a new signature, the
    verdict), changing nothing else of the file: its comments, order and layout are what a
    person may have written. In the file's one ``corpus:`` block, the entry is replaced, or
    added at the end of the block. A file without one such block (YAML flow style, another
    indentation) is written anew from what was read, and the returned text (for the replay's
    message) says so; otherwise it is empty."""
    text = path.read_text(encoding="utf-8")
    blocks = list(_CORPUS_BLOCK.finditer(text))
    body = blocks[0].group(1) if len(blocks) == 1 else ""
    entry = _entry(key)
    if len(blocks) == 1 and len(entry.findall(body)) <= 1:
        lines = _entry_lines(key, value)
        if entry.search(body):
            body = entry.sub(lambda _m: lines, body, count=1)
        else:  # a new last entry of the block; blank lines after the block stay after it
            kept = body.rstrip("\n")
            body = f"{kept}\n{lines}{body[len(kept) + 1:]}" if kept else lines
        start, end = blocks[0].span(1)
        write_text(path, text[:start] + body + text[end:])
        return ""
    raw = copy.deepcopy(dict(sc.raw))  # the file as read: the scenario keeps its own
    raw["corpus"][key] = value
    _dump(path, raw)
    return " (the file was written anew from what was read: comments in it are gone)"


__all__ = ["DEFAULT_DIR", "Case", "DifferentialRun", "Located", "Replay", "cases", "execute",
           "find_case", "locate", "renames", "replay", "run_differential", "write_case"]
