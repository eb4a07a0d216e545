"""``slow_rank``: every service time on one rank is scaled by a factor, as on a slower device.

Tolerated: a slower rank is a timing the protocol permits. On real processes the factor scales
the budget of every batch the rank runs (the zmq backend's ``RealOptions.slow_ranks``).
"""

from __future__ import annotations

from typing import Any

from simharness import fields as f
from simharness.faults.base import Draw, FaultHooks, FaultKind, FaultSpec, rank_of
from simharness.records import compared_without


@compared_without("path")
class SlowRankFault(FaultSpec, tag="slow_rank", frozen=True, kw_only=True):
    """``{kind: slow_rank, rank, factor}``."""

    rank: int
    #: A factor of 1 would be a fault that does nothing: the default is the smallest fault that
    #: does something.
    factor: float = 2.0


class SlowRank(FaultKind):
    name = "slow_rank"
    record = SlowRankFault
    keys = ("kind", "rank", "factor")
    rank_keys = ("rank",)
    tolerated = True
    order = 40

    def parse(self, m: dict[str, Any], path: str, num_ranks: int) -> FaultSpec:
        return SlowRankFault(
            rank=rank_of(m, path, num_ranks),
            factor=f.number(m.get("factor", f.default(SlowRankFault, "factor")), f.join(path, "factor"),
                            positive=True, maximum=1000, unit="times the service time"),
            path=path)

    def install(self, fault: Any, hooks: FaultHooks) -> None:
        hooks.scale_service(fault.rank, fault.factor)

    def draw(self, draw: Draw, num_ranks: int, earlier: list[dict[str, Any]]) -> dict[str, Any] | None:
        from hypothesis import strategies as st

        rank = draw(st.integers(0, num_ranks - 1))
        # Slow, not stalled: a runtime must still finish within the request timeout, so one
        # factor per rank (two would multiply).
        if any(e["kind"] == self.name and e["rank"] == rank for e in earlier):
            return None
        return {"kind": self.name, "rank": rank, "factor": draw(st.sampled_from((2.0, 5.0)))}


KIND = SlowRank()
