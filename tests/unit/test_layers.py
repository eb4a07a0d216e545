"""The three layers import in one direction only.

The runtime model (pure state machines) never imports a driver or the checks; the driver core
(`simharness.drive`) and the simpy driver never import the checks; the checks import neither the
runtime nor a driver, only events and scenario facts; nothing in simharness imports pyzmq or torch.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "simharness"

RULES = {
    "runtime": ("simharness.engine", "simharness.drive", "simharness.checks", "simharness.report",
                "simharness.cli", "simharness.commands", "simharness.mstar"),
    "graph": ("simharness.engine", "simharness.checks", "simharness.runtime", "simharness.placement",
              "simharness.scenario", "simharness.mstar"),
    "placement": ("simharness.engine", "simharness.checks", "simharness.runtime", "simharness.mstar"),
    # the loader reaches mstar's model code by name (scenario.sources), never by import
    "scenario": ("simharness.engine", "simharness.checks", "simharness.runtime", "simharness.mstar",
                 "simharness.placement"),
    "engine": ("simharness.checks", "simharness.report", "simharness.cli", "simharness.commands"),
    # the driver core: shared by the simpy engine and the real processes, above the runtime model
    "drive": ("simharness.engine", "simharness.checks", "simharness.report", "simharness.cli",
              "simharness.commands"),
    "checks": ("simharness.engine", "simharness.runtime", "simharness.drive", "simharness.mstar"),
    # the report draws what a run recorded; each command builds its own page from its parts
    "report": ("simharness.commands", "simharness.cli", "simharness.compare", "simharness.sweep"),
    "faults": ("simharness.engine", "simharness.runtime", "simharness.scenario"),
    # the command line builds its parser from the commands, never the other way round
    "commands": ("simharness.cli",),
}
#: the bottom layer: shared vocabulary, which imports nothing of simharness but itself
VOCABULARY = ("errors", "records", "rng", "ridmap", "fileio", "interrupts", "signals", "events",
              "fields", "wording")
NEVER = ("zmq", "torch")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module:
            out.add(n.module)
    return out


def test_imports_point_one_way():
    bad = []
    for layer, forbidden in RULES.items():
        for f in (PKG / layer).rglob("*.py"):
            for mod in _imports(f):
                if mod.startswith(forbidden):
                    bad.append(f"{f.relative_to(PKG)} imports {mod}")
    assert bad == []


def test_the_vocabulary_imports_only_itself():
    allowed = {f"simharness.{m}" for m in VOCABULARY} | {"simharness"}
    bad = [f"{m}.py imports {mod}" for m in VOCABULARY for mod in _imports(PKG / f"{m}.py")
           if mod.startswith("simharness") and mod not in allowed]
    assert bad == []


def test_only_the_mstar_wing_imports_mstar():
    """mstar-ai is imported by simharness/mstar/ alone (Hypothesis' extra/ rule), and that wing
    only by the command line, lazily: the rest reaches it by name (the runtime registry, the
    scenario's graph sources)."""
    bad = []
    for f in PKG.rglob("*.py"):
        inside = f.is_relative_to(PKG / "mstar")
        for m, at_top in _imports_placed(f):
            if m.split(".")[0] == "mstar" and not inside:
                bad.append(f"{f.relative_to(PKG)} imports {m}")
            if m.startswith("simharness.mstar") and not inside and (
                    at_top or f.parent.name not in ("simharness", "commands")):
                bad.append(f"{f.relative_to(PKG)} imports {m}")
    assert bad == []


def _imports_placed(f: Path) -> list[tuple[str, bool]]:
    """(module, imported at the module's top level) for every import statement of `f`."""
    tree = ast.parse(f.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for n in ast.walk(tree):
        mods = ([a.name for a in n.names] if isinstance(n, ast.Import)
                else [n.module] if isinstance(n, ast.ImportFrom) and n.module else [])
        out += [(m, id(n) in top) for m in mods]
    return out


def test_no_heavy_imports_in_the_library():
    """pyzmq and torch stay out of simharness, but for the mstar wing: it drives mstar-ai's own
    code, which is built on torch (its tensors cross the wing's fake engine and tensor wire)."""
    bad = [f"{f.relative_to(PKG)}: {m}" for f in PKG.rglob("*.py") for m in _imports(f)
           if m.split(".")[0] in NEVER and not f.is_relative_to(PKG / "mstar")]
    assert bad == []


def test_every_module_has_a_docstring():
    missing = [str(f.relative_to(PKG)) for f in PKG.rglob("*.py")
               if ast.get_docstring(ast.parse(f.read_text())) is None]
    assert missing == []


REAL = PKG.parent / "real_backends"


def test_real_backends_are_imported_lazily_and_only_by_the_cli():
    """pyzmq and torch load only for --backend zmq and confirm: no module of simharness imports
    real_backends at module level, and only the command line (cli.py and the commands) imports
    it at all."""
    bad = []
    for f in PKG.rglob("*.py"):
        cli = f == PKG / "cli.py" or f.is_relative_to(PKG / "commands")
        bad += [f"{f.relative_to(PKG)} imports {m}" for m, at_top in _imports_placed(f)
                if m.split(".")[0] == "real_backends" and (at_top or not cli)]
    assert bad == []


def test_every_real_backend_module_has_a_docstring():
    missing = [f.name for f in REAL.rglob("*.py") if ast.get_docstring(ast.parse(f.read_text())) is None]
    assert missing == []
