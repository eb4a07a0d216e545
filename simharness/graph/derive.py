"""Derived I/O facts of a section, computed the way mstar computes them.

mstar derives a loop's external inputs and loop-back inputs from its body at construction time
(``GraphSection.get_inputs_outputs``, reference/mstar_semantics.md section 1.3). The rules,
restated:

* a node's loop-back pairs are its self edges; its external inputs are the other inputs; its
  external outputs are its non-self edges;
* a sequential section walks its parts in order: an output that an accumulated input consumes is
  internal; an output whose destination is a node in an *earlier* part is a loop-back pair;
  internal and loop-back pairs leave both the input and output sets;
* a parallel section treats a pair as internal only when one member produces it and a member
  consumes it;
* a loop keeps its body's inputs and loop-back pairs; its external outputs are its declared
  outputs plus accumulated outputs.

Getting these sets exactly right matters: which pairs a loop drops at its last iteration is the
subject of the loop-exit bug family.
"""

from __future__ import annotations

from msgspec import Struct

from simharness.graph.ir import (
    Edge,
    Loop,
    Node,
    Pair,
    Parallel,
    Section,
    Sequential,
    iter_nodes,
)


class SectionIO(Struct, frozen=True):
    ext_inputs: frozenset[Pair]
    ext_outputs: tuple[Edge, ...]
    loop_back: frozenset[Pair]


def section_io(section: Section) -> SectionIO:
    """mstar's ``get_inputs_outputs`` for any section."""
    if isinstance(section, Node):
        return _node_io(section)
    if isinstance(section, Sequential):
        return _sequential_io(section)
    if isinstance(section, Parallel):
        return _parallel_io(section)
    body = section_io(section.body)
    return SectionIO(
        ext_inputs=body.ext_inputs,
        ext_outputs=section.outputs + section.accumulated_outputs,
        loop_back=body.loop_back,
    )


def _node_io(node: Node) -> SectionIO:
    loop_back = frozenset(e.pair for e in node.outputs if e.to == node.name)
    return SectionIO(
        ext_inputs=frozenset((i, node.name) for i in node.inputs if (i, node.name) not in loop_back),
        ext_outputs=tuple(e for e in node.outputs if e.to != node.name),
        loop_back=loop_back,
    )


def _sequential_io(seq: Sequential) -> SectionIO:
    nodes_so_far: set[str] = set()
    ext_outputs: list[Edge] = []
    ext_inputs: set[Pair] = set()
    loop_back: set[Pair] = set()
    internal: set[Pair] = set()
    for part in seq.sections:
        io = section_io(part)
        loop_back |= io.loop_back
        ext_inputs |= io.ext_inputs
        ext_outputs.extend(io.ext_outputs)
        internal |= {e.pair for e in ext_outputs if e.pair in ext_inputs}
        # A part sending to a node of an earlier part closes a cycle: that is a loop-back edge.
        loop_back |= {e.pair for e in io.ext_outputs if e.to in nodes_so_far}
        removed = internal | loop_back
        ext_outputs = [e for e in ext_outputs if e.pair not in removed]
        ext_inputs -= removed
        nodes_so_far.update(n.name for n in iter_nodes(part))
    return SectionIO(frozenset(ext_inputs), tuple(ext_outputs), frozenset(loop_back))


def _parallel_io(par: Parallel) -> SectionIO:
    ios = [section_io(part) for part in par.sections]
    produced = {e.pair for io in ios for e in io.ext_outputs}
    consumed = {pair for io in ios for pair in io.ext_inputs}
    internal = produced & consumed
    loop_back: set[Pair] = set()
    ext_inputs: set[Pair] = set()
    ext_outputs: list[Edge] = []
    for io in ios:
        loop_back |= io.loop_back
        ext_inputs |= io.ext_inputs - internal
        ext_outputs.extend(e for e in io.ext_outputs if e.pair not in internal)
    return SectionIO(frozenset(ext_inputs), tuple(ext_outputs), frozenset(loop_back))


def loop_external_inputs(loop: Loop) -> frozenset[Pair]:
    """mstar ``Loop._external_inputs``: set explicitly on per-worker copies, else derived."""
    if loop.ext_inputs is not None:
        return loop.ext_inputs
    return section_io(loop.body).ext_inputs


def loop_back_pairs(loop: Loop) -> frozenset[Pair]:
    """mstar ``Loop._loop_back_inputs``: the pairs a loop must drop at its last iteration."""
    if loop.loop_back is not None:
        return loop.loop_back
    return section_io(loop.body).loop_back


def produced_names(section: Section) -> frozenset[str]:
    """Names a (piece of a) loop body can hand to the loop's declared outputs.

    mstar's ``Loop.__post_init__`` keeps only declared outputs whose name is an external output
    or a loop-back name of the body; per-worker copies drop the rest this way.
    """
    io = section_io(section)
    return frozenset(e.name for e in io.ext_outputs) | frozenset(n for n, _ in io.loop_back)
