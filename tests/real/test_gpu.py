"""The zmq backend on CUDA devices (skipped without one)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.zmq, pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_bagel_cfg_on_cuda_maps_ranks_onto_the_devices(no_orphans):
    from real_backends.launcher import RealOptions, run_real
    from simharness.scenario.loader import load_scenario
    from tests.conftest import SCENARIOS
    from tests.real.conftest import TWO_REQUESTS

    sc = load_scenario(SCENARIOS / "bagel_cfg.yaml", [TWO_REQUESTS])
    report = run_real(sc, "mstar-rust-prefix", options=RealOptions(device="cuda", time_scale=0.2))
    n = torch.cuda.device_count()
    procs = report.extra["processes"]
    for r in range(3):
        assert procs[f"rank{r}"]["device"] == f"cuda:{r % n}"
        assert procs[f"rank{r}"]["dtype"] == "bfloat16"
    assert report.result.outcomes == {"r0": "completed", "r1": "completed"}
