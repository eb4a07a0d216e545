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


def test_a_device_is_written_in_place_not_replaced(tmp_path):
    # Renaming over /dev/null would replace the device node (as root); it must be written into.
    fileio.write_text("/dev/null", "anything")
    import os
    import stat

    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError):
        fileio.write_text(tmp_path, "x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="no /dev/full here")
def test_a_full_disk_is_an_os_error():
    with pytest.raises(OSError):
        fileio.write_text("/dev/full", "x" * 100_000)


@pytest.mark.parametrize("text, want", [
    ("../../../x", "_.._.._x"), ("/etc/passwd", "_etc_passwd"), ("..", "_"), ("", "_"),
    ("bagel_cfg-mstar-python-seed0", "bagel_cfg-mstar-python-seed0"), ("a b\nc", "a_b_c"),
    ("mod:attr", "mod_attr"),
])
def test_safe_name_is_one_plain_file_name(text, want):
    got = fileio.safe_name(text)
    assert got == want and "/" not in got and not got.startswith(".")


def test_temporary_names_are_recognised(tmp_path):
    p = tmp_path / "a.txt"
    with pytest.raises(RuntimeError), fileio.atomic_open(p) as fh:
        names = [x.name for x in tmp_path.iterdir()]
        fh.write("x")
        raise RuntimeError
    assert len(names) == 1 and fileio.is_temporary(names[0]) and not fileio.is_temporary("a.txt")
