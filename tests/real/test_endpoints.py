"""`--endpoints tcp://HOST:PORT`: what is refused up front, as one line, before any process starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from real_backends.transport import MAX_PORT, Endpoints
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spec", ["tcp://127.0.0.1:1²", "tcp://127.0.0.1:١٩٠٠٠", "tcp://127.0.0.1:",
                                  "tcp://:19000", "tcp://127.0.0.1:0", f"tcp://127.0.0.1:{MAX_PORT + 1}",
                                  "tcp://127.0.0.1:-5", "tcp://127.0.0.1:19000x"])
def test_a_port_that_is_not_a_port_is_refused(spec):
    with pytest.raises(ValueError, match=r"expected tcp://HOST:PORT, PORT a number from 1 to 65535"):
        Endpoints(spec)


def test_every_interface_cannot_be_connected_to():
    with pytest.raises(ValueError, match=r"\* \(every interface\) cannot be connected to"):
        Endpoints("tcp://*:19000")


def test_ports_past_the_last_are_refused_with_the_highest_port_that_fits():
    eps = [CLIENT_ID, CONDUCTOR_ID, *range(4096)]
    ok = Endpoints(f"tcp://127.0.0.1:{MAX_PORT - 10 - 4095}")
    ok.check_ports(eps)
    assert ok.address(4095) == f"tcp://127.0.0.1:{MAX_PORT}"
    over = Endpoints(f"tcp://127.0.0.1:{MAX_PORT - 10 - 4095 + 1}")
    with pytest.raises(ValueError, match=rf"past {MAX_PORT}; choose a PORT of at most {MAX_PORT - 4105}"):
        over.check_ports(eps)
    Endpoints("ipc", run_dir="-").check_ports(eps)  # no ports, nothing to refuse


def test_the_cli_says_so_in_one_line_and_exits_2(capsys):
    from simharness.cli import main

    code = main(["run", str(ROOT / "scenarios" / "bagel_cfg.yaml"), "--backend", "zmq",
                 "--endpoints", f"tcp://127.0.0.1:{MAX_PORT - 5}"])
    err = capsys.readouterr().err
    assert code == 2 and "choose a PORT of at most" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
