"""Without pyzmq or torch, the zmq backend and confirm fail with one line and exit 2."""

from __future__ import annotations

import importlib.util

import pytest

from simharness.cli import main


@pytest.mark.parametrize("argv", [["run", "--backend", "zmq"], ["confirm"]])
def test_missing_dependency_is_one_line_and_exit_2(monkeypatch, capsys, scenarios_dir, argv):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("zmq", "torch") else real_find_spec(name, *a))
    rc = main([argv[0], str(scenarios_dir / "bagel_cfg.yaml"), *argv[1:]])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and "pip install" in err[0] and "pyzmq" in err[0]


def test_zmq_flags_need_the_zmq_backend(capsys, scenarios_dir):
    rc = main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--device", "cuda"])
    assert rc == 2
    assert "--device only applies to --backend zmq" in capsys.readouterr().err


def _real_backend_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("zmq", "msgpack", "torch"))


needs_real = pytest.mark.skipif(not _real_backend_installed(), reason="needs pyzmq, msgpack and torch")


@needs_real
@pytest.mark.parametrize("argv", [["run", "--backend", "zmq"], ["confirm"]])
def test_cuda_without_a_cuda_device_is_refused_before_any_process_starts(monkeypatch, capsys,
                                                                          scenarios_dir, argv):
    import torch

    import simharness.run

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without CUDA
    monkeypatch.setattr(simharness.run, "simulate", None)  # nothing may run: calling it fails
    rc = main([argv[0], str(scenarios_dir / "bagel_cfg.yaml"), *argv[1:], "--device", "cuda"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == ["error: --device cuda: torch sees no CUDA device here; use --device cpu"]


@needs_real
@pytest.mark.parametrize("key, value", [("faults", "[{kind: crash, rank: 1, at_ms: 5}]"),
                                        ("schedule", "{service_jitter: 0.1}")])
def test_confirm_refuses_perturbations_before_simulating_with_its_own_way_out(
        monkeypatch, capsys, scenarios_dir, key, value):
    import simharness.run

    monkeypatch.setattr(simharness.run, "simulate", None)  # refused before any simulation
    rc = main(["confirm", str(scenarios_dir / "bagel_cfg.yaml"), "--set", f"{key}={value}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert f"{key}: confirm runs the scenario on the zmq backend too" in err[0]
    assert "'simharness run' (sim backend)" in err[0] and "--backend" not in err[0]
