"""The pieces every exported test module is written with (`simharness.mstar.export` for
findings of mstar's graph objects, `simharness.mstar.worker_export` for those of its Worker):
what an export returns, Python literals (strings, sets of strings) and identifiers, long strings
split over lines, the module docstring, and the line ``simharness runtimes`` gives a runtime."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field

#: the width the modules are written to
WIDTH = 100


@dataclass
class Exported:
    """A module written for one case, and what to say about it."""

    text: str
    #: "fail" (a real finding: mstar-ai's code answers wrongly) or "pass"
    expect: str
    #: one line: where the module fails, or what it holds mstar to
    summary: str
    #: anything the user should know (a verdict the recording contradicts, ...)
    notes: list[str] = field(default_factory=list)


def identifier(text: str) -> str:
    """`text` as a Python identifier (letters, digits and ``_``; never a leading digit)."""
    name = re.sub(r"\W", "_", text)
    return name if name and not name[0].isdigit() else f"_{name}"


def quote(text: str) -> str:
    """A string literal, in double quotes as mstar's tests write them."""
    return json.dumps(text)


def set_literal(items: Iterable[str]) -> str:
    """A set of strings as Python code, sorted (``set()`` when empty)."""
    ordered = sorted(items)
    return "{" + ", ".join(quote(i) for i in ordered) + "}" if ordered else "set()"


def literal(text: str, indent: str, lead: str, trail: str = "") -> list[str]:
    """``lead + "text" + trail`` at `indent`, the string split over lines where it is long."""
    one = f"{indent}{lead}{quote(text)}{trail}"
    if len(one) <= WIDTH:
        return [one]
    width = WIDTH - len(indent) - 8
    pieces = textwrap.wrap(text, width, drop_whitespace=False, break_on_hyphens=False)
    opener = lead if lead.endswith("(") else lead + "("
    closer = trail if lead.endswith("(") else ")" + trail
    return [f"{indent}{opener}", *(f"{indent}    {quote(p)}" for p in pieces), f"{indent}{closer}"]


def docstring(first: str, short: str, paras: list[str]) -> str:
    """A module docstring: `first` as its first line (`short` where that is too long), then
    each paragraph wrapped to the width."""
    head = f'"""{first}'
    lines = [head if len(head) <= WIDTH else f'"""{short}', ""]
    for para in paras:
        lines += [*textwrap.wrap(para, WIDTH - 4, break_on_hyphens=False), ""]
    return "\n".join(lines[:-1]) + '\n"""\n'


def describe_runtime(runtime: str) -> str:
    """The runtime's line in ``simharness runtimes``."""
    from simharness.runtime import registry

    target = registry.available().get(runtime)
    return registry.describe(target) if target is not None else runtime


__all__ = ["WIDTH", "Exported", "describe_runtime", "docstring", "identifier", "literal", "quote",
           "set_literal"]
