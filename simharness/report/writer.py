"""Report folders: where `--report [DIR]` writes, and how, without losing anything a user wrote.

A folder is ours when it holds the marker file; a non-empty folder without it is refused. Every
file goes through `simharness.fileio` (a reader sees the old file or the whole new one), and
the marker is written last, so a folder interrupted half-way is not yet claimed as a report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simharness import fileio
from simharness.errors import UsageError

REPORT_MARKER = ".simharness-report"
REPORTS = Path("reports")


def report_dir(target: str, default_name: str) -> Path:
    """The folder to write: `target`, or ``reports/<default_name>``; refused if it is not ours."""
    out = Path(target) if target else REPORTS / default_name
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"--report {out}: exists and is not a directory")
        if any(out.iterdir()) and not (out / REPORT_MARKER).exists():
            raise UsageError(f"--report {out}: directory is not empty and was not written by "
                             f"simharness; choose another directory")
    return out


def write_report(out: Path, files: dict[str, str | bytes | Any]) -> list[str]:
    """Write `files` (name -> text, bytes, or a callable taking the path) into `out`; marker last.

    Returns the names written, in order.
    """
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for name, content in files.items():
        path = out / name
        if callable(content):
            content(path)
        elif isinstance(content, bytes):
            fileio.write_bytes(path, content)
        else:
            fileio.write_text(path, content)
        names.append(name)
    fileio.write_text(out / REPORT_MARKER, "written by simharness; safe to replace\n")
    return names


def json_text(obj: Any) -> str:
    return json.dumps(obj, indent=2) + "\n"
