"""The fault kinds' registry (`simharness.faults`): the order that messages and fuzz draws rely
on, the records, the checks `register` makes, that no module outside the registry names a kind,
and the zmq backend's own faults as kinds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from real_backends.faults import FaultRefused, RealFaults, option_faults
from simharness import faults
from simharness.faults import FaultKind, FaultSpec
from simharness.faults.crash import CrashFault
from simharness.faults.delay import DelayFault
from simharness.faults.slow_rank import SlowRankFault
from simharness.scenario.sections import parse_faults

PKG = Path(__file__).resolve().parents[2] / "simharness"
#: one fault of every shipped kind, as a scenario writes it
EVERY = [{"kind": "delay", "message": "input_signals", "from": 1, "to": 0, "nth": 3, "delay_ms": 5},
         {"kind": "duplicate", "message": "input_signals", "from": 0, "to": 1},
         {"kind": "drop", "message": "remove_request", "to": "conductor"},
         {"kind": "slow_rank", "rank": 1, "factor": 4},
         {"kind": "crash", "rank": 1, "at_ms": 12}]


def test_the_shipped_kinds_in_their_order():
    # Messages list the tolerated kinds first; the fuzzer draws from the same list, so this
    # order is part of every campaign's examples.
    assert faults.names() == ("delay", "slow_rank", "duplicate", "drop", "crash")
    assert [k.name for k in faults.kinds()] == ["delay", "duplicate", "drop", "slow_rank", "crash"]
    assert [k.name for k in faults.kinds(tolerated_only=True)] == ["delay", "slow_rank"]


def test_every_kind_reads_its_record_which_compares_without_its_path():
    forward, shifted = parse_faults(EVERY, 2), parse_faults([EVERY[0], *EVERY], 2)[1:]
    assert [f.kind for f in forward] == [e["kind"] for e in EVERY]
    assert {f.kind for f in forward} == set(faults.names())
    for a, b in zip(forward, shifted, strict=True):
        assert isinstance(a, faults.kind(a.kind).record)
        assert a.path != b.path and a == b and hash(a) == hash(b)
    assert forward[0] == DelayFault(message="input_signals", src=1, dst=0, nth=3, delay_ms=5.0)
    assert [f.tolerated for f in forward] == [True, False, False, True, False]


def test_register_refuses_a_kind_that_would_be_ambiguous():
    class Again(FaultKind):
        name, record, keys, tolerated, order = "crash", CrashFault, ("kind", "rank"), False, 999

    class Untagged(FaultKind):
        name, record, keys, tolerated, order = "other", CrashFault, ("kind", "rank"), False, 999

    class SameOrder(FaultKind):
        class Rec(FaultSpec, tag="same", frozen=True, kw_only=True):
            pass

        name, record, keys, tolerated, order = "same", Rec, ("kind", "rank"), False, 50

    with pytest.raises(ValueError, match="registered already"):
        faults.register(Again())
    with pytest.raises(TypeError, match="tagged 'other'"):
        faults.register(Untagged())
    with pytest.raises(ValueError, match="order 50 is taken by 'crash'"):
        faults.register(SameOrder())
    assert faults.names() == ("delay", "slow_rank", "duplicate", "drop", "crash")


def test_no_module_outside_the_registry_names_a_fault_kind():
    """A kind is named in its own module only: the loader, the engine, the fuzzer and coverage
    iterate the registry."""
    names = set(faults.names())
    bad = []
    for path in PKG.rglob("*.py"):
        if path.is_relative_to(PKG / "faults"):
            continue
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Constant) and n.value in names:
                bad.append(f"{path.relative_to(PKG)}:{n.lineno}: {n.value!r}")
    assert bad == []


def test_the_zmq_backend_s_own_faults_are_a_crash_and_slow_ranks():
    specs = option_faults((1, 2.5), {0: 3.0, 2: 0.5})
    assert specs == (SlowRankFault(rank=0, factor=3.0), SlowRankFault(rank=2, factor=0.5),
                     CrashFault(rank=1, at_ms=2500.0))
    plan = RealFaults.of(specs)
    assert plan.kill == (1, 2.5) and plan.slow_ranks == {0: 3.0, 2: 0.5}
    assert RealFaults.of(option_faults(None, {})).kill is None


def test_the_zmq_backend_refuses_a_message_fault_with_its_kind_s_reason():
    with pytest.raises(FaultRefused, match="does not inject delay faults: real sockets carry"):
        RealFaults.of(parse_faults(EVERY[:1], 2))
    with pytest.raises(FaultRefused, match="kills one rank per run"):
        RealFaults.of([CrashFault(rank=0), CrashFault(rank=1)])
