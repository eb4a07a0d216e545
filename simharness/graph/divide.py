"""Split one walk into worker graphs, the way mstar's ``_divide_into_worker_graphs`` does.

Rules (reference/mstar_semantics.md section 3.2), restated:

* a node becomes one piece owned by its node group;
* in a sequence, the first piece of a later part merges into the last piece so far when both
  belong to the *same node group index* (not merely the same rank) and the new piece does not
  consume a stream; two groups on one rank therefore give sibling worker graphs;
* in a parallel section, members that produced exactly one non-streaming piece are merged per
  group (in first-seen order) and listed first, followed by the other members' pieces; that order
  decides what the enclosing sequence compares against;
* a loop divides its body and wraps **each** piece in a copy of the loop with the same name and
  ``max_iters``, the original external inputs (minus stream inputs) and the *whole* original
  loop-back set; a copy keeps only the declared outputs its own piece produces.

The last rule is why every copy of a split loop knows every loop-back pair, and why a runtime
that resolves those pairs per worker graph (the Rust runtime before its fix) misses some.
"""

from __future__ import annotations

from msgspec import Struct

from simharness.graph.derive import loop_back_pairs, loop_external_inputs, produced_names
from simharness.graph.ir import Loop, Node, Parallel, Section, Sequential


class Piece(Struct, frozen=True):
    section: Section
    group: int
    consumes_stream: bool = False


def group_of_nodes(
    node_names: list[str], walk: str, groups: list[tuple[tuple[str, ...], tuple[str, ...] | None]]
) -> dict[str, int]:
    """node -> index of the *last* group that lists it and applies to `walk` (mstar's rule)."""
    wanted = set(node_names)
    last: dict[str, int] = {}
    for idx, (names, walks) in enumerate(groups):
        if walks is None or walk in walks:
            for node in names:
                if node in wanted:
                    last[node] = idx  # a later group overrides an earlier one
    return {node: last[node] for node in node_names if node in last}


def divide(
    section: Section, node_group: dict[str, int], stream_inputs: frozenset[str] = frozenset()
) -> list[Piece]:
    if isinstance(section, Node):
        consumes = bool(stream_inputs & set(section.inputs))
        return [Piece(section, node_group[section.name], consumes)]
    if isinstance(section, Sequential):
        pieces = divide(section.sections[0], node_group, stream_inputs)
        for part in section.sections[1:]:
            new = divide(part, node_group, stream_inputs)
            if new[0].group == pieces[-1].group and not new[0].consumes_stream:
                last = pieces[-1]
                pieces[-1] = Piece(_combine(last.section, new[0].section, Sequential), last.group,
                                   last.consumes_stream)
                new = new[1:]
            pieces.extend(new)
        return pieces
    if isinstance(section, Parallel):
        per_member = [divide(part, node_group, stream_inputs) for part in section.sections]
        merged: dict[int, Piece] = {}
        rest: list[Piece] = []
        for pieces in per_member:
            if len(pieces) == 1 and not pieces[0].consumes_stream:
                p = pieces[0]
                if p.group in merged:
                    q = merged[p.group]
                    merged[p.group] = Piece(_combine(q.section, p.section, Parallel), q.group)
                else:
                    merged[p.group] = p
        for pieces in per_member:
            if len(pieces) > 1 or pieces[0].consumes_stream:
                rest.extend(pieces)
        return list(merged.values()) + rest
    return _divide_loop(section, node_group, stream_inputs)


def _divide_loop(loop: Loop, node_group: dict[str, int], stream_inputs: frozenset[str]) -> list[Piece]:
    ext = frozenset(p for p in loop_external_inputs(loop) if p[0] not in stream_inputs)
    back = loop_back_pairs(loop)
    out = []
    for piece in divide(loop.body, node_group, stream_inputs):
        produced = produced_names(piece.section)
        copy = Loop(
            name=loop.name,
            max_iters=loop.max_iters,
            body=piece.section,
            outputs=tuple(e for e in loop.outputs if e.name in produced),
            accumulated_outputs=tuple(e for e in loop.accumulated_outputs if e.name in produced),
            stop=loop.stop,
            ext_inputs=ext,
            loop_back=back,
            path=loop.path,
        )
        out.append(Piece(copy, piece.group, piece.consumes_stream))
    return out


def _combine(a: Section, b: Section, cls: type[Sequential] | type[Parallel]) -> Section:
    """mstar's ``_combine_sections_sequential_or_parallel``: flatten into one container."""
    a_parts = a.sections if isinstance(a, cls) else (a,)
    b_parts = b.sections if isinstance(b, cls) else (b,)
    path = a.path if isinstance(a, cls) else (b.path if isinstance(b, cls) else "")
    return cls(a_parts + b_parts, path=path)
