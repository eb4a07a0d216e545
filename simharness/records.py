"""Value records: frozen msgspec Structs, and the one dataclass option they lack.

The scenario, the graph IR, the layout and the drivers' summaries are frozen values: made once,
read many times, never written. They are msgspec Structs (as the trace events are), because a
Struct class is defined in C in microseconds while a frozen dataclass compiles five methods
from source, about a millisecond each on the 2-core machine: forty of them were a tenth of a
fresh ``simharness run``. Mutable state (a request on a rank, a batch, a report being filled
in) stays in dataclasses: a Struct's attribute writes are about 2.7x slower, and state records
are written on the hot path.

Struct compares and hashes every field; `compared_without` leaves some out, as
``dataclasses.field(compare=False)`` did: a key path that says where in the YAML a value was
written, a scenario's source file or fingerprint. `shown_without` leaves fields out of the repr.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", bound=type)


def compared_without(*names: str) -> Callable[[T], T]:
    """Class decorator for a frozen Struct: equality and hash over every field but `names`."""

    def decorate(cls: T) -> T:
        fields = cls.__struct_fields__  # type: ignore[attr-defined]
        unknown = [n for n in names if n not in fields]
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}")
        kept = tuple(n for n in fields if n not in names)
        key = operator.attrgetter(*kept) if len(kept) > 1 else (lambda obj: (getattr(obj, kept[0]),))

        def __eq__(self: Any, other: object) -> bool:
            if type(other) is not type(self):
                return NotImplemented
            return bool(key(self) == key(other))

        def __ne__(self: Any, other: object) -> bool:
            if type(other) is not type(self):
                return NotImplemented
            return bool(key(self) != key(other))

        def __hash__(self: Any) -> int:
            return hash(key(self))

        cls.__eq__ = __eq__  # type: ignore[assignment]
        cls.__ne__ = __ne__  # type: ignore[assignment]
        cls.__hash__ = __hash__  # type: ignore[assignment]
        return cls

    return decorate


def shown_without(*names: str) -> Callable[[T], T]:
    """Class decorator for a Struct: a repr of every field but `names` (bulky derived data)."""

    def decorate(cls: T) -> T:
        shown = tuple(n for n in cls.__struct_fields__ if n not in names)  # type: ignore[attr-defined]

        def __repr__(self: Any) -> str:
            inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in shown)
            return f"{type(self).__qualname__}({inner})"

        cls.__repr__ = __repr__  # type: ignore[assignment]
        return cls

    return decorate

