"""Fixtures for the real-backend tests: skip without pyzmq/torch, count child processes."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

if importlib.util.find_spec("zmq") is None or importlib.util.find_spec("torch") is None:
    # pip install -e '.[real]' brings both; without them these tests are not collected.
    collect_ignore_glob = ["test_*.py"]

#: Small and fast: two requests at once, 1/20 of the scenario's time; enough for the stray pass.
TWO_REQUESTS = "workload=[{request: t2i, count: 2, concurrency: 2}]"
FAST = 0.05


def child_pids(parent: int | None = None) -> list[int]:
    """Live processes whose parent is `parent` (this process by default), read from /proc."""
    parent = os.getpid() if parent is None else parent
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may hold spaces, so split after the last ')'
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.fixture
def no_orphans():
    """Assert that a test leaves no child process behind."""
    before = set(child_pids())
    yield
    left = set(child_pids()) - before
    assert not left, f"child processes left behind: {sorted(left)}"
