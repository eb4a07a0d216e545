"""A fault kind written outside simharness, as a plugin would write one: ``lag``, every message
to one rank arrives ``extra_ms`` later. This one module is all of it (its record, how it is read,
how it acts on a run, how the fuzzer draws it, why the zmq backend refuses it); a test adds it
with `simharness.faults.register` (`test_fault_kinds.py`)."""

from __future__ import annotations

from typing import Any

from simharness import fields as f
from simharness.faults import FaultHooks, FaultKind, FaultSpec
from simharness.faults.base import rank_of
from simharness.records import compared_without


@compared_without("path")
class LagFault(FaultSpec, tag="lag", frozen=True, kw_only=True):
    """``{kind: lag, rank, extra_ms}``."""

    rank: int
    extra_ms: float = 1.0


class _Lagged:
    """Adds the lag to every message to one endpoint."""

    def __init__(self, dst: int, extra_s: float) -> None:
        self.dst = dst
        self.extra_s = extra_s

    def __call__(self, src: int, dst: int, message: str, copies: int,
                 extra_s: float) -> tuple[int, float]:
        return (copies, extra_s + self.extra_s) if dst == self.dst else (copies, extra_s)


class Lag(FaultKind):
    name = "lag"
    record = LagFault
    keys = ("kind", "rank", "extra_ms")
    rank_keys = ("rank",)
    # a later arrival on every link into the rank, each link still FIFO
    tolerated = True
    order = 1000
    real_refusal = "real sockets carry each message as it is sent"

    def parse(self, m: dict[str, Any], path: str, num_ranks: int) -> FaultSpec:
        return LagFault(rank=rank_of(m, path, num_ranks),
                        extra_ms=f.number(m.get("extra_ms", f.default(LagFault, "extra_ms")),
                                          f.join(path, "extra_ms"), minimum=0, maximum=1000,
                                          unit="milliseconds"),
                        path=path)

    def install(self, fault: Any, hooks: FaultHooks) -> None:
        hooks.intercept_sends(_Lagged(hooks.endpoint(fault.rank), fault.extra_ms / 1000.0))

    def draw(self, draw: Any, num_ranks: int, earlier: list[dict[str, Any]]) -> dict[str, Any]:
        from hypothesis import strategies as st

        return {"kind": self.name, "rank": draw(st.integers(0, num_ranks - 1)),
                "extra_ms": draw(st.sampled_from((1.0, 10.0)))}


KIND = Lag()
