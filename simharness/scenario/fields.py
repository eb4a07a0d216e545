"""Typed readers for plain YAML data, each raising `ScenarioError` with the key path.

These are the small vocabulary the loader is written in: `mapping` checks a dict and its keys,
`integer` / `number` / `string` / `boolean` / `name_list` check one value, `size` reads a byte size
such as ``512KiB``. A reader never guesses: a string is not a number, a bool is not an integer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from simharness.errors import ScenarioError

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def mapping(
    value: Any, path: str, allowed: Iterable[str], required: Iterable[str] = ()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(path, f"expected a mapping, got {describe(value)}")
    allowed = list(allowed)
    for key in value:
        if not isinstance(key, str):
            raise ScenarioError(path, f"keys must be strings, got {describe(key)}")
        if key not in allowed:
            raise ScenarioError(
                join(path, key), f"unknown key (expected one of: {', '.join(allowed)})"
            )
    for key in required:
        if key not in value:
            raise ScenarioError(join(path, key), "missing required key")
    return value


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def sequence(value: Any, path: str, *, non_empty: bool = False) -> list[Any]:
    if not isinstance(value, list):
        raise ScenarioError(path, f"expected a list, got {describe(value)}")
    if non_empty and not value:
        raise ScenarioError(path, "expected a non-empty list")
    return value


def integer(value: Any, path: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(path, f"expected an integer, got {describe(value)}")
    if minimum is not None and value < minimum:
        raise ScenarioError(path, f"expected an integer >= {minimum}, got {value}")
    return value


def number(value: Any, path: str, *, minimum: float | None = None, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(path, f"expected a number, got {describe(value)}")
    if positive and value <= 0:
        raise ScenarioError(path, f"expected a number > 0, got {value}")
    if minimum is not None and value < minimum:
        raise ScenarioError(path, f"expected a number >= {minimum}, got {value}")
    return float(value)


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(path, f"expected true or false, got {describe(value)}")
    return value


def string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ScenarioError(path, f"expected a string, got {describe(value)}")
    return value


def name(value: Any, path: str, what: str = "a name") -> str:
    """A non-empty identifier-like string (node, walk, signal, loop and request names)."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise ScenarioError(path, f"expected {what} (a non-empty string without spaces), "
                                  f"got {describe(value)}")
    return value


def name_list(value: Any, path: str, what: str = "names", *, non_empty: bool = False) -> tuple[str, ...]:
    items = sequence(value, path, non_empty=non_empty)
    out: list[str] = []
    for i, item in enumerate(items):
        n = name(item, join(path, i), what)
        if n in out:
            raise ScenarioError(join(path, i), f"{n!r} is listed twice")
        out.append(n)
    return tuple(out)


def size(value: Any, path: str) -> int:
    """Bytes: an integer, or a string like ``512KiB``, ``1.5 MiB``, ``4KB``, ``100B``."""
    if isinstance(value, bool):
        raise ScenarioError(path, f"expected a size such as 512KiB, got {describe(value)}")
    if isinstance(value, int):
        if value < 0:
            raise ScenarioError(path, f"expected a size >= 0, got {value}")
        return value
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m:
            unit = (m.group(2) or "B").lower()
            if unit in _SIZE_UNITS:
                return int(float(m.group(1)) * _SIZE_UNITS[unit])
    raise ScenarioError(path, f"expected a size such as 512KiB or 4096, got {describe(value)}")
