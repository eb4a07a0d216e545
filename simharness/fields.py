"""Typed readers for plain YAML data, each raising `ScenarioError` with the key path.

These are the small vocabulary the loader is written in: `mapping` checks a dict and its keys,
`integer` / `number` / `string` / `boolean` / `name_list` check one value, `size` reads a byte size
such as ``512KiB``. A reader never guesses: a string is not a number, a bool is not an integer.
Every number is finite and inside a range: NaN, infinity and absurd magnitudes are refused here,
with the unit in the message, rather than surfacing later as a "runtime bug".
`default` reads a default from the model's own records, so no default is written twice.
"""

from __future__ import annotations

import datetime
import functools
import math
import re
import sys
from collections.abc import Iterable
from typing import Any

import msgspec

from simharness.errors import ScenarioError
from simharness.wording import hint

_SIZE_RE = re.compile(r"^\s*(\d{1,20}(?:\.\d{1,20})?)\s*([KMGT]?i?B)?\s*$", re.IGNORECASE)
#: No byte size in a scenario is larger (a payload, a KV cache per token): 1 TiB.
MAX_SIZE = 1024**4
#: Longest time a scenario may name (a request timeout, a fault's moment): about 11 days.
MAX_SECONDS = 1_000_000.0
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
    if isinstance(value, int):
        return f"the number {_short(value)}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}" if len(value) <= 80 else f"a string of {len(value)} characters"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, datetime.date):  # YAML reads an unquoted 2020-01-01 as a date
        return f"the date {value.isoformat()} (quote it for a string)"
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
                join(path, key), f"unknown key{hint(key, allowed)} (expected one of: {', '.join(allowed)})"
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


def integer(value: Any, path: str, *, minimum: int | None = None, maximum: int | None = None,
            unit: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(path, f"expected an integer, got {describe(value)}")
    if minimum is not None and value < minimum:
        raise ScenarioError(path, f"expected an integer >= {minimum}{_unit(unit)}, got {_short(value)}")
    if maximum is not None and value > maximum:
        raise ScenarioError(path, f"expected an integer <= {maximum}{_unit(unit)}, got {_short(value)}")
    return value


def number(value: Any, path: str, *, minimum: float | None = None, positive: bool = False,
           maximum: float | None = None, below: float | None = None, unit: str = "") -> float:
    """A finite int or float; `positive` means > 0, `below` an exclusive upper bound."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(path, f"expected a number{_unit(unit)}, got {describe(value)}")
    try:
        x = float(value)
    except OverflowError:
        raise ScenarioError(path, f"expected a finite number{_unit(unit)}, got an integer of "
                                  f"about {_digits(int(value))} digits") from None
    if not math.isfinite(x):
        raise ScenarioError(path, f"expected a finite number{_unit(unit)}, got {value}")
    if positive and x <= 0:
        raise ScenarioError(path, f"expected a number > 0{_unit(unit)}, got {x:g}")
    if minimum is not None and x < minimum:
        raise ScenarioError(path, f"expected a number >= {minimum:g}{_unit(unit)}, got {x:g}")
    if maximum is not None and x > maximum:
        raise ScenarioError(path, f"expected a number <= {maximum:g}{_unit(unit)}, got {x:g}")
    if below is not None and x >= below:
        raise ScenarioError(path, f"expected a number below {below:g}{_unit(unit)}, got {x:g}")
    return x


def _unit(unit: str) -> str:
    return f" ({unit})" if unit else ""


def _short(value: int) -> str:
    """An integer for a message: a 5,000-digit one is not printed in full."""
    # str() of an int over 4,300 digits raises; the bit length gives the size without it.
    return str(value) if abs(value) < 10**30 else f"an integer of about {_digits(value)} digits"


def _digits(value: int) -> int:
    return int(abs(value).bit_length() * 0.30103) + 1


def default(cls: type, name: str) -> Any:
    """The default of field `name` of record `cls`: the model's default is the only one."""
    fld = _fields_of(cls).get(name)
    if fld is not None:
        if fld.default is not msgspec.NODEFAULT:
            return fld.default
        if fld.default_factory is not msgspec.NODEFAULT:
            return fld.default_factory()
    raise LookupError(f"{cls.__name__}.{name} has no default")


@functools.cache
def _fields_of(cls: type) -> dict[str, msgspec.structs.FieldInfo]:
    """`cls`'s fields by name, read once per record class: ``msgspec.structs.fields`` evaluates
    the class's annotations at every call (about 0.2 ms), and a scenario asks for a dozen
    defaults, which was 7% of a fuzz example."""
    return {fld.name: fld for fld in msgspec.structs.fields(cls)}


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(path, f"expected true or false, got {describe(value)}")
    return value


def string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ScenarioError(path, f"expected a string, got {describe(value)}")
    return value


#: any whitespace character (``str.isspace``'s set: the regex engine uses the same test)
_SPACE = re.compile(r"\s")


def name(value: Any, path: str, what: str = "a name") -> str:
    """A non-empty identifier-like string (node, walk, signal, loop and request names),
    interned: each name read in several places of a scenario (a node named by its section, by
    the edges into it and by its node group) is then one object, so that the simulation's many
    lookups by name find it by identity, without comparing the text."""
    if not isinstance(value, str) or not value or _SPACE.search(value):
        raise ScenarioError(path, f"expected {what} (a non-empty string without spaces), "
                                  f"got {describe(value)}")
    return sys.intern(value)


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
    """Bytes: an integer, or a string like ``512KiB``, ``1.5 MiB``, ``4KB``, ``100B``; at most 1 TiB."""
    if isinstance(value, bool):
        raise ScenarioError(path, f"expected a size such as 512KiB, got {describe(value)}")
    n: int | None = None
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m:
            unit = (m.group(2) or "B").lower()
            if unit in _SIZE_UNITS:
                n = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if n is None:
        shown = describe(value) if not isinstance(value, str) or len(value) < 60 else "a long string"
        raise ScenarioError(path, f"expected a size such as 512KiB or 4096, got {shown}")
    if n < 0:
        raise ScenarioError(path, f"expected a size >= 0 bytes, got {n}")
    if n > MAX_SIZE:
        raise ScenarioError(path, f"expected a size of at most 1TiB, got {_short(n)} bytes")
    return n


def any_keys(value: Any) -> list[str]:
    """The keys of `value` as the allowed keys of a mapping whose keys are free names."""
    return list(value) if isinstance(value, dict) else []
