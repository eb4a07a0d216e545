"""The pytest plugin: scenarios and corpus cases as test items, and a fixture that runs one.

Registered under the ``pytest11`` entry point, so installing simharness is enough::

    pytest scenarios/                 # every scenario and corpus case under it
    pytest scenarios/ --junitxml=out.xml

* A **scenario** YAML (a mapping with ``graph`` and ``placement``) is collected as a file with
  one item, ``checks`` (every built-in check), plus ``expect`` when the scenario has an
  ``expect:`` block. Both share one run under the scenario's own runtime and seed. A failure
  prints the console report, as ``simharness run`` would.
* A **corpus case** (a scenario with a ``corpus:`` block) is one item named after its runtime
  and status. A ``fixed`` case must pass. An ``open`` case is an expected failure: it is
  reported as xfailed while it still fails exactly as recorded (signature and trace digest),
  and fails (strict) when it passes, or fails in another way. The block is read by the loader's
  `parse_corpus`, as ``simharness replay`` reads it; a block it refuses is one failing item,
  ``corpus``, whose text is the refusal.
* The **fixture** ``simharness_run`` runs a scenario inside any test and returns its summary
  (the ``--json`` object of ``simharness run``); a failed ``assert summary["violations"] == []``
  prints each violation as the console does.
* ``--simharness-runtime NAME`` (repeatable) and ``--simharness-seeds A..B`` run the collected
  scenarios under each runtime and at each seed, as separate test ids (``checks[NAME-seed3]``).

Other YAML files (configs, CI files) are left alone: a file is collected only when it parses to
a scenario. ``simharness_collect = false`` in the pytest ini options turns collection off.
Everything heavy is imported when an item runs, not when pytest starts. Each file is read once:
what collection read is what its items load and run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SUFFIXES = (".yaml", ".yml")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("simharness_collect", type="bool", default=True,
                  help="collect simharness scenario and corpus YAML files as test items")
    group = parser.getgroup("simharness")
    group.addoption("--simharness-runtime", action="append", metavar="NAME", default=[],
                    help="run the collected scenarios under this runtime (repeatable; default: "
                         "each scenario's own)")
    group.addoption("--simharness-seeds", metavar="A..B",
                    help="run the collected scenarios at each seed from A to B (or at seed A); "
                         "default: each scenario's own")


def _seeds(config: pytest.Config) -> list[int | None]:
    """The seeds ``--simharness-seeds`` asks for ([None]: each scenario's own)."""
    text = config.getoption("simharness_seeds")
    if not text:
        return [None]
    first, sep, last = str(text).partition("..")
    try:
        a, b = int(first), int(last) if sep else int(first)
    except ValueError:
        raise pytest.UsageError(f"--simharness-seeds {text}: expected A..B or A (whole numbers)") from None
    if a < 0 or b < a:
        raise pytest.UsageError(f"--simharness-seeds {text}: expected 0 <= A <= B")
    return list(range(a, b + 1))


def _runtimes(config: pytest.Config) -> list[str | None]:
    """The runtimes ``--simharness-runtime`` asks for ([None]: each scenario's own)."""
    return list(config.getoption("simharness_runtime")) or [None]


def _sniff(path: Path) -> dict[str, Any] | None:
    """The parsed file if it is a simharness scenario (or corpus case), else None.

    Read with the scenario loader's limits (size, depth, alias expansion), so a hostile or huge
    YAML file met while collecting costs nothing much.
    """
    from simharness.errors import ScenarioError
    from simharness.scenario.reading import read_yaml

    try:
        raw = read_yaml(path)
    except ScenarioError:
        return None
    if "graph" in raw and "placement" in raw:
        return raw
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix not in SUFFIXES or not parent.config.getini("simharness_collect"):
        return None
    raw = _sniff(file_path)
    if raw is None:
        return None
    # The loader's rule: a file with a corpus: block is a corpus case, whatever the block holds
    # (`CorpusFile` reports a block the loader refuses).
    kind = CorpusFile if "corpus" in raw else ScenarioFile
    node = kind.from_parent(parent, path=file_path)
    node.raw = raw
    return node


class SimharnessFailure(Exception):
    """A scenario or case that did not behave; its text is the console report."""


class CaseStillFails(Exception):
    """An open corpus case failed exactly as recorded: the expected failure."""


def _console(report: Any, command: list[str]) -> str:
    import io

    from simharness.report.console import render

    buf = io.StringIO()
    render(report, buf, command=command)
    return buf.getvalue()


class ScenarioFile(pytest.File):
    #: the file as collection read it
    raw: dict[str, Any]

    def collect(self):
        runtimes, seeds = _runtimes(self.config), _seeds(self.config)
        for runtime in runtimes:
            for seed in seeds:
                tag = "-".join(x for x in (runtime or "", "" if seed is None else f"seed{seed}") if x)
                for part in ("checks", "expect") if self.raw.get("expect") else ("checks",):
                    yield ScenarioItem.from_parent(self, name=f"{part}[{tag}]" if tag else part,
                                                   part=part, runtime=runtime, seed=seed)

    def report(self, runtime: str | None = None, seed: int | None = None) -> Any:
        """One run per (runtime, seed) of the file, shared by its items."""
        runs = self.__dict__.setdefault("_runs", {})
        if (runtime, seed) not in runs:
            from simharness.run import run_scenario
            from simharness.scenario.loader import load_scenario

            runs[(runtime, seed)] = run_scenario(load_scenario(self.path, raw=self.raw), runtime, seed)
        return runs[(runtime, seed)]


class ScenarioItem(pytest.Item):
    parent: ScenarioFile

    def __init__(self, *, part: str, runtime: str | None = None, seed: int | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.part = part
        self.runtime = runtime
        self.seed = seed

    def runtest(self) -> None:
        from simharness.errors import ScenarioError, UsageError

        try:
            report = self.parent.report(self.runtime, self.seed)
        except (ScenarioError, UsageError) as exc:
            raise SimharnessFailure(f"error: {exc}") from None
        mine = [v for v in report.violations if (v.check == "expect") == (self.part == "expect")]
        if mine:
            command = ["simharness", "run", str(self.path)]
            if self.runtime:
                command += ["--runtime", self.runtime]
            if self.seed is not None:
                command += ["--seed", str(self.seed)]
            raise SimharnessFailure(_console(report, command))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, SimharnessFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"scenario {self.path.name}: {self.part}"


class CorpusFile(pytest.File):
    #: the file as collection read it
    raw: dict[str, Any]

    def collect(self):
        from simharness.errors import ScenarioError
        from simharness.scenario.sections import parse_corpus

        try:
            meta = parse_corpus(self.raw["corpus"])
        except ScenarioError as err:
            yield CorpusItem.from_parent(self, name="corpus",
                                         refused=f"error: {err.with_source(str(self.path))}")
            return
        item = CorpusItem.from_parent(self, name=f"{meta.runtime}[{meta.status}]")
        if meta.status == "open":
            item.add_marker(pytest.mark.xfail(
                raises=CaseStillFails, strict=True,
                reason=f"open case: {meta.signature} under {meta.runtime} is a known failure"))
        yield item


class CorpusItem(pytest.Item):
    parent: CorpusFile

    def __init__(self, *, refused: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        #: why the loader refused the case's corpus: block ("" when it did not)
        self.refused = refused

    def runtest(self) -> None:
        from simharness.errors import ScenarioError, UsageError
        from simharness.explore.corpus import replay

        if self.refused:
            raise SimharnessFailure(self.refused)
        try:
            r = replay(self.path, raw=self.parent.raw, judge=False)
        except (ScenarioError, UsageError) as exc:
            raise SimharnessFailure(f"error: {exc}") from None
        if r.ok and r.status == "open":
            raise CaseStillFails(r.message)
        if not r.ok:
            text = f"{r.path} [{r.status}, {r.runtime}]: {r.message}"
            if r.got is not None:  # the replay's own run, shown as `simharness run` would
                text += "\n\n" + _console(r.run, ["simharness", "replay", str(self.path)])
            raise SimharnessFailure(text)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, SimharnessFailure | CaseStillFails):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"corpus case {self.path.name}: {self.name}"


@pytest.fixture
def simharness_run():
    """Run a scenario and return its summary (the object ``simharness run --json`` prints).

    ``simharness_run(path_or_scenario, runtime=None, seed=None, overrides=())``; the summary's
    ``outcome`` is ``pass`` or ``fail`` and ``violations`` lists what the checks found.
    """
    def run(scenario: Any, runtime: str | None = None, seed: int | None = None,
            overrides: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
        from simharness.report.summary import build_summary
        from simharness.run import run_scenario
        from simharness.scenario.loader import load_scenario

        sc = load_scenario(scenario, list(overrides)) if isinstance(scenario, str | Path) else scenario
        return build_summary(run_scenario(sc, runtime, seed))

    return run


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    """A failed comparison of a run's violations (the ``violations`` of a `simharness_run`
    summary) shows them as the console does, causes first, one short line per distinct
    violation (what differs between requests folded), not a truncated list of dicts."""
    import textwrap
    from types import SimpleNamespace

    from simharness.report.console import group_violations, where_text

    for side in (left, right):
        if _is_violations(side) and op == "==" and side:
            found = [SimpleNamespace(check=v["check"], message=v["message"], walk=None,
                                     node=v.get("node"), rank=v.get("rank"), request=v.get("request"))
                     for v in side]
            groups = group_violations(found)
            lines = [f"the run has {len(side)} violation{'s' if len(side) != 1 else ''} "
                     f"({len(groups)} distinct):"]
            for (check, walk, node, rank, text), rids in groups:
                rids = list(dict.fromkeys(r for r in rids if r))
                who = ",".join(rids[:3]) + (f" +{len(rids) - 3}" if len(rids) > 3 else "")
                head = " ".join(x for x in (check, who, where_text(walk, node, rank)) if x)
                lines.append(textwrap.shorten(f"  {head}: {text}", 110, placeholder=" ..."))
            return lines
    return None


def _is_violations(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and all(isinstance(v, dict) and "check" in v and "message" in v for v in value))
