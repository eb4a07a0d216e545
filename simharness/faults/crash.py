"""``crash``: one rank stops at a moment of the run; it finishes nothing more, and every message
sent to it is lost.

Not tolerated: mstar has no health checks, so nothing notices a dead rank and every runtime
degrades. On real processes the rank is killed (SIGKILL) that many seconds after the start (the
zmq backend's ``--kill-rank RANK:SECONDS``).
"""

from __future__ import annotations

from typing import Any

from simharness import fields as f
from simharness.faults.base import Draw, FaultHooks, FaultKind, FaultSpec, rank_of
from simharness.records import compared_without


@compared_without("path")
class CrashFault(FaultSpec, tag="crash", frozen=True, kw_only=True):
    """``{kind: crash, rank, at_ms}``."""

    rank: int
    #: when it stops, in milliseconds of the run's time (simulated, or wall time on real ranks)
    at_ms: float = 0.0


class Crash(FaultKind):
    name = "crash"
    record = CrashFault
    keys = ("kind", "rank", "at_ms")
    rank_keys = ("rank",)
    tolerated = False
    order = 50

    def parse(self, m: dict[str, Any], path: str, num_ranks: int) -> FaultSpec:
        return CrashFault(
            rank=rank_of(m, path, num_ranks),
            at_ms=f.number(m.get("at_ms", f.default(CrashFault, "at_ms")), f.join(path, "at_ms"),
                           minimum=0, maximum=f.MAX_SECONDS * 1000, unit="milliseconds"),
            path=path)

    def install(self, fault: Any, hooks: FaultHooks) -> None:
        hooks.stop_rank(fault.rank, fault.at_ms / 1000.0)

    def draw(self, draw: Draw, num_ranks: int, earlier: list[dict[str, Any]]) -> dict[str, Any]:
        from hypothesis import strategies as st

        return {"kind": self.name, "rank": draw(st.integers(0, num_ranks - 1)),
                "at_ms": draw(st.sampled_from((0.0, 1.0, 5.0, 20.0)))}


KIND = Crash()
