"""Report folders: where `--report [DIR]` writes, and how, without losing anything a user wrote.

A folder is ours when it holds the marker file; a non-empty folder without it is refused. Every
file goes through `simharness.fileio` (a reader sees the old file or the whole new one), and
the marker is written last, so a folder interrupted half-way is not yet claimed as a report.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from simharness import fileio
from simharness.errors import UsageError

REPORT_MARKER = ".simharness-report"
REPORTS = Path("reports")
#: every file a report folder may hold (run, compare, confirm, fuzz and replay reports): a folder
#: with nothing else in it is one an interrupted report left
REPORT_FILES = ("summary.json", "trace.jsonl", "trace.perfetto.json", "report.html",
                "compare.json", "confirm.json", "fuzz.json", "replay.json")


def report_dir(target: str, default_name: str, names: Iterable[str] = REPORT_FILES) -> Path:
    """The folder to write: `target`, or ``reports/<default_name>``; refused if it is not ours.

    `default_name` is the user's text (a scenario's name): it becomes one plain file name
    (`fileio.safe_name`), so a name like ``../../x`` never writes outside ``reports/``. A folder
    without the marker is still ours when it holds nothing but the report's own files `names`
    (and temporary files of an interrupted write): a report stopped half way is replaced by the
    next one instead of blocking it."""
    out = Path(target) if target else REPORTS / fileio.safe_name(default_name)
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"--report {out}: exists and is not a directory")
        if not (out / REPORT_MARKER).exists():
            known = {REPORT_MARKER, *names}
            if any(p.name not in known and not fileio.is_temporary(p.name) for p in out.iterdir()):
                raise UsageError(f"--report {out}: directory is not empty and was not written by "
                                 f"simharness; choose another directory")
    return out


def write_report(out: Path, files: dict[str, str | bytes | Any]) -> list[str]:
    """Write `files` (name -> text, bytes, or a callable taking the path) into `out`; marker last.

    Returns the names written, in order.
    """
    out.mkdir(parents=True, exist_ok=True)
    # The marker leaves first and comes back last: a marked folder always holds a whole report.
    (out / REPORT_MARKER).unlink(missing_ok=True)
    names: list[str] = []
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
