"""The `Runtime` conformance suite (`simharness.testing.check_runtime`): every shipped model runtime
passes it, and runtimes broken on purpose (in their behaviour, or in their doors) fail it."""

from __future__ import annotations

import pytest

from simharness.runtime import registry
from simharness.runtime.profiles import MstarPython
from simharness.runtime.protocol import LoopPolicy
from simharness.testing import check_runtime
from tests.helpers import BROKEN, build, needs_mstar, split_loop


@pytest.mark.parametrize("name", [*registry.PROFILES,
                                  pytest.param("mstar-graph", marks=needs_mstar())])
def test_a_shipped_runtime_conforms(name):
    check_runtime(registry.resolve(name))


def test_a_runtime_that_stops_its_loops_early_fails():
    with pytest.raises(AssertionError, match=r"\(OffByOneLoop\) fails scenario 'conformance': forwards: "):
        check_runtime(registry.resolve(BROKEN + "OffByOneLoop"))


class _ClientWithoutDoor(MstarPython):
    """An API side with no door at all."""

    def build_client(self):
        return object()


def test_a_runtime_whose_client_has_no_door_fails_naming_it():
    with pytest.raises(AssertionError, match=r"^build_client\(\) gave a object, which is not a "
                                             r"ClientDoor: it lacks handle_stimulus$"):
        check_runtime(_ClientWithoutDoor())


class _Unsettled(MstarPython):
    """Changes its drain barrier after every run it is built for (when its API side is built,
    the last of a run's pieces): each run is valid, and no two agree."""

    def build_client(self):
        client = super().build_client()
        self.policy = LoopPolicy(drain_barrier=not self.policy.drain_barrier)
        return client


def test_a_runtime_that_changes_between_runs_fails_as_not_deterministic():
    with pytest.raises(AssertionError, match=r"\(_Unsettled\) is not deterministic: the same scenario "
                                             r"and seed gave two trace digests"):
        check_runtime(_Unsettled())


def test_a_scenario_of_ones_own_is_run_instead():
    sc = build(split_loop())  # mstar-rust-prefix's loop-exit drift: a loop split across ranks
    check_runtime(registry.resolve("mstar-rust"), scenario=sc)
    with pytest.raises(AssertionError, match=r"\(MstarRustPrefix\) fails scenario 'test': loop_exit: "):
        check_runtime(registry.resolve("mstar-rust-prefix"), scenario=sc)
