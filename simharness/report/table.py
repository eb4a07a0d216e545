"""Console tables and colour, by rich: columns aligned by the library, colour only where wanted.

Colour is on only when the stream is a terminal and ``NO_COLOR`` is unset (rich reads it, and
``TERM=dumb``); a pipe, a file, a CI log or a test's captured output get plain text, which is what
the README quotes. Lines never end in spaces. rich is imported when a table is printed, not when
the CLI starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

#: styles by meaning, so every table colours the same things the same way
STYLES = {"bad": "bold red", "good": "bold green", "warn": "yellow", "head": "bold", "dim": "dim"}


def _console(out: TextIO) -> Any:
    from rich.console import Console

    # A wide virtual width: a table is as wide as its columns, and a terminal narrower than that
    # wraps lines as it always did rather than rich squeezing the columns.
    return Console(file=out, width=10_000, highlight=False, emoji=False, markup=False,
                   soft_wrap=True)


def cell(text: Any, style: str | None = None) -> Any:
    """A cell with a meaning (`STYLES` key) or none."""
    from rich.text import Text

    return Text(str(text), style=STYLES.get(style or "", "") or "")


def render_table(out: TextIO, headers: Sequence[str], rows: Sequence[Sequence[Any]], *,
                 align: Sequence[str] | None = None, gap: int = 2) -> None:
    """Write an aligned table: `align` per column ("left" or "right"), `gap` spaces between."""
    from rich.table import Table

    t = Table(box=None, show_header=True, header_style=STYLES["head"], pad_edge=False,
              padding=(0, gap, 0, 0), show_edge=False, collapse_padding=True)
    for i, h in enumerate(headers):
        t.add_column(h, justify=(align[i] if align else "left"), no_wrap=True)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(*[c if not isinstance(c, str | int | float) else str(c) for c in r])
    write_rich(out, t)


def write_rich(out: TextIO, renderable: Any) -> None:
    console = _console(out)
    with console.capture() as cap:
        console.print(renderable)
    out.write("\n".join(line.rstrip() for line in cap.get().rstrip("\n").split("\n")) + "\n")


def line(out: TextIO, text: str, style: str | None = None) -> None:
    """One line of text, in colour (`STYLES` key) where colour is on."""
    if style is None:
        out.write(text + "\n")
        return
    write_rich(out, cell(text, style))
