"""Dynamic loops whose state more than one node reads first: two real mstar hazards.

* One reader stops the loop, another reader sits in another copy of the loop: that reader can
  finish the iteration before the stopper's STOP_LOOPS reaches it; its copy advances and waits
  for a loop-back the stopped copies filtered, and the request hangs (reference semantics
  section 2.2: a peer's STOP_LOOPS only sets the finish flag; section 2.3: every finishing copy
  filters the loop's full loop-back set).
* Both readers stop it, from sibling worker graphs of one rank: the second stop sets the finish
  flag again on the first reader's copy, which had already finished and been reset (mstar-ai
  0.2.1 ``node_manager_utils.py`` ``stop_loops`` fans out to every worker graph of the walk;
  ``graph/base.py`` ``register_finished`` sets the flag unconditionally), and the flag is still
  there at removal.

The real mstar graph code shows both. No model has such a loop, so the fuzz generator makes a
loop dynamic only when one node reads its state first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simharness.explore.execute import execute
from tests.helpers import needs_mstar

HERE = Path(__file__).parent.parent / "scenarios"
RACE = HERE / "dynamic_stop_race_across_copies.yaml"
TWO_STOPPERS = HERE / "two_stoppers_on_one_rank.yaml"


def _race(stoppers: list[str]) -> dict:
    raw = yaml.safe_load(RACE.read_text())
    raw["graph"]["walks"]["w0"]["loop"]["stop"]["by"] = stoppers
    return raw


def _with_marks(marks):
    def wrap(fn):
        for m in marks:
            fn = m(fn)
        return fn
    return wrap


@pytest.mark.parametrize("runtime", ["mstar-python", "mstar-rust"])
def test_a_reader_left_out_of_the_stop_hangs_its_copy(runtime):
    o = execute(_race(["b"]), runtime)
    assert o.signature == "liveness:hang-loop-back", o.messages
    assert "c@1" in o.messages[0]


@pytest.mark.parametrize("runtime", ["mstar-python", "mstar-rust"])  # the prefix drifts here (B1)
def test_with_every_reader_checking_the_stop_the_race_is_gone(runtime):
    assert execute(_race(["b", "c"]), runtime).status == "pass"


@pytest.mark.parametrize("runtime", ["mstar-python", "mstar-rust"])
def test_a_second_stopper_re_arms_a_finished_sibling_copy(runtime):
    o = execute(yaml.safe_load(TWO_STOPPERS.read_text()), runtime)
    assert o.signature == "drain:held-at-teardown", o.messages
    assert "loop 'L1'" in o.messages[0]


@_with_marks(needs_mstar())
def test_mstar_s_own_graph_code_shows_both():
    assert execute(_race(["b"]), "mstar-graph").signature == "liveness:hang-loop-back"
    assert execute(yaml.safe_load(TWO_STOPPERS.read_text()), "mstar-graph").signature == \
        "drain:held-at-teardown"
