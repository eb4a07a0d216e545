"""Value records: frozen Structs whose equality leaves out where a value was written."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import operator
import pickle

import msgspec
import pytest

from simharness.faults.delay import DelayFault
from simharness.faults.drop import DropFault
from simharness.graph.ir import Edge
from simharness.records import compared_without, shown_without
from simharness.scenario.loader import load_scenario
from simharness.scenario.model import NodeGroup
from tests.conftest import ROOT


@compared_without("path")
class _Point(msgspec.Struct, frozen=True):
    x: int
    y: int = 0
    path: str = ""


def test_equality_and_hash_leave_the_named_fields_out() -> None:
    a, b = _Point(1, 2, "walks.a"), _Point(1, 2, "walks.b")
    # both operators asked for: != is its own method on a Struct, not the negation of ==
    assert operator.eq(a, b) and not operator.ne(a, b) and hash(a) == hash(b)
    assert len({a, b}) == 1
    c = _Point(1, 3)
    assert operator.ne(a, c) and not operator.eq(a, c)
    assert _Point(1) != (1, 0) and _Point(1).__eq__((1, 0)) is NotImplemented
    assert a.path == "walks.a"  # kept, only not compared


def test_an_unknown_field_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="has no field pth"):
        @compared_without("pth")
        class _Bad(msgspec.Struct, frozen=True):
            path: str = ""


@shown_without("bulk")
class _Shown(msgspec.Struct, frozen=True):
    name: str
    bulk: dict = {}


def test_the_repr_leaves_the_named_fields_out() -> None:
    assert repr(_Shown("a", {"k": 1})) == "_Shown(name='a')"


def test_model_records_compare_as_before() -> None:
    # The key path says where a value was written; two equal values written in two places are
    # equal (the loader and the shrinker compare sections read from different files).
    assert Edge("x", "b", path="p") == Edge("x", "b", path="q")
    assert NodeGroup(("n",), (0,), path="p") == NodeGroup(("n",), (0,), path="q")
    drop = DropFault(message="new_request", path="faults[0]")
    assert drop == DropFault(message="new_request", path="faults[3]")
    assert drop != DelayFault(message="new_request")
    with pytest.raises(AttributeError):
        drop.nth = 2  # type: ignore[misc]


def test_a_scenario_compares_without_its_source_and_survives_a_round_trip(tmp_path) -> None:
    text = (ROOT / "scenarios" / "bagel_cfg.yaml").read_text()
    (tmp_path / "copy.yaml").write_text(text)
    a = load_scenario(ROOT / "scenarios" / "bagel_cfg.yaml")
    b = load_scenario(tmp_path / "copy.yaml")
    assert a.source != b.source and a == b
    assert msgspec.structs.replace(a, seed=a.seed + 1) != a
    back = pickle.loads(pickle.dumps(a))  # sweeps and fuzz campaigns send scenarios to workers
    assert back == a and back.walk_facts.keys() == a.walk_facts.keys()
    assert back.partition_of == a.partition_of  # cached properties are rebuilt, not lost
    assert "raw=" not in repr(a) and "walk_facts=" not in repr(a)


#: modules a plain ``simharness run`` imports that define value records
RUN_PATH = ("simharness.scenario.model", "simharness.graph.ir", "simharness.graph.analysis",
            "simharness.graph.derive", "simharness.placement.layout", "simharness.graph.divide",
            "simharness.runtime.graph_spec", "simharness.runtime.protocol",
            "simharness.runtime.conductor", "simharness.drive.core", "simharness.scenario.validate")


@pytest.mark.parametrize("name", RUN_PATH)
def test_no_frozen_dataclass_on_the_run_path(name: str) -> None:
    # A frozen dataclass costs about a millisecond of start-up to define (its methods are
    # compiled from source); a frozen Struct a few microseconds. Mutable state may stay a
    # dataclass: its writes are faster than a Struct's.
    module = importlib.import_module(name)
    frozen = [cls.__name__ for _, cls in inspect.getmembers(module, inspect.isclass)
              if cls.__module__ == name and dataclasses.is_dataclass(cls)
              and cls.__dataclass_params__.frozen]  # type: ignore[attr-defined]
    assert not frozen, f"{name}: frozen dataclasses {frozen}; make them frozen msgspec Structs"
