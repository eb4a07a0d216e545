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
The corpus is deduplicated by (runtime, signature): a campaign that finds a known failure
reports the existing case instead of writing another one.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simharness.errors import ScenarioError, UsageError
from simharness.explore.execute import execute, signature
from simharness.fileio import write_text
from simharness.run import RunReport, run_scenario, simulate
from simharness.scenario.loader import load_scenario, parse_scenario, read_yaml
from simharness.scenario.model import CorpusMeta, Scenario
from simharness.scenario.sections import parse_corpus
from simharness.trace import DIGEST_SCHEME, other_scheme

DEFAULT_DIR = Path("scenarios") / "corpus"


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


def find_case(directory: str | Path, runtime: str, sig: str) -> Case | None:
    for case in cases(directory):
        if case.meta is not None and case.runtime == runtime and case.signature == sig:
            return case
    return None


def case_name(runtime: str, sig: str) -> str:
    return f"{runtime}__{sig.replace(':', '-')}"


def digest_of(sc: Scenario, runtime: str) -> tuple[str | None, str]:
    """(signature or None, trace digest) of one run of `sc` under `runtime`."""
    result, violations = simulate(sc, runtime, keep_trace=False)
    return signature_of(violations), result.recorder.digest()


def signature_of(violations: list) -> str | None:
    """``check:key`` of a run's violations (the corpus's failure signature), None for a pass."""
    if not violations:
        return None
    check, key = signature(violations)
    return f"{check}:{key}"


def write_case(directory: str | Path, raw: dict[str, Any], runtime: str, sig: str, *,
               seed: int, example: int, nodes: int, ranks: int, note: str = "") -> Path:
    """Write a shrunk failure as a corpus case (status ``open``); return its path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    name = case_name(runtime, sig)
    body = {k: v for k, v in copy.deepcopy(raw).items() if k != "corpus"}
    body["name"] = name
    got, digest = digest_of(parse_scenario(copy.deepcopy(body), source="<corpus>"), runtime)
    check, _, _key = sig.partition(":")
    meta: dict[str, Any] = {"signature": sig, "check": check, "runtime": runtime,
                            "status": "open", "seed": seed, "example": example,
                            "nodes": nodes, "ranks": ranks, "trace_digest": digest}
    if note:
        meta["note"] = note
    if got != sig:
        meta["note"] = (note + " " if note else "") + f"(replay gave {got or 'a pass'})"
    path = d / f"{name}.yaml"
    _dump(path, {"corpus": meta, **body})
    return path


def _dump(path: Path, data: dict[str, Any]) -> None:
    head = ("# A minimal failing scenario found by `simharness fuzz`.\n"
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


def replay(path: str | Path, update: bool = False, keep_trace: bool = False,
           raw: dict[str, Any] | None = None) -> Replay:
    """Run a corpus case and say whether it behaves as recorded.

    The run comes back with the verdict (`Replay.run`), so that showing it needs no second run;
    `keep_trace` keeps its events, for a report page. `raw`: the file as already read, if it was
    (`load_scenario`)."""
    p = Path(path)
    sc = load_scenario(p, raw=raw)  # validates, with the file name in any error
    meta = sc.corpus
    if meta is None:
        raise ScenarioError("corpus", "missing: not a corpus case (expected a corpus: block with "
                                      "signature, runtime and status)", source=str(p))
    runtime, status, expected = meta.runtime, meta.status, meta.signature
    try:
        run = run_scenario(sc, runtime, keep_trace=keep_trace)
    except UsageError as exc:  # the recorded runtime cannot run here: the case's key says which
        raise ScenarioError("corpus.runtime", str(exc), source=str(p)) from None
    got, digest = signature_of(run.violations), run.trace_digest
    recorded = meta.trace_digest
    if status == "open":
        if got == expected:
            ok, message = True, f"still fails as recorded ({expected})"
        elif got is None:
            ok, message = False, (f"now passes under {runtime}: the {expected} failure is gone; "
                                  f"if the runtime was fixed, set corpus.status to fixed")
        else:
            ok, message = False, f"fails differently: {got} instead of {expected}"
    else:
        ok = got is None
        message = "passes, as a fixed case must" if ok else f"fails again ({got}): a regression"
    if ok and recorded and recorded != digest:
        if update:
            message += "; trace digest updated" + _record_digest(p, sc, digest)
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
        message += "; trace digest recorded" + _record_digest(p, sc, digest)
    return Replay(p, runtime, status, expected, got, recorded, digest, ok, message, run)


#: the corpus block: its first line, then its lines (indented, or blank) as group 1
_CORPUS_BLOCK = re.compile(r"^corpus:[ \t]*\n((?:(?:[ \t]+.*)?\n)*)", re.MULTILINE)
#: the block's trace digest line, its value as group 2
_DIGEST_LINE = re.compile(r"^(  trace_digest: *)(\S*)[ \t]*$", re.MULTILINE)


def _record_digest(path: Path, sc: Scenario, digest: str) -> str:
    """`_write_digest`; a file that cannot be written is one line naming it."""
    try:
        return _write_digest(path, sc, digest)
    except OSError as exc:
        raise UsageError(f"{path}: cannot record the new trace digest: {exc.strerror or exc}") from None


def _write_digest(path: Path, sc: Scenario, digest: str) -> str:
    """Write `digest` as the case's trace digest, changing nothing else of the file: its
    comments, order and layout are what a person may have written. In the file's one ``corpus:``
    block, the value of its ``trace_digest:`` line is replaced, or the line is added at the end
    of the block. A file without one such block (YAML flow style, another indentation) is
    written anew from what was read, and the returned text (for the replay's message) says so;
    otherwise it is empty."""
    text = path.read_text(encoding="utf-8")
    blocks = list(_CORPUS_BLOCK.finditer(text))
    body = blocks[0].group(1) if len(blocks) == 1 else ""
    if len(blocks) == 1 and len(_DIGEST_LINE.findall(body)) <= 1:
        if _DIGEST_LINE.search(body):
            body = _DIGEST_LINE.sub(lambda m: m.group(1) + digest, body)
        else:  # a new last line of the block; blank lines after the block stay after it
            kept = body.rstrip("\n")
            body = f"{kept}\n  trace_digest: {digest}{body[len(kept):]}" if kept else \
                f"  trace_digest: {digest}\n"
        start, end = blocks[0].span(1)
        write_text(path, text[:start] + body + text[end:])
        return ""
    raw = copy.deepcopy(dict(sc.raw))  # the file as read: the scenario keeps its own
    raw["corpus"]["trace_digest"] = digest
    _dump(path, raw)
    return " (the file was written anew from what was read: comments in it are gone)"


__all__ = ["DEFAULT_DIR", "Case", "Replay", "cases", "execute", "find_case", "replay", "write_case"]
