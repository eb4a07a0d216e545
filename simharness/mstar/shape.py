"""The shape of a walk, as two spellings of the same mstar graph share it.

`walk_shape` reduces a walk to what mstar's graph code acts on, so that a hand-written scenario
can be held equal to the walks imported from mstar's model code:

* a node: its name, its input *set* (mstar keeps a set), its output edges as a multiset, and
  whether it allows async scheduling;
* an edge to ``client`` with ``persist`` is the same as two edges, one to ``client`` and one
  to ``conductor`` with ``persist`` (mstar routes it both ways; a scenario may spell it either way);
* a loop: its iteration bound, body and declared outputs; *not* its name (mstar leaves most
  loops unnamed, and the importer names them ``WALK.loopN``) nor its ``stop`` rule (no graph
  says which loops end at EOS: that is a node's ``check_stop``);
* sequential and parallel sections: their parts in order; one with a single part is that part
  (mstar's Talker walks wrap a lone node in ``Sequential``; registries and loop sets are the same).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from simharness.graph.ir import CLIENT, CONDUCTOR, Edge, Loop, Node, Parallel, Section, Sequential
from simharness.wording import plural


def edges_shape(edges: tuple[Edge, ...]) -> tuple[Any, ...]:
    out: Counter[tuple[Any, ...]] = Counter()
    for e in edges:
        if e.to == CLIENT and e.persist:
            out[(e.name, CLIENT, False, e.new_token, e.stream)] += 1
            out[(e.name, CONDUCTOR, True, e.new_token, e.stream)] += 1
        else:
            out[(e.name, e.to, e.persist, e.new_token, e.stream)] += 1
    return tuple(sorted(out.items()))


def _unwrap(section: Section) -> Section:
    while isinstance(section, Sequential | Parallel) and len(section.sections) == 1:
        section = section.sections[0]
    return section


def walk_shape(section: Section) -> tuple[Any, ...]:
    section = _unwrap(section)
    if isinstance(section, Node):
        return ("node", section.name, tuple(sorted(section.inputs)), edges_shape(section.outputs),
                section.async_scheduling)
    if isinstance(section, Sequential | Parallel):
        kind = "sequential" if isinstance(section, Sequential) else "parallel"
        return (kind, tuple(walk_shape(s) for s in section.sections))
    assert isinstance(section, Loop)
    return ("loop", section.max_iters, walk_shape(section.body), edges_shape(section.outputs),
            edges_shape(section.accumulated_outputs))


def shape_differences(mine: Section, theirs: Section, path: str = "") -> list[str]:
    """Where two walks' shapes differ, as readable lines (empty: the same walk)."""
    mine, theirs = _unwrap(mine), _unwrap(theirs)
    a, b = walk_shape(mine), walk_shape(theirs)
    if a == b:
        return []
    if type(mine) is not type(theirs):
        return [f"{path or 'walk'}: {type(mine).__name__} here, {type(theirs).__name__} in mstar"]
    if isinstance(mine, Node):
        return [f"{path or 'walk'}: node {mine.name}: {a[1:]} here, {b[1:]} in mstar"]
    if isinstance(mine, Loop):
        assert isinstance(theirs, Loop)
        out = []
        if mine.max_iters != theirs.max_iters:
            out.append(f"{path}: loop {mine.name} runs {plural(mine.max_iters, 'iteration')} here, "
                       f"{theirs.max_iters} in mstar")
        if a[3:] != b[3:]:
            out.append(f"{path}: loop {mine.name}: outputs {a[3:]} here, {b[3:]} in mstar")
        return out + shape_differences(mine.body, theirs.body, f"{path}.body")
    assert isinstance(mine, Sequential | Parallel) and isinstance(theirs, Sequential | Parallel)
    if len(mine.sections) != len(theirs.sections):
        return [f"{path or 'walk'}: {plural(len(mine.sections), 'part')} here, "
                f"{len(theirs.sections)} in mstar"]
    out = []
    for i, (x, y) in enumerate(zip(mine.sections, theirs.sections, strict=True)):
        out += shape_differences(x, y, f"{path}[{i}]")
    return out
