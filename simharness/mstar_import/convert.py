"""mstar graph objects -> the scenario schema's plain data.

One function per mstar class: ``GraphNode`` -> ``{node, inputs, outputs, async}``, ``GraphEdge``
-> ``{name, to, persist, new_token}`` (``EMIT_TO_CLIENT`` is ``client``, the empty destination
``conductor``; a ``StreamingGraphEdge`` sets ``stream``), ``Sequential`` / ``Parallel`` / ``Loop``
as themselves, and the topology's ``Connection`` with its chunk policy -> ``graph.streams``.

mstar keeps a node's inputs in a set; the scenario lists them sorted so that an import is the
same text every time. A loop mstar names with a fresh uuid (no ``name=``) gets ``WALK.loopN``,
the name our loader would give it, with a note: its name is not stable across two imports.
"""

from __future__ import annotations

import re
from typing import Any

from simharness.graph.ir import CLIENT, CONDUCTOR

#: mstar's special destinations (``mstar/graph/special_destinations.py``)
EMIT_TO_CLIENT = "emit_to_client"
EMPTY_DESTINATION = ""
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class WalkConverter:
    """Converts one walk's section tree; collects notes about what it had to decide."""

    def __init__(self, walk: str) -> None:
        self.walk = walk
        self.notes: list[str] = []
        self.unnamed_loops = 0

    def section(self, sec: Any) -> dict[str, Any]:
        from mstar.graph.base import GraphNode, Loop, Parallel, Sequential

        if isinstance(sec, GraphNode):
            return self.node(sec)
        if isinstance(sec, Sequential):
            return {"sequential": [self.section(s) for s in sec.sections]}
        if isinstance(sec, Parallel):
            return {"parallel": [self.section(s) for s in sec.sections]}
        if isinstance(sec, Loop):
            return {"loop": self.loop(sec)}
        raise TypeError(f"walk {self.walk!r}: unknown mstar section type {type(sec).__name__}")

    def node(self, node: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"node": node.name, "inputs": sorted(node.input_names),
                               "outputs": [edge(e) for e in node.outputs]}
        if not node.enable_async_scheduling:
            out["async"] = False
        return out

    def loop(self, lp: Any) -> dict[str, Any]:
        name = lp.name
        self.unnamed_loops += 1
        if _UUID.match(name):
            name = f"{self.walk}.loop{self.unnamed_loops}"
            self.notes.append(f"walk {self.walk!r}: a loop has no name in mstar (a fresh uuid each "
                              f"time); named {name!r} here")
        out: dict[str, Any] = {"name": name, "max_iters": int(lp.max_iters),
                               "body": self.section(lp.section),
                               "outputs": [edge(e) for e in lp.outputs]}
        if lp.accumulated_outputs:
            out["accumulated_outputs"] = [edge(e) for e in lp.accumulated_outputs]
        return out


def edge(e: Any) -> dict[str, Any]:
    if e.next_node == EMIT_TO_CLIENT:
        to = CLIENT
    elif e.next_node == EMPTY_DESTINATION:
        to = CONDUCTOR
    else:
        to = e.next_node
    out: dict[str, Any] = {"name": e.name, "to": to}
    if e.persist and to != CONDUCTOR:
        out["persist"] = True
    if e.conductor_new_token:
        out["new_token"] = True
    if e.is_streaming:
        out["stream"] = True
    return out


def chunk_policy(policy: Any) -> dict[str, Any]:
    """A ChunkPolicy object -> ``{sliding_window: ...}`` / ``{left_context: ...}`` / ``{fixed: ...}``.

    Read through the policy's public methods where they tell the fact: a fresh policy (the
    connection's factory makes one) has read no chunk yet, so its ``window_size()`` is the
    window (sliding) or the chunk (fixed) and ``next_chunk_size`` the stride.
    """
    from mstar.streaming.chunk_policy import (
        FixedChunkPolicy,
        LeftContextChunkPolicy,
        SlidingWindowChunkPolicy,
    )

    if isinstance(policy, SlidingWindowChunkPolicy):
        window = policy.window_size()
        return {"sliding_window": {"window": window, "stride": policy.next_chunk_size(window)}}
    if isinstance(policy, LeftContextChunkPolicy):
        chunk, context = _left_context_sizes(policy)
        return {"left_context": {"chunk": chunk, "context": context}}
    if isinstance(policy, FixedChunkPolicy):
        out: dict[str, Any] = {"chunk": policy.window_size()}
        if policy.continue_after_producer_done():
            out["continue_after_done"] = True
        return {"fixed": out}
    raise TypeError(f"unknown mstar chunk policy {type(policy).__name__}")


def _left_context_sizes(policy: Any) -> tuple[int, int]:
    """(chunk, left context) of an mstar ``LeftContextChunkPolicy``.

    No public method states them: ``window_size()`` and ``next_chunk_size()`` change once the
    first chunk is read, so this reads the constructor's arguments as mstar-ai 0.2.1 stores them
    (``mstar/streaming/chunk_policy.py``: ``_chunk`` and ``_left_context``). The one place that
    reads a private attribute of mstar's chunk policies: if mstar renames them, only this changes.
    """
    return policy._chunk, policy._left_context


def connection(conn: Any) -> dict[str, Any]:
    return {"from": conn.from_partition, "to": conn.to_partition, "edge": conn.edge_name,
            "policy": chunk_policy(conn.chunk_policy_factory())}
