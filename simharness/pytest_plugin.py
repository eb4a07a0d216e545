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
  (the ``--json`` object of ``simharness run``).

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
    _report: Any = None

    def collect(self):
        yield ScenarioItem.from_parent(self, name="checks", part="checks")
        if self.raw.get("expect"):
            yield ScenarioItem.from_parent(self, name="expect", part="expect")

    def report(self) -> Any:
        """One run per file, shared by its items."""
        if self._report is None:
            from simharness.run import run_scenario
            from simharness.scenario.loader import load_scenario

            self._report = run_scenario(load_scenario(self.path, raw=self.raw))
        return self._report


class ScenarioItem(pytest.Item):
    parent: ScenarioFile

    def __init__(self, *, part: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.part = part

    def runtest(self) -> None:
        from simharness.errors import ScenarioError, UsageError

        try:
            report = self.parent.report()
        except (ScenarioError, UsageError) as exc:
            raise SimharnessFailure(f"error: {exc}") from None
        mine = [v for v in report.violations if (v.check == "expect") == (self.part == "expect")]
        if mine:
            raise SimharnessFailure(_console(report, ["simharness", "run", str(self.path)]))

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
            r = replay(self.path, raw=self.parent.raw)
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
