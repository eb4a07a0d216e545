"""Atomic writes: the old file survives a failed write, and no temporary file is left."""

from __future__ import annotations

import pytest

from simharness import fileio


def test_write_replaces_whole_file(tmp_path):
    p = tmp_path / "a.txt"
    fileio.write_text(p, "one")
    fileio.write_text(p, "two")
    assert p.read_text() == "two"
    assert [x.name for x in tmp_path.iterdir()] == ["a.txt"]


def test_failed_write_keeps_old_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError), fileio.atomic_open(p) as fh:
        fh.write("half of the new")
        raise RuntimeError("interrupted")
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["a.txt"]


def test_bytes(tmp_path):
    p = tmp_path / "b.bin"
    fileio.write_bytes(p, b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"


def test_new_file_gets_the_umask_mode_and_a_replaced_file_keeps_its_mode(tmp_path):
    import os
    old = os.umask(0o022)
    try:
        p = tmp_path / "new.txt"
        fileio.write_text(p, "x")
        assert p.stat().st_mode & 0o777 == 0o644
        p.chmod(0o600)
        fileio.write_text(p, "y")
        assert p.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
