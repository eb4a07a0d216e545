"""Messages and stimuli are built with keywords: a positional slip between two ints or two
strings would pass silently. msgspec applies ``kw_only`` to one class's own fields, so each
class must say it; the classes are found by walking the subclasses, so a new one is held to it
too. (Trace events and signals are built by position: array-like Structs, built in C several
times per forward.)"""

from __future__ import annotations

import msgspec
import pytest

from simharness.runtime import effects, messages


def _all_subclasses(base: type) -> list[type]:
    found, todo = [], [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                todo.append(sub)
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _takes_positional(cls: type) -> bool:
    """Whether `cls` accepts one positional argument per field (what each holds is not checked
    when a Struct is built, so any value will do)."""
    try:
        cls(*range(max(1, len(cls.__struct_fields__))))
    except TypeError:
        return False
    return True


KW_BUILT = _all_subclasses(messages.Message) + _all_subclasses(effects._Stimulus)


def test_every_message_and_stimulus_class_is_found():
    names = {c.__name__ for c in KW_BUILT}
    assert {"InputSignals", "NewRequest", "WorkerGraphsDoneMsg", "Arrived", "Received", "Started",
            "Submit", "Abort", "Choose"} <= names


@pytest.mark.parametrize("cls", KW_BUILT, ids=lambda c: c.__name__)
def test_every_message_and_stimulus_refuses_positional_arguments(cls):
    assert not _takes_positional(cls), f"{cls.__name__} takes positional arguments: add kw_only=True"


def test_kw_only_on_a_base_does_not_reach_its_subclasses():
    """Why every class says ``kw_only=True`` itself (if msgspec ever passes it down, the
    docstrings of `Message` and `_Stimulus` say too much)."""

    class Base(msgspec.Struct, kw_only=True):
        pass

    class Sub(Base):
        a: int
        b: int

    class SubKw(Base, kw_only=True):
        a: int
        b: int

    assert _takes_positional(Sub) and not _takes_positional(SubKw)
