"""Start-up stays cheap: the CLI and the ``run`` path import only what they use.

A fresh ``simharness run`` spends most of its time importing, so heavy optional libraries load
where they are needed (fuzzing, sweeps, plots, the zmq backend), never at import. Each check runs
in a fresh interpreter, since this test process has long since imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: what nothing on the CLI's import path may load
NEVER_AT_IMPORT = ("hypothesis", "dask", "distributed", "torch", "zmq", "matplotlib", "msgpack",
                   "real_backends", "mstar")
#: what a run of a reference profile on a plain layout does not need (no replica to choose, no
#: jitter or dynamic loop to draw for, no hang to explain)
NOT_ON_THE_RUN_PATH = (*NEVER_AT_IMPORT, "numpy", "networkx")


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_loads_no_heavy_library():
    loaded = _loaded_after("import simharness.cli")
    assert sorted(loaded & set(NEVER_AT_IMPORT)) == []


def test_a_run_of_bagel_cfg_loads_only_what_it_uses():
    loaded = _loaded_after(
        "import contextlib, io\n"
        "from simharness.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['run', 'scenarios/bagel_cfg.yaml']) == 0\n")
    assert sorted(loaded & set(NOT_ON_THE_RUN_PATH)) == []


def test_the_probe_sees_a_heavy_import():
    """The check above can fail: a module that does import numpy is seen."""
    assert "numpy" in _loaded_after("import simharness.rng as r\nr.RandomStreams(0).stream('x')")


def _run_in_fresh_interpreter(code: str, **env: str) -> str:
    import os

    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={**os.environ, **env})
    return out.stdout.strip().splitlines()[-1]


def test_a_run_does_not_load_importlib_metadata_and_simpy_still_knows_its_version():
    """simpy's own ``__init__`` looks its version up through importlib.metadata, which loads
    email, zipfile and socket (about a tenth of a fresh run); `simharness.engine.simpy_import`
    answers that lookup with a stand-in. After a run neither is loaded, simpy's version reads
    true on first access, and importlib.metadata, imported later, is the real module."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from simharness.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['run', 'scenarios/bagel_cfg.yaml']) == 0\n"
        "loaded = sorted(m for m in ('importlib.metadata', 'email', 'zipfile') if m in sys.modules)\n"
        "import simpy\n"
        "import importlib.metadata as md\n"
        "print(json.dumps([loaded, simpy.__version__, md.version('simpy'),\n"
        "                  hasattr(md, 'distribution'), simpy.Environment.__name__]))\n")
    loaded, seen, real, whole, env = json.loads(_run_in_fresh_interpreter(probe))
    assert loaded == []
    assert seen == real and whole and env == "Environment"


def test_a_simpy_that_asks_the_stand_in_for_more_is_imported_plainly(tmp_path):
    """If a newer simpy asked importlib.metadata for something the stand-in lacks, the attempt
    is undone and simpy imported plainly: slower, never broken. A stand-in package named simpy
    that asks for `distribution` shows it (and fails this test if the fallback is taken away)."""
    pkg = tmp_path / "simpy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import importlib.metadata\n"
        "KIND = type(importlib.metadata.distribution).__name__\n")
    probe = ("import json, sys\n"
             "assert 'importlib.metadata' not in sys.modules\n"
             "import simharness.engine  # imports simpy through the stand-in\n"
             "import simpy\n"
             "print(json.dumps([simpy.KIND, simpy.__file__]))\n")
    kind, where = json.loads(_run_in_fresh_interpreter(probe, PYTHONPATH=str(tmp_path)))
    assert kind == "function" and where == str(pkg / "__init__.py")
