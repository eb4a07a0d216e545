"""Mechanisms the real stack shows that our model has no part for.

A run of ``--runtime mstar`` can take a path no model runtime can: mstar-ai's own reference
counts free a tensor a node still reads, a rank routes a stream item to a StreamBuffer it never
made, or a worker runs with a TP rank its Conductor gave it by mistake. Such a run is not
comparable with a model's event by event (the model would need tensors, or mstar's way of
finding a partition's consumers, or of numbering its workers), so a differential run or the
fidelity suite counts it under the mechanism's label instead (docs/fidelity.md says why each
stays outside the model). `real_only` reads the labels off a run's events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from simharness import events as ev

#: label -> why the model has no part for it
REAL_ONLY: dict[str, str] = {
    "freed-tensor": "mstar frees a tensor a node still needs (its reference counts); the model "
                    "has no tensors",
    "no-stream-buffer": "a rank routes a stream item, or the stream's end, to a StreamBuffer it "
                        "never created; the model makes a buffer per consumer partition",
    "skipped-partition-consumer": "a stream consumer runs on the final empty chunk for a request "
                                  "that skips its partition; the model never starts that partition",
    "shifted-tp-rank": "mstar's Conductor gives a worker the TP rank of another where the lowest "
                       "rank in use is not 0; the model places TP ranks by the layout",
}

#: the ``Dropped`` reason's tail when a step read a tensor its rank had already freed
FREED_TENSOR = "a tensor was freed before this rank's node read it (mstar's reference counts)"

#: the ``Dropped`` reason's tail when a rank routed a stream item to a buffer it never made
NO_STREAM_BUFFER = ("this rank has no StreamBuffer for the stream (mstar finds a partition's "
                    "consumer nodes by its walks' section names, worker.py:406-418)")

#: the ``Dropped`` reason's tail when a worker's TP group had no TP rank set for it
SHIFTED_TP_RANK = ("mstar's Conductor gave this worker no TP rank, or another worker's: it "
                   "stores instance ranks by global rank (conductor.py:345-347) and looks them up "
                   "by the worker's position among the ranks in use (conductor.py:418-423)")


def real_only(events: Iterable[Any], scenario: Any) -> list[str]:
    """The `REAL_ONLY` labels a real-stack run's events show, sorted."""
    kinds: dict[str, Any] = {}
    found: set[str] = set()
    for e in events:
        t = type(e)
        if t is ev.Submitted:
            kinds[e.rid] = scenario.requests.get(e.request_kind)
        elif t is ev.Dropped:
            if FREED_TENSOR in e.reason and e.what == "main_loop_error":
                found.add("freed-tensor")
            elif NO_STREAM_BUFFER in e.reason:
                found.add("no-stream-buffer")
            elif SHIFTED_TP_RANK in e.reason:
                found.add("shifted-tp-rank")
        elif t is ev.Forward:
            kind = kinds.get(e.rid)
            if kind is not None and e.walk not in kind.walks:
                found.add("skipped-partition-consumer")
    return sorted(found)


__all__ = ["FREED_TENSOR", "NO_STREAM_BUFFER", "REAL_ONLY", "SHIFTED_TP_RANK", "real_only"]
