"""The graph IR: nodes, edges and the three containers mstar composes them with.

A *walk* (mstar: graph walk) is one section tree built from `Node`, `Sequential`, `Parallel` and
`Loop`. Everything here is immutable; the per-request mutable state lives in
`simharness.runtime.graph_state`. Each object remembers the scenario key path it was read from
(`path`), so later validation errors can point at the exact key. Paths do not take part in
equality.

Destinations: a node name, `CLIENT` (mstar ``EMIT_TO_CLIENT``) or `CONDUCTOR` (mstar's empty
destination, used with ``persist`` to hand a tensor to the conductor).
"""

from __future__ import annotations

from collections.abc import Iterator

from msgspec import Struct

from simharness.records import compared_without

CLIENT = "client"
CONDUCTOR = "conductor"
SPECIAL_DESTINATIONS = frozenset({CLIENT, CONDUCTOR})

#: A (signal name, destination node) pair: mstar's ``NameAndDest``.
Pair = tuple[str, str]


@compared_without("path")
class Edge(Struct, frozen=True):
    """A declared output edge of a node (mstar ``GraphEdge`` without tensors)."""

    name: str
    to: str
    persist: bool = False
    new_token: bool = False
    #: a streaming edge: it feeds the StreamBuffer of a node in another partition
    stream: bool = False
    path: str = ""

    @property
    def pair(self) -> Pair:
        return (self.name, self.to)


@compared_without("path")
class Node(Struct, frozen=True):
    """A graph node: ready when every input name has arrived (readiness is by name)."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[Edge, ...]
    async_scheduling: bool = True
    path: str = ""


@compared_without("path")
class Sequential(Struct, frozen=True):
    sections: tuple[Section, ...]
    path: str = ""


@compared_without("path")
class Parallel(Struct, frozen=True):
    sections: tuple[Section, ...]
    path: str = ""


class StopRule(Struct, frozen=True):
    """A dynamic loop: it ends on the iteration after which a body node's ``check_stop`` says so.

    `by` names the nodes whose ``check_stop`` reads the loop counter (None: every node of the
    body); the number of iterations is drawn per request (``graph.requests.KIND.stops``). The
    other copies of a split loop learn of the stop from STOP_LOOPS messages.
    """

    by: tuple[str, ...] | None = None


@compared_without("path")
class Loop(Struct, frozen=True):
    """A loop over `body`, at most `max_iters` iterations.

    `ext_inputs` and `loop_back` are None for a loop as written: they are then derived from the
    body exactly as mstar derives ``_external_inputs`` / ``_loop_back_inputs``. Per-worker copies
    made by placement set them explicitly (every copy carries the *whole* loop-back set).
    """

    name: str
    max_iters: int
    body: Section
    outputs: tuple[Edge, ...] = ()
    accumulated_outputs: tuple[Edge, ...] = ()
    stop: StopRule | None = None
    ext_inputs: frozenset[Pair] | None = None
    loop_back: frozenset[Pair] | None = None
    path: str = ""


Section = Node | Sequential | Parallel | Loop


def children(section: Section) -> tuple[Section, ...]:
    if isinstance(section, Sequential | Parallel):
        return section.sections
    if isinstance(section, Loop):
        return (section.body,)
    return ()


def iter_nodes(section: Section) -> Iterator[Node]:
    """Every node in the section, in declaration order."""
    if isinstance(section, Node):
        yield section
        return
    for child in children(section):
        yield from iter_nodes(child)


def iter_loops(section: Section) -> Iterator[Loop]:
    """Every loop in the section, outer loops before the loops they contain."""
    if isinstance(section, Loop):
        yield section
    for child in children(section):
        yield from iter_loops(child)


def nodes_by_name(section: Section) -> dict[str, Node]:
    return {node.name: node for node in iter_nodes(section)}


def enclosing_loops(section: Section) -> dict[str, tuple[Loop, ...]]:
    """For each node, the loops around it from outermost to innermost."""
    out: dict[str, tuple[Loop, ...]] = {}

    def visit(sec: Section, chain: tuple[Loop, ...]) -> None:
        if isinstance(sec, Node):
            out[sec.name] = chain
        elif isinstance(sec, Loop):
            visit(sec.body, (*chain, sec))
        else:
            for child in children(sec):
                visit(child, chain)

    visit(section, ())
    return out
