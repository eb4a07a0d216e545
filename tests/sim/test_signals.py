"""Every command that can run long ends on SIGINT with 130 and on SIGTERM with 143: one line
saying so on stderr, what it had finished said before it, no traceback and no "internal error",
and no file left half-written. Each command runs in a real subprocess and gets a real signal
while it works (docs/reliability.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import SCENARIOS
from tests.helpers import needs_mstar

#: a bagel_cfg run far longer than any test waits for (tens of seconds of simulation)
LONG = ["--set", "workload[0].count=20000", "--allow-large"]
#: a long run that stays within the default size limits (sweep and replay refuse --allow-large)
LONGISH = ["--set", "workload[0].count=1500"]

SIGNALS = [pytest.param(signal.SIGINT, 130, id="SIGINT"), pytest.param(signal.SIGTERM, 143, id="SIGTERM")]


def _replay_cases(tmp: Path) -> list[str]:
    """Three fixed corpus cases, each a bagel_cfg run of a few seconds."""
    raw = yaml.safe_load((SCENARIOS / "bagel_cfg.yaml").read_text())
    raw["workload"][0]["count"] = 1500
    raw["corpus"] = {"signature": "forwards:extra", "check": "forwards", "runtime": "mstar-python",
                     "status": "fixed"}
    names = []
    for i in range(3):
        (tmp / f"case{i}.yaml").write_text(yaml.safe_dump(raw))
        names.append(f"case{i}.yaml")
    return names


COMMANDS = {
    "run": lambda tmp: ["run", str(SCENARIOS / "bagel_cfg.yaml"), *LONG],
    "run --json": lambda tmp: ["run", str(SCENARIOS / "bagel_cfg.yaml"), "--json", *LONG],
    "compare": lambda tmp: ["compare", str(SCENARIOS / "bagel_cfg.yaml"), "--runtime", "mstar-python",
                            "--runtime", "mstar-rust", *LONG],
    "sweep": lambda tmp: ["sweep", str(SCENARIOS / "bagel_cfg.yaml"), "--seeds", "0..30", *LONGISH],
    "replay": lambda tmp: ["replay", *_replay_cases(tmp)],
    "fuzz": lambda tmp: ["fuzz", "--runtime", "mstar-rust-prefix", "--time", "120", "--corpus", "corpus"],
}


def _handler_installed(pid: int) -> bool:
    """Whether the process catches SIGTERM: Python does not by default, `interrupts` does, so
    this tells that the command's own handlers are in place (Linux: /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid` so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _interrupt(tmp_path: Path, argv: list[str], sig: int, after: float = 0.5) -> subprocess.CompletedProcess:
    """Run ``simharness ARGV`` in `tmp_path`, send `sig` `after` CPU seconds into its work, wait."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to tell when the command's handlers are installed")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "simharness.cli", *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _handler_installed(proc.pid):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never installed its signal handlers"
            time.sleep(0.02)
        # `after` seconds of the command's own CPU time, not of the clock: on a loaded machine
        # the same wall time may not yet reach its work
        start = _cpu_seconds(proc.pid)
        while _cpu_seconds(proc.pid) - start < after:
            assert proc.poll() is None, f"the command ended before the signal: {proc.communicate()}"
            assert time.monotonic() < deadline + 60, "the command never got to its work"
            time.sleep(0.02)
        assert proc.poll() is None, f"the command ended before the signal: {proc.communicate()}"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _stopped_cleanly(done: subprocess.CompletedProcess, sig: int, code: int, tmp_path: Path) -> None:
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert f"interrupted by {signal.Signals(sig).name}" in done.stderr.splitlines()[-1], done.stderr
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or ".tmp." in p.name]
    assert not leftovers, leftovers  # atomic writes leave no temporary file behind


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", SIGNALS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_signal_stops_the_command_cleanly(tmp_path, command, sig, code):
    done = _interrupt(tmp_path, COMMANDS[command](tmp_path), sig, after=1.5 if command == "fuzz" else 0.5)
    _stopped_cleanly(done, sig, code, tmp_path)
    if command.startswith("run"):
        assert "the sim run was stopped at t=" in done.stderr and "requests completed" in done.stderr
        assert done.stdout == ""  # a simulation cut short is no verdict: no summary, no table
    if command == "sweep":
        assert "the sweep was stopped after " in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", SIGNALS)
def test_a_signal_keeps_the_replays_that_finished(tmp_path, sig, code):
    argv = ["replay", *_replay_cases(tmp_path)]
    # Wait for the first case to be done (its line on stdout), then stop the second.
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "simharness.cli", *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert first.startswith("ok ") and "case0.yaml" in first, (first, err)
    _stopped_cleanly(subprocess.CompletedProcess(argv, proc.returncode, first + out, err), sig, code,
                     tmp_path)
    assert "case2.yaml" not in first + out


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", SIGNALS)
@pytest.mark.parametrize("_", [pytest.param(None, marks=needs_mstar(), id="import-mstar")])
def test_a_signal_stops_import_mstar_and_writes_nothing(tmp_path, sig, code, _):
    # a short command: on a loaded machine 0.3 s of its CPU time was once past its end
    done = _interrupt(tmp_path, ["import-mstar", "bagel_cfg_parallel", "-o", "out.yaml"], sig, after=0.1)
    _stopped_cleanly(done, sig, code, tmp_path)
    assert not (tmp_path / "out.yaml").exists()


@pytest.mark.slow
@pytest.mark.zmq
@pytest.mark.parametrize("sig,code", SIGNALS)
def test_a_signal_stops_confirm_and_its_processes(tmp_path, sig, code):
    pytest.importorskip("zmq")
    pytest.importorskip("torch")
    done = _interrupt(tmp_path, ["confirm", str(SCENARIOS / "bagel_cfg.yaml"),
                                 "--set", "workload[0].count=200"], sig, after=3.0)
    _stopped_cleanly(done, sig, code, tmp_path)
