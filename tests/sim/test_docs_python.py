"""The examples of docs/python.md run as written, in order, in one namespace (a reader runs
them one after the other), and the package's top-level API is what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def test_the_page_has_its_examples():
    assert len(_blocks()) >= 3


def test_every_example_on_the_page_runs(capsys):
    namespace: dict = {}
    for i, block in enumerate(_blocks()):
        exec(compile(block, f"{PAGE.name}[block {i}]", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "loop_exit" in printed and "forwards w/A" in printed


def test_load_scenario_names_the_key_of_bad_data():
    import simharness
    from simharness.errors import ScenarioError

    with pytest.raises(ScenarioError, match=r"placement"):
        simharness.load_scenario({"name": "x", "graph": {"walks": {"w": {"node": "a"}}}})


def test_import_simharness_loads_no_engine():
    import subprocess
    import sys

    code = "import sys, simharness; print(sorted(m for m in sys.modules if m.startswith('simharness')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PAGE.parents[1]).stdout
    assert out.strip() == "['simharness']"
