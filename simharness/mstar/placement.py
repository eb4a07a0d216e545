"""mstar's own division of walks into worker graphs, checked against our `Layout`.

The ``mstar`` runtime (`simharness.mstar.runtime`) divides each walk with mstar's
``Model._get_worker_graphs_for_graph_walk`` when ``mstar.model.base`` imports, and matches the
pieces against the layout the drivers run: shape, node group, and each loop copy's external
inputs, loop-back inputs and kept outputs. A difference stops the run (`PlacementMismatch`).
"""

from __future__ import annotations

from typing import Any

from simharness.graph.derive import loop_back_pairs, loop_external_inputs
from simharness.graph.ir import Section, iter_loops
from simharness.mstar.convert import dest_of, to_mstar
from simharness.mstar.package import graph_module
from simharness.placement.layout import Layout, section_shape
from simharness.wording import plural


class PlacementMismatch(RuntimeError):
    """mstar's division of a walk differs from the `Layout` our drivers run."""


def mstar_shape(section: Any, g: Any | None = None) -> str:
    """The same one-line shape `Layout.describe` prints, for an mstar section."""
    g = g or graph_module()
    if isinstance(section, g.GraphNode):
        return section.name
    if isinstance(section, g.Loop):
        return f"Loop({section.name}: {mstar_shape(section.section, g)})"
    inner = ", ".join(mstar_shape(s, g) for s in section.sections)
    return f"{'Seq' if isinstance(section, g.Sequential) else 'Par'}[{inner}]"


class _Part:
    __slots__ = ("name", "graph_walks")

    def __init__(self, name: str, walks: tuple[str, ...]) -> None:
        self.name = name
        self.graph_walks = set(walks)


class _Conn:
    __slots__ = ("from_partition", "to_partition", "edge_name")

    def __init__(self, src: str, dst: str, edge: str) -> None:
        self.from_partition = src
        self.to_partition = dst
        self.edge_name = edge


class _ModelShape:
    """Stands in for a Model when calling mstar's per-walk division: the scenario's partitions
    and stream connections, which is all that method reads of the model."""

    def __init__(self, layout: Layout) -> None:
        sc = layout.scenario
        self._parts = [_Part(name, walks) for name, walks in sc.partitions.items()]
        self.connections = [_Conn(c.src, c.dst, c.edge) for c in sc.connections]

    def get_partitions(self) -> list[Any]:
        return self._parts

    def get_partition_topology(self) -> _ModelShape:
        return self


def mstar_worker_graphs(layout: Layout, model_cls: Any) -> dict[str, Any]:
    """Divide every walk with mstar's own code; return our worker graph id -> mstar section.

    Each walk is converted whole (so mstar derives each loop's sets), divided by
    ``Model._get_worker_graphs_for_graph_walk`` (mstar's node-group rule, then
    ``_divide_into_worker_graphs``), and matched piece by piece against our layout.
    """
    g = graph_module()
    groups = [{"node_names": list(ng.node_names), "ranks": list(ng.ranks),
               "tp_size": ng.tp_size, "sp_size": ng.sp_size,
               **({} if ng.graph_walks is None else {"graph_walks": list(ng.graph_walks)})}
              for ng in layout.scenario.placement.node_groups]
    out: dict[str, Any] = {}
    shape = _ModelShape(layout)
    for walk, root in layout.scenario.walks.items():
        theirs = model_cls._get_worker_graphs_for_graph_walk(shape, walk, to_mstar(root, g), groups)
        ours = layout.by_walk.get(walk, ())
        if len(theirs) != len(ours):
            raise PlacementMismatch(
                f"walk {walk!r}: mstar divides it into {plural(len(theirs), 'worker graph')} "
                f"({'; '.join(mstar_shape(w.section, g) for w in theirs)}), simharness into "
                f"{len(ours)} ({'; '.join(w.id for w in ours)})")
        for mine, real in zip(ours, theirs, strict=True):
            check_same_worker_graph(mine.id, mine.section, mine.group, real.section,
                                    real._group_id, g)
            out[mine.id] = real.section
    return out


def check_same_worker_graph(wg_id: str, ours: Section, group: int, theirs: Any, their_group: int,
                            g: Any | None = None) -> None:
    """Raise `PlacementMismatch` unless an mstar worker graph matches ours: shape, node group,
    and for every loop copy its external inputs, loop-back inputs and kept outputs."""
    g = g or graph_module()
    problems = []
    if section_shape(ours) != mstar_shape(theirs, g):
        problems.append(f"shape {mstar_shape(theirs, g)} (simharness: {section_shape(ours)})")
    if group != their_group:
        problems.append(f"node group {their_group} (simharness: {group})")
    our_loops = {lp.name: lp for lp in iter_loops(ours)}
    for name, lp in theirs.get_loops().items():
        mine = our_loops.get(name)
        if mine is None:
            continue
        for what, real, model in (
            ("external inputs", set(lp._external_inputs), set(loop_external_inputs(mine))),
            ("loop-back inputs", set(lp._loop_back_inputs), set(loop_back_pairs(mine))),
            ("outputs", [(e.name, e.next_node) for e in lp.outputs + lp.accumulated_outputs],
             [(e.name, dest_of(e.to)) for e in mine.outputs + mine.accumulated_outputs]),
        ):
            if real != model:
                problems.append(f"loop {name!r} {what} {sorted(real)} (simharness: {sorted(model)})")
    if problems:
        raise PlacementMismatch(f"worker graph {wg_id}: mstar's placement gives " + "; ".join(problems))


