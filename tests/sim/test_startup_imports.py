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
