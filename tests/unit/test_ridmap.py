"""`RidMap` and `RidSet` behave as a dict and a set for any key, whatever the key's form."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from simharness.ridmap import RidMap, RidSet, rid_number

# canonical names, near-canonical ones (leading zero, other letter, far out) and anything else
NAMES = st.one_of(st.integers(0, 50).map(lambda n: f"r{n}"), st.sampled_from(
    ["r", "r00", "r01", "R1", "x", "", "r-1", "r1.0", "r²", f"r{10**12}"]), st.text(max_size=4))


def test_only_canonical_names_have_a_number():
    assert [rid_number(r) for r in ("r0", "r12", "r00", "r012", "r", "x1", "r²", 3)] == \
        [0, 12, None, None, None, None, None, None]


@given(st.lists(st.tuples(st.sampled_from(["set", "pop", "del"]), NAMES, st.integers())))
def test_a_ridmap_is_a_dict(ops):
    m, d = RidMap(), {}
    for op, k, v in ops:
        if op == "set":
            m[k] = d[k] = v
        elif op == "pop":
            assert m.pop(k, None) == d.pop(k, None)
        elif k in d:
            del m[k], d[k]
        assert (k in m) == (k in d) and m.get(k) == d.get(k) and len(m) == len(d)
    assert m == d and dict(m.items()) == d and sorted(m.values()) == sorted(d.values())
    assert pickle.loads(pickle.dumps(m)) == d


@given(st.lists(st.tuples(st.booleans(), NAMES)))
def test_a_ridset_is_a_set(ops):
    s, ref = RidSet(), set()
    for add, k in ops:
        if add:
            s.add(k)
            ref.add(k)
        else:
            s.discard(k)
            ref.discard(k)
        assert (k in s) == (k in ref) and len(s) == len(ref)
    assert set(s) == ref and pickle.loads(pickle.dumps(s)) == ref


def test_numbered_names_iterate_in_submission_order():
    m = RidMap()
    for k in ("r2", "b", "r0", "a", "r10"):
        m[k] = k
    assert list(m) == ["r0", "r2", "r10", "b", "a"]


def test_names_that_only_look_numbered_are_sorted_and_listed_as_names():
    # "²" is a decimal digit to str.isdigit but not to int(): such a name once crashed both
    from simharness.checks.base import Violation, rid_order
    from simharness.report.console import _rids_text

    names = ["r2", "r²", "r01", "r1", "x"]
    assert sorted(names, key=rid_order) == ["r01", "r²", "x", "r1", "r2"]
    assert Violation("forwards", "m", request="r²").sort_key()[:2] == (-1, "r²")
    assert _rids_text(["r²", "r³", "r⁴"]) == "r²,r³,r⁴"
    assert _rids_text(["r01", "r02", "r03"]) == "r01,r02,r03"
    assert _rids_text(["r1", "r2", "r3"]) == "r1..r3"


@given(st.lists(st.lists(NAMES, max_size=12), min_size=1, max_size=3), st.booleans())
def test_names_in_order_is_the_sorted_union(tables, plain_last):
    from simharness.checks.base import rid_order
    from simharness.ridmap import names_in_order

    maps: list = []
    for i, names in enumerate(tables):
        m: dict | RidMap = {} if plain_last and i == len(tables) - 1 else RidMap()
        for k in names:
            m[k] = 1
        maps.append(m)
    want = sorted(set().union(*map(set, tables)), key=rid_order)
    assert list(names_in_order(maps, rid_order)) == want
