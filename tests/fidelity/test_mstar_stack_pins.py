"""The real stack restates a few spans of mstar-ai's code it cannot call, and stands in for a few
module-level names its code reads (`simharness.mstar.stack.pins`, `seams`). Both are pinned to
the installed mstar-ai: a changed span or a name that moved fails here, by name, before the
stack drifts from the code it stands for."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from simharness.mstar.stack.pins import MSTAR_VERSION, PINS, Pin, digest
from tests.helpers import needs_mstar_stack

pytestmark = needs_mstar_stack()


def _root() -> Path:
    spec = importlib.util.find_spec("mstar")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def test_the_pinned_version_is_installed():
    from importlib.metadata import version

    assert version("mstar-ai") == MSTAR_VERSION


@pytest.mark.parametrize("pin", PINS, ids=lambda p: f"{p.path}:{p.first}-{p.last}")
def test_every_restated_span_is_unchanged(pin: Pin):
    assert digest(_root(), pin) == pin.sha256, (
        f"mstar's {pin.path} lines {pin.first}-{pin.last} changed; {pin.what}: re-read them, "
        f"restate the change, then re-pin")


def test_a_changed_span_is_caught(tmp_path: Path):
    pin = PINS[0]
    copy = tmp_path / pin.path
    copy.parent.mkdir(parents=True)
    lines = (_root() / pin.path).read_text().splitlines()
    lines[pin.first + 3] += "  # an upgrade's edit"
    copy.write_text("\n".join(lines))
    assert digest(tmp_path, pin) != pin.sha256
    # trailing spaces alone are no change
    lines = (_root() / pin.path).read_text().splitlines()
    lines[pin.first + 3] += "   "
    copy.write_text("\n".join(lines))
    assert digest(tmp_path, pin) == pin.sha256


def test_every_name_the_seams_replace_exists():
    from simharness.mstar.stack import seams

    for mod, attr in seams.CLOCK_NAMES:
        assert hasattr(importlib.import_module(mod), attr), f"{mod}.{attr}"
    for mod, attr, _ in seams.UUID_NAMES:
        assert hasattr(importlib.import_module(mod), attr), f"{mod}.{attr}"
    worker = importlib.import_module("mstar.worker.worker")
    conductor = importlib.import_module("mstar.conductor.conductor")
    for module, name in ((worker, "sleep"), (worker, "make_communicator"),
                         (worker, "create_tensor_communication_manager"), (worker, "range_pop"),
                         (worker, "EngineManager"), (conductor, "make_communicator"),
                         (conductor, "_pick_free_tcp_port"), (conductor, "np")):
        assert hasattr(module, name), f"{module.__name__}.{name}"
    assert hasattr(conductor.Conductor, "_launch_workers")
