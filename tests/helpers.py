"""Build small scenarios in code for tests."""

from __future__ import annotations

import copy
from typing import Any

from simharness.run import run_scenario
from simharness.scenario.loader import parse_scenario
from simharness.scenario.model import Scenario


def node(name: str, inputs: list[str], outputs: list[tuple[str, str]], **extra: Any) -> dict[str, Any]:
    return {"node": name, "inputs": inputs,
            "outputs": [{"name": n, "to": to} for n, to in outputs], **extra}


def raw_scenario(
    walks: dict[str, Any],
    groups: list[dict[str, Any]],
    requests: dict[str, Any] | None = None,
    workload: list[dict[str, Any]] | None = None,
    nodes: dict[str, Any] | None = None,
    **top: Any,
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": top.pop("name", "test"),
        "graph": {"walks": walks},
        "placement": {"node_groups": groups},
        "workload": workload or [{"request": next(iter(requests or walks)), "count": 1}],
        "network": {"latency_us": 10, "bandwidth_gbps": 100},
    }
    if requests is not None:
        raw["graph"]["requests"] = requests
    if nodes is not None:
        raw["graph"]["nodes"] = nodes
    raw.update(top)
    return raw


def build(raw: dict[str, Any]) -> Scenario:
    return parse_scenario(copy.deepcopy(raw), source="<test>")


def split_loop(max_iters: int = 3, ranks: tuple[int, int] = (0, 1), count: int = 2,
               concurrency: int = 1) -> dict[str, Any]:
    """A two-node loop split across two node groups: A -> B, B sends x back to A and to itself.

    B's loop-back to A crosses worker graphs, which is the shape of the loop-exit drift.
    """
    loop = {"loop": {"name": "L", "max_iters": max_iters, "body": {"sequential": [
        node("A", ["x"], [("y", "B")]),
        node("B", ["y", "x"], [("x", "A"), ("x", "B")]),
    ]}, "outputs": [{"name": "x", "to": "C"}]}}
    walk = {"sequential": [loop, node("C", ["x"], [("out", "client")])]}
    return raw_scenario(
        {"w": walk},
        [{"node_names": ["A"], "ranks": [ranks[0]]}, {"node_names": ["B", "C"], "ranks": [ranks[1]]}],
        requests={"req": {"walks": ["w"]}},
        workload=[{"request": "req", "count": count, "concurrency": concurrency}],
    )


def counts(report) -> dict[tuple[str, str, int, str], int]:
    from simharness.report.summary import collect_forwards
    return {k: len(v) for k, v in collect_forwards(report.result.events).items()}


def run(raw_or_scenario: Any, runtime: str | None = None, **kw: Any):
    sc = raw_or_scenario if isinstance(raw_or_scenario, Scenario) else build(raw_or_scenario)
    return run_scenario(sc, runtime, **kw)


def checks_failed(report) -> set[str]:
    return {v.check for v in report.violations}


def needs_mstar():
    """Marks for a test that runs the real mstar code: the ``mstar`` marker, and a clean skip
    with the install command when the mstar-ai package is missing."""
    import pytest

    from simharness.mstar import package

    return [pytest.mark.mstar,
            pytest.mark.skipif(not package.is_available(),
                               reason=f"mstar-ai is not installed ({package.PIP_INSTALL})")]


def needs_mstar_model_base(what: str):
    """`needs_mstar`, and a clean skip where ``mstar.model.base`` (mstar's division and model
    registry; it imports torch, triton, pyzmq and msgpack: the mstar extra) does not import;
    `what` names what the test needs of it, for the reason."""
    import pytest

    from simharness.mstar import package

    ok, why = False, "mstar-ai is not installed"
    if package.is_available():
        model_base, why = package.mstar_divider()
        ok = model_base is not None
    return [*needs_mstar(), pytest.mark.skipif(not ok, reason=f"{what} does not import here "
                                                         f"({why}); pip install -e '.[mstar]'")]


def needs_mstar_stack():
    """Marks for a test that runs the real mstar stack (``--runtime mstar``): mstar-ai with the
    extra its worker and conductor modules import (torch, pyzmq, msgpack, ...)."""
    import pytest

    from simharness.mstar import package
    from simharness.mstar.stack.runtime import MstarStack

    return [pytest.mark.mstar,
            pytest.mark.skipif(not MstarStack.available(),
                               reason=f"mstar-ai's worker and conductor do not import here "
                                      f"({package.PIP_INSTALL} and {package.EXTRA_INSTALL})")]


#: the plugin prefix of the runtimes broken on purpose (``tests/quality/broken*.py``)
BROKEN = "tests.quality.broken:"


def caught(sc: Scenario, runtime: str, check: str, clean: str = "mstar-python") -> list[Any]:
    """The `check` violations a broken `runtime` causes on `sc`, after showing that the `clean`
    runtime passes the same scenario (so the check fires because of the breakage)."""
    assert run_scenario(sc, clean).violations == [], f"{clean} is not clean on this scenario"
    found = [v for v in run_scenario(sc, runtime).violations if v.check == check]
    assert found, f"{check} did not fire under {runtime}"
    return found
