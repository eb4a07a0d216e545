"""Per-request tables that cost a few bytes per request, for what a finished request leaves.

A soak finishes hundreds of thousands of requests. A dict keyed by request name costs about a
hundred bytes per entry (its slot, the entry, and the name's string, which the table keeps
alive), so every table that remembers something about each finished request grows the run by
that much per request, and a run holds a dozen such tables (the outcomes, each check's frozen
tallies, each rank's set of removed requests).

Requests are named ``r0, r1, ...`` in submission order (DESIGN, the output contract), so a
name's number can index a list: `RidMap` keeps one list slot (8 bytes) per request number and
`RidSet` one byte, and neither keeps the name. The values a check stores there are interned
tuples shared by every request that ran alike, so a finished request costs the slot and no
more. A name of any other form (a test's ``"a"``, a number too far past the others to be worth
a slot each) goes to an ordinary dict or set beside, so both behave like their builtin
counterparts for any key.

Iteration visits the numbered names in numeric order (which is submission order), then the
others in the order they were added.
"""

from __future__ import annotations

import heapq
from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    MutableSet,
    ValuesView,
)
from typing import Any, TypeVar

V = TypeVar("V")

#: how far past the highest slot a new number may land and still get a slot (the list grows to
#: reach it); a number further out goes to the dict, so a stray ``r99999999999`` costs one entry
_REACH = 1 << 16


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Any = _Absent()


def rid_number(rid: object) -> int | None:
    """The number of a canonical request name ``r<n>`` (no sign, no leading zero); else None."""
    if type(rid) is not str or len(rid) < 2 or rid[0] != "r":
        return None
    digits = rid[1:]
    if not (digits.isascii() and digits.isdigit()) or (digits[0] == "0" and len(digits) > 1):
        return None
    return int(digits)


class RidMap(MutableMapping[str, V]):
    """A mapping from request name to value: a list slot per numbered name, a dict for others."""

    __slots__ = ("_slots", "_n", "_other")

    def __init__(self, items: Any = ()) -> None:
        self._slots: list[Any] = []
        self._n = 0  # filled slots
        self._other: dict[str, V] = {}
        self.update(items)

    def _slot(self, rid: str, grow: bool) -> int | None:
        n = rid_number(rid)
        if n is None:
            return None
        slots = self._slots
        if n >= len(slots):
            if not grow or n >= len(slots) + _REACH or rid in self._other:
                return None
            slots.extend([_ABSENT] * (n + 1 - len(slots)))
        return n

    def __getitem__(self, rid: str) -> V:
        n = self._slot(rid, False)
        if n is not None:
            v = self._slots[n]
            if v is not _ABSENT:
                return v
        return self._other[rid]

    def get(self, rid: str, default: Any = None) -> Any:
        n = self._slot(rid, False)
        if n is not None:
            v = self._slots[n]
            if v is not _ABSENT:
                return v
        return self._other.get(rid, default) if self._other else default

    def __contains__(self, rid: object) -> bool:
        n = rid_number(rid)
        if n is not None and n < len(self._slots) and self._slots[n] is not _ABSENT:
            return True
        return bool(self._other) and rid in self._other

    def __setitem__(self, rid: str, value: V) -> None:
        n = self._slot(rid, True)
        if n is None:
            self._other[rid] = value
            return
        if self._slots[n] is _ABSENT:
            self._n += 1
        self._slots[n] = value

    def __delitem__(self, rid: str) -> None:
        n = self._slot(rid, False)
        if n is not None and self._slots[n] is not _ABSENT:
            self._slots[n] = _ABSENT
            self._n -= 1
            return
        del self._other[rid]

    def pop(self, rid: str, *default: Any) -> Any:
        n = self._slot(rid, False)
        if n is not None:
            v = self._slots[n]
            if v is not _ABSENT:
                self._slots[n] = _ABSENT
                self._n -= 1
                return v
        return self._other.pop(rid, *default)

    def __iter__(self) -> Iterator[str]:
        for n, v in enumerate(self._slots):
            if v is not _ABSENT:
                yield f"r{n}"
        yield from self._other

    def __len__(self) -> int:
        return self._n + len(self._other)

    def items(self) -> _Items[V]:
        return _Items(self)

    def values(self) -> _Values[V]:
        return _Values(self)

    def __repr__(self) -> str:
        return f"RidMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (RidMap, (list(self.items()),))


class _Items(ItemsView[str, V]):
    # One pass over the slots, not a lookup per name.
    def __iter__(self) -> Iterator[tuple[str, V]]:
        m: RidMap[V] = self._mapping  # type: ignore[attr-defined]  # MappingView's, undeclared in typeshed
        for n, v in enumerate(m._slots):
            if v is not _ABSENT:
                yield f"r{n}", v
        yield from m._other.items()


class _Values(ValuesView[V]):
    def __iter__(self) -> Iterator[V]:
        m: RidMap[V] = self._mapping  # type: ignore[attr-defined]  # MappingView's, undeclared in typeshed
        for v in m._slots:
            if v is not _ABSENT:
                yield v
        yield from m._other.values()


class RidSet(MutableSet[str]):
    """A set of request names: a byte per numbered name, a builtin set for others."""

    __slots__ = ("_bytes", "_n", "_other")

    def __init__(self, items: Any = ()) -> None:
        self._bytes = bytearray()
        self._n = 0
        self._other: set[str] = set()
        for rid in items:
            self.add(rid)

    def __contains__(self, rid: object) -> bool:
        n = rid_number(rid)
        if n is not None and n < len(self._bytes) and self._bytes[n]:
            return True
        return bool(self._other) and rid in self._other

    def add(self, rid: str) -> None:
        n = rid_number(rid)
        if n is not None and not (self._other and rid in self._other):
            b = self._bytes
            if len(b) <= n < len(b) + _REACH:
                b.extend(bytes(n + 1 - len(b)))
            if n < len(b):
                if not b[n]:
                    b[n] = 1
                    self._n += 1
                return
        self._other.add(rid)

    def discard(self, rid: str) -> None:
        n = rid_number(rid)
        if n is not None and n < len(self._bytes) and self._bytes[n]:
            self._bytes[n] = 0
            self._n -= 1
        else:
            self._other.discard(rid)

    def __iter__(self) -> Iterator[str]:
        for n, v in enumerate(self._bytes):
            if v:
                yield f"r{n}"
        yield from self._other

    def __len__(self) -> int:
        return self._n + len(self._other)

    def __repr__(self) -> str:
        return f"RidSet({sorted(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (RidSet, (list(self),))


def names_in_order(tables: Iterable[Mapping[str, Any]], key: Callable[[str], Any]) -> Iterator[str]:
    """Every name in any of `tables`, once each, sorted by `key` (which must order canonical
    names by their number, as `checks.base.rid_order` does), produced one at a time: judging a
    soak at its end then never holds every name at once (a set of them, a sorted list, a key
    per name), which cost more than the run itself kept."""
    numbered = bytearray()
    others: set[str] = set()

    def mark(n: int) -> None:
        if n >= len(numbered):
            numbered.extend(bytes(n + 1 - len(numbered)))
        numbered[n] = 1

    for table in tables:
        if isinstance(table, RidMap):
            for n, v in enumerate(table._slots):
                if v is not _ABSENT:
                    mark(n)
            others.update(table._other)
        else:
            for rid in table:
                number = rid_number(rid)
                if number is not None and number < len(numbered) + _REACH:
                    mark(number)
                else:
                    others.add(rid)
    # A numbered name kept beside the slots of one table may be in another's slots.
    rest = sorted((r for r in others if not _marked(numbered, r)), key=key)
    counted = (f"r{n}" for n, b in enumerate(numbered) if b)
    return heapq.merge(counted, rest, key=key)


def _marked(numbered: bytearray, rid: str) -> bool:
    n = rid_number(rid)
    return n is not None and n < len(numbered) and bool(numbered[n])
