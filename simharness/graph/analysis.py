"""Facts about a whole walk that checks and the conductor need.

`WalkFacts` answers: which inputs the conductor must send at the start of a walk (its external
inputs, plus the first-iteration copies of its loops' loop-back inputs), who produces a given
(signal, destination) pair (for the hang report's wait-for chain), and how many forwards each node
runs per pass of the walk when no loop stops early.

The producer graph is a networkx MultiDiGraph: one graph edge per declared output edge, from the
producing node (or from ``conductor`` for what the walk start provides) to the consumer.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from math import prod
from typing import TYPE_CHECKING

from msgspec import Struct

from simharness.graph.derive import SectionIO, loop_back_pairs, section_io
from simharness.graph.ir import (
    CONDUCTOR,
    Loop,
    Node,
    Pair,
    Section,
    enclosing_loops,
    iter_loops,
    iter_nodes,
    nodes_by_name,
)

if TYPE_CHECKING:
    import networkx as nx


class WalkFacts(Struct, frozen=True, dict=True):
    name: str
    root: Section
    #: input names fed by streams from other partitions (never sent by the conductor)
    stream_inputs: frozenset[str] = frozenset()

    @cached_property
    def nodes(self) -> dict[str, Node]:
        return nodes_by_name(self.root)

    @cached_property
    def loops(self) -> dict[str, Loop]:
        return {lp.name: lp for lp in iter_loops(self.root)}

    @cached_property
    def loops_of(self) -> dict[str, tuple[Loop, ...]]:
        """node -> its enclosing loops, outermost first."""
        return enclosing_loops(self.root)

    @cached_property
    def io(self) -> SectionIO:
        return section_io(self.root)

    @cached_property
    def seeds(self) -> frozenset[Pair]:
        """Loop-back pairs whose first copy nothing in the walk produces before the loop runs.

        mstar models send these themselves (BAGEL's signal-only ``latents``/``time_index``); a
        pair that a node upstream of every loop carrying it also sends gets its first copy from
        that node.
        """
        # A nested loop's pairs are also in every enclosing loop's set (mstar propagates them
        # upward); whether a pair needs a seed depends on the innermost loop that carries it: a
        # node of the outer body *before* the inner loop sends its first copy at every outer
        # iteration. A node after the inner loop that sends the pair back (mstar's
        # test_nested_loops: refiner -> denoiser) runs only once the inner loop has, so the
        # first copy of the first outer iteration must come from the walk's start.
        owner: dict[Pair, Loop] = {}
        for loop in self.loops.values():  # outer loops before the loops they contain
            for p in loop_back_pairs(loop):
                owner[p] = loop
        order = {name: i for i, name in enumerate(self.nodes)}  # declaration order
        # Per loop, once: the pairs some node outside it and declared before it sends.
        fed_before: dict[str, set[Pair]] = {}
        owners = {loop.name for loop in owner.values()}
        for loop in self.loops.values():
            if loop.name not in owners:
                continue
            inside = {n.name for n in iter_nodes(loop.body)}
            start = min(order[n] for n in inside)
            fed_before[loop.name] = {e.pair for n in self.nodes.values()
                                     if n.name not in inside and order[n.name] < start
                                     for e in n.outputs}
        return frozenset(p for p, loop in owner.items() if p not in fed_before[loop.name])

    @cached_property
    def start_inputs(self) -> frozenset[Pair]:
        """Everything the conductor sends when the walk starts (streams feed themselves)."""
        return frozenset(p for p in self.io.ext_inputs | self.seeds if p[0] not in self.stream_inputs)

    @cached_property
    def external_inputs(self) -> frozenset[Pair]:
        """External inputs that are not streams: the client's or an earlier walk's."""
        return frozenset(p for p in self.io.ext_inputs if p[0] not in self.stream_inputs)

    @cached_property
    def producer_graph(self) -> nx.MultiDiGraph:
        # networkx takes longer to import than a small run takes; only hang reports need it.
        import networkx

        g: nx.MultiDiGraph = networkx.MultiDiGraph()
        g.add_nodes_from(self.nodes)
        for node in self.nodes.values():
            for e in node.outputs:
                g.add_edge(node.name, e.to, key=e.name)
        # A loop's declared outputs leave the loop from whichever body node produces that name.
        for loop in self.loops.values():
            body_nodes = [n for n in iter_nodes(loop.body)]
            for out in loop.outputs + loop.accumulated_outputs:
                for n in body_nodes:
                    if any(e.name == out.name for e in n.outputs):
                        g.add_edge(n.name, out.to, key=out.name)
        for name, dest in sorted(self.start_inputs):
            g.add_edge(CONDUCTOR, dest, key=name)
        return g

    def producers(self, name: str, dest: str) -> list[str]:
        """Who can send `name` to `dest` in this walk (``conductor`` for walk-start inputs)."""
        g = self.producer_graph
        if dest not in g:
            return []
        return sorted({src for src, _, key in g.in_edges(dest, keys=True) if key == name})

    def iterations(self, node: str) -> int:
        """Forwards of `node` per pass when every loop runs to ``max_iters``."""
        return prod(lp.max_iters for lp in self.loops_of[node])

    def counter_sequence(self, node: str, iters: Mapping[str, int] | None = None) -> list[int | None]:
        """The innermost loop counter of each forward of one pass, in order.

        `iters` gives a loop's iteration count where it is not `max_iters` (a dynamic loop's
        drawn stop). A node outside every loop has no counter: its one forward records None.
        """
        chain = self.loops_of[node]
        if not chain:
            return [None]

        def n(lp: Loop) -> int:
            return lp.max_iters if iters is None else iters.get(lp.name, lp.max_iters)

        innermost: list[int | None] = list(range(n(chain[-1])))
        return innermost * prod(n(lp) for lp in chain[:-1])
