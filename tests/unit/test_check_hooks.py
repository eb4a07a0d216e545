"""Observer hooks name real events, and the hooks a check does not override cost nothing.

The recorder finds an observer's hooks by name (``on_<Event>``): a misspelt ``on_Fowrard`` would
never be called and nothing would say so. Every class that observes events (the checks, the
runaway guard, the coverage observer, the test observers) is held to the names in
`simharness.events.EVENT_TYPES`, read from the source so that no observer class is missed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from simharness import events as ev
from simharness.checks import BUILTIN_CHECKS, KNOWN_CHECKS, Check, RunSetup
from simharness.trace import Recorder
from tests.helpers import build, split_loop

ROOT = Path(__file__).resolve().parents[2]
#: where observer classes live: the library, the real backend, the benchmarks and the tests
TREES = ("simharness", "real_backends", "benchmarks", "tests")
#: a hook's name: ``on_`` and an event type's name (event types are CamelCase; other ``on_``
#: methods, such as a fault's ``on_send``, are lower case and no hook)
HOOK = re.compile(r"on_[A-Z]\w*")
EVENTS = {f"on_{t.__name__}" for t in ev.EVENT_TYPES}


def _hook_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every hook a class of `tree` declares: methods and class attributes
    called ``on_<Something>``, and ``self.on_<Something> = ...`` in its methods."""
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for n in ast.walk(cls):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and HOOK.fullmatch(n.name):
                found.append((n.lineno, n.name))
            elif isinstance(n, ast.Assign | ast.AnnAssign):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    for leaf in ast.walk(t):
                        name = (leaf.id if isinstance(leaf, ast.Name)
                                else leaf.attr if isinstance(leaf, ast.Attribute) else "")
                        if HOOK.fullmatch(name):
                            found.append((n.lineno, name))
    return found


def test_every_hook_names_an_event_type():
    bad = []
    seen = 0
    for tree in TREES:
        for f in sorted((ROOT / tree).rglob("*.py")):
            for line, name in _hook_names(ast.parse(f.read_text())):
                seen += 1
                if name not in EVENTS:
                    bad.append(f"{f.relative_to(ROOT)}:{line}: {name} names no event type")
    assert bad == []
    assert seen > 40  # the checks, the runaway guard and the coverage observer were read


def test_a_misspelt_hook_is_found():
    tree = ast.parse("class C(Check):\n    def on_Fowrard(self, e): ...\n"
                     "    def __init__(self):\n        self.on_Stalld = None\n")
    assert [name for _, name in _hook_names(tree) if name not in EVENTS] == ["on_Fowrard", "on_Stalld"]


def test_check_declares_a_no_op_hook_for_every_event_type():
    for t in ev.EVENT_TYPES:
        assert callable(getattr(Check, f"on_{t.__name__}"))


def _setup() -> RunSetup:
    return RunSetup.of(build(split_loop()))


def test_the_recorder_calls_only_the_hooks_a_check_overrides():
    class OnlyForwards(Check):
        name = "only_forwards"

        def on_Forward(self, e: ev.Forward) -> None: ...

    setup = _setup()
    rec = Recorder([Check(setup), OnlyForwards(setup)], keep=False, digest=False)
    subscribed = {t.__name__: len(fns) for t, fns in rec._handlers.items() if fns}
    assert subscribed == {"Forward": 1}


def test_every_check_names_itself_and_ranks_apart():
    names = [c.name for c in KNOWN_CHECKS]
    assert all(names) and len(set(names)) == len(names)
    priorities = [c.priority for c in KNOWN_CHECKS]
    assert len(set(priorities)) == len(priorities)
    assert all(c.kinds and len(set(c.kinds)) == len(c.kinds) for c in KNOWN_CHECKS)
    assert [c.name for c in BUILTIN_CHECKS][0] == "forwards"  # it keeps the log expect reads
