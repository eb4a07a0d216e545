"""Our graph IR and mstar's graph classes, both ways.

Ours -> mstar (`to_mstar`): the scenario's walks become mstar ``GraphNode`` / ``Sequential`` /
``Parallel`` / ``Loop`` objects, so loops derive their own external and loop-back inputs; each
mstar ``GraphEdge`` carries the scenario `Edge` it stands for (`CARRIES`, `Carried`), so that
routing, traces and checks keep our identities.

mstar -> ours (`WalkConverter`, `edge`, `connection`): one function per mstar class:
``GraphNode`` -> ``{node, inputs, outputs, async}``, ``GraphEdge`` -> ``{name, to, persist,
new_token}`` (``EMIT_TO_CLIENT`` is ``client``, the empty destination ``conductor``; a
``StreamingGraphEdge`` sets ``stream``), ``Sequential`` / ``Parallel`` / ``Loop`` as themselves,
and the topology's ``Connection`` with its chunk policy -> ``graph.streams``. mstar keeps a
node's inputs in a set; the scenario lists them sorted so that an import is the same text every
time. A loop mstar names with a fresh uuid (no ``name=``) gets ``WALK.loopN``, the name our
loader would give it, with a note: its name is not stable across two imports.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from simharness.graph.ir import CLIENT, CONDUCTOR, Edge, Loop, Node, Parallel, Section, Sequential
from simharness.mstar.package import graph_module
from simharness.scenario.model import ChunkPolicySpec

#: mstar's special destinations (``mstar/graph/special_destinations.py``)
EMIT_TO_CLIENT = "emit_to_client"
EMPTY_DESTINATION = ""
#: the attribute on an mstar GraphEdge that carries our Edge (declared) or Signal (ingested)
CARRIES = "_simharness"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# -- ours -> mstar ----------------------------------------------------------------------------


class Carried:
    """Our scenario `Edge`, riding on an mstar GraphEdge. Deep copies share it (mstar deep-copies
    a worker graph's section per request; the declared edge it stands for is the same)."""

    __slots__ = ("edge",)

    def __init__(self, edge: Edge) -> None:
        self.edge = edge

    def __deepcopy__(self, memo: dict[int, Any]) -> Carried:
        return self


def dest_of(to: str) -> str:
    """mstar's destination for one of ours: ``client`` and ``conductor`` are its special ones."""
    if to == CLIENT:
        return EMIT_TO_CLIENT
    if to == CONDUCTOR:
        return EMPTY_DESTINATION
    return to


def _graph_edge(g: Any, edge: Edge, streams: Mapping[str, str] | None = None) -> Any:
    target = streams.get(edge.name) if streams is not None and edge.stream else None
    if target is not None:
        # A streaming edge, as a model declares it: mstar buffers what it carries on the
        # consumer's worker (StreamBuffer) and gates the consumer by the connection's policy.
        from mstar.streaming.topology import StreamingGraphEdge

        ge = StreamingGraphEdge(next_node=dest_of(edge.to), name=edge.name,
                                target_partition=target)
    else:
        ge = g.GraphEdge(next_node=dest_of(edge.to), name=edge.name, persist=edge.persist,
                         conductor_new_token=edge.new_token)
    setattr(ge, CARRIES, Carried(edge))
    return ge


def to_mstar(section: Section, g: Any | None = None,
             streams: Mapping[str, str] | None = None) -> Any:
    """Build mstar graph objects for one of our sections.

    A loop as written gets no ``_external_inputs`` / ``_loop_back_inputs``: mstar derives them
    from the body. A per-worker-graph copy made by our placement passes its sets explicitly, as
    mstar's placement does. `streams` (edge name -> target partition, for the walk's partition)
    makes each streaming edge an mstar ``StreamingGraphEdge``; without it a streaming edge is
    a plain one (the graph-level runtime routes streams itself).
    """
    g = g or graph_module()
    if isinstance(section, Node):
        return g.GraphNode(name=section.name, input_names=set(section.inputs),
                           outputs=[_graph_edge(g, e, streams) for e in section.outputs],
                           enable_async_scheduling=section.async_scheduling)
    if isinstance(section, Sequential):
        return g.Sequential([to_mstar(s, g, streams) for s in section.sections])
    if isinstance(section, Parallel):
        return g.Parallel([to_mstar(s, g, streams) for s in section.sections])
    assert isinstance(section, Loop)
    return g.Loop(
        section=to_mstar(section.body, g, streams),
        max_iters=section.max_iters,
        outputs=[_graph_edge(g, e, streams) for e in section.outputs],
        name=section.name,
        accumulated_outputs=[_graph_edge(g, e, streams) for e in section.accumulated_outputs],
        _external_inputs=None if section.ext_inputs is None else set(section.ext_inputs),
        _loop_back_inputs=None if section.loop_back is None else set(section.loop_back),
    )


def to_chunk_policy(spec: ChunkPolicySpec) -> Any:
    """A factory of mstar ``ChunkPolicy`` objects for one of our policies (what a model's
    ``Connection.chunk_policy_factory`` is)."""
    from mstar.streaming import chunk_policy as cp

    if spec.kind == "sliding_window":
        return functools.partial(cp.SlidingWindowChunkPolicy, window=spec.window, stride=spec.stride)
    if spec.kind == "left_context":
        return functools.partial(cp.LeftContextChunkPolicy, chunk=spec.chunk, left_context=spec.context)
    if spec.kind == "fixed":
        return functools.partial(cp.FixedChunkPolicy, chunk_size=spec.chunk,
                                 continue_after_done=spec.continue_after_done)
    raise ValueError(f"unknown chunk policy kind {spec.kind!r}")


# -- mstar -> ours ----------------------------------------------------------------------------


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
