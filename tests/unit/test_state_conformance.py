"""The `WorkerGraphState` conformance suite (`simharness.testing.check_worker_graph_state`), run
against our model (`GraphState`) and the real mstar code (`MstarGraphState`, over mstar's
``WorkerGraphIO``), and shown to fail a state broken on purpose.

The suite ships in the package, so an adapter for another runtime holds its state to the same
behaviour by calling it from its own tests.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from simharness.graph.ir import Section
from simharness.runtime.graph_spec import GraphSpec, Semantics
from simharness.runtime.graph_state import GraphState
from simharness.runtime.protocol import WorkerGraphState
from simharness.testing import check_worker_graph_state
from tests.helpers import needs_mstar
from tests.quality.broken import _StickyCounterState


def ours(section: Section) -> WorkerGraphState:
    return GraphState(GraphSpec("w#0", "w", section, Semantics()))


def mstar(section: Section) -> WorkerGraphState:
    from simharness.mstar import convert
    from simharness.mstar.state import MstarGraphState

    spec = GraphSpec("w#0", "w", section, Semantics())
    return MstarGraphState(spec, convert.to_mstar(section))


@pytest.mark.parametrize("make", [pytest.param(ours, id="graph_state"),
                                  pytest.param(mstar, id="mstar", marks=needs_mstar())])
def test_the_state_conforms(make):
    check_worker_graph_state(make)


def test_a_state_that_forgets_to_rewind_its_loops_fails_the_suite():
    def sticky(section: Section) -> WorkerGraphState:
        return _StickyCounterState(GraphSpec("w#0", "w", section, Semantics()))

    with pytest.raises(AssertionError, match=r"^WorkerGraphState: a loop re-injects .*after reset\(\) "
                                             r"the state is not clean"):
        check_worker_graph_state(sticky)


class _Without:
    """A state that hides one member of the one it wraps."""

    def __init__(self, inner: WorkerGraphState, hidden: str) -> None:
        self._inner = inner
        self._hidden = hidden

    def __getattr__(self, name: str):
        if name == self._hidden:
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_state_missing_a_member_fails_the_suite_naming_it():
    with pytest.raises(AssertionError, match=r"the state declares every member .*_Without.*lacks held$"):
        check_worker_graph_state(lambda section: _Without(ours(section), "held"))


def test_the_suites_import_without_pytest():
    """An adapter's tests may run under another runner: nothing the suites import needs pytest."""
    code = ("import sys; sys.modules['pytest'] = None; import simharness.testing as t; "
            "t.check_worker_graph_state")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
