"""A process that runs the real stack many times (a campaign, the fidelity suite) keeps no file
descriptor per run: mstar's workers each open an eventfd that mstar never closes (one worker
per process there), and a 10,000-scenario run once ran out of them."""

from __future__ import annotations

import os

from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS
from tests.helpers import needs_mstar_stack

pytestmark = needs_mstar_stack()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_runs_of_the_stack_keep_no_file_descriptors():
    sc = load_scenario(SCENARIOS / "bagel_cfg.yaml")
    run_scenario(sc, "mstar")  # imports, caches, mstar's own singletons
    before = _open_fds()
    for _ in range(4):
        run_scenario(sc, "mstar")
    assert _open_fds() == before
