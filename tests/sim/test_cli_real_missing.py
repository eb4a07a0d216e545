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
    assert "--device only apply to --backend zmq" in capsys.readouterr().err
