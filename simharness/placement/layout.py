"""The placement of a scenario: every worker graph of every walk, and where each one runs.

`Layout` is computed once per scenario. A worker graph (WG) belongs to exactly one walk and one
node group; the group's ranks split into lockstep instances (``tp_size * sp_size`` ranks each);
more than one instance means data-parallel replicas, and the conductor picks one per request and
per group, from the seeded ``placement`` random stream, as mstar picks one with
``np.random.randint``.
"""

from __future__ import annotations

from functools import cached_property

from msgspec import Struct

from simharness.graph.divide import divide, group_of_nodes
from simharness.graph.ir import Loop, Node, Section, Sequential, iter_loops, iter_nodes
from simharness.scenario.model import Connection, Scenario


class WorkerGraph(Struct, frozen=True, dict=True):
    id: str
    walk: str
    section: Section
    group: int
    instances: tuple[tuple[int, ...], ...]
    partition: str = "default"

    @cached_property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in iter_nodes(self.section))

    @cached_property
    def ranks(self) -> tuple[int, ...]:
        return tuple(r for inst in self.instances for r in inst)


class Assignment(Struct, frozen=True, dict=True):
    """Where one request's worker graphs run: wg id -> ranks of the chosen instance."""

    wg_ranks: dict[str, tuple[int, ...]]

    @cached_property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted({r for rs in self.wg_ranks.values() for r in rs}))


class Layout(Struct, frozen=True, dict=True):
    scenario: Scenario
    worker_graphs: tuple[WorkerGraph, ...]

    @classmethod
    def build(cls, scenario: Scenario) -> Layout:
        groups = scenario.placement.node_groups
        spec = [(g.node_names, g.graph_walks) for g in groups]
        wgs: list[WorkerGraph] = []
        for walk, root in scenario.walks.items():
            names = [n.name for n in iter_nodes(root)]
            node_group = group_of_nodes(names, walk, spec)
            part = scenario.partition_of.get(walk, "default")
            for i, piece in enumerate(divide(root, node_group, scenario.stream_inputs(walk))):
                g = groups[piece.group]
                wgs.append(WorkerGraph(f"{walk}#{i}", walk, piece.section, piece.group,
                                       g.instances, part))
        return cls(scenario, tuple(wgs))

    @cached_property
    def by_id(self) -> dict[str, WorkerGraph]:
        return {wg.id: wg for wg in self.worker_graphs}

    @cached_property
    def by_walk(self) -> dict[str, tuple[WorkerGraph, ...]]:
        """walk -> its worker graphs, in layout order."""
        return self._grouped("walk")

    @cached_property
    def by_partition(self) -> dict[str, tuple[WorkerGraph, ...]]:
        """partition -> the worker graphs of its walks, in layout order."""
        return self._grouped("partition")

    def _grouped(self, attr: str) -> dict[str, tuple[WorkerGraph, ...]]:
        out: dict[str, list[WorkerGraph]] = {}
        for wg in self.worker_graphs:
            out.setdefault(getattr(wg, attr), []).append(wg)
        return {key: tuple(v) for key, v in out.items()}

    @cached_property
    def wg_of(self) -> dict[tuple[str, str], str]:
        """(walk, node) -> the worker graph that runs that node in that walk."""
        return {(wg.walk, n): wg.id for wg in self.worker_graphs for n in wg.node_names}

    @cached_property
    def dest_wg(self) -> dict[str, dict[str, str]]:
        """walk -> node -> its worker graph: the routing lookup of one output edge."""
        out: dict[str, dict[str, str]] = {}
        for (walk, node), wg in self.wg_of.items():
            out.setdefault(walk, {})[node] = wg
        return out

    @cached_property
    def wgs_on_rank(self) -> dict[int, tuple[WorkerGraph, ...]]:
        """rank -> the worker graphs with an instance on it, in layout order (every rank is a
        key). Built once for all ranks: a rank's runtime must not scan every worker graph."""
        out: dict[int, list[WorkerGraph]] = {r: [] for r in range(self.num_ranks)}
        for wg in self.worker_graphs:
            for r in dict.fromkeys(wg.ranks):
                out.setdefault(r, []).append(wg)
        return {r: tuple(v) for r, v in out.items()}

    @cached_property
    def has_tp(self) -> bool:
        """Some worker graph runs as a lockstep (TP) instance of more than one rank."""
        return any(len(inst) > 1 for wg in self.worker_graphs for inst in wg.instances)

    @cached_property
    def tp_followers(self) -> frozenset[int]:
        """The ranks that follow (are not rank 0) in some lockstep instance of the layout.
        mstar decides it per worker, not per request (``is_tp_follower``, worker.py:294): such
        a rank ignores every conductor REMOVE and waits for a leader's copy."""
        return frozenset(r for wg in self.worker_graphs for inst in wg.instances
                         if len(inst) > 1 for r in inst[1:])

    @cached_property
    def num_ranks(self) -> int:
        return self.scenario.placement.num_ranks

    @cached_property
    def loops_of_wg(self) -> dict[str, frozenset[str]]:
        return {wg.id: frozenset(lp.name for lp in iter_loops(wg.section)) for wg in self.worker_graphs}

    @cached_property
    def stream_routes(self) -> dict[tuple[str, str], tuple[Connection, str, tuple[str, ...]]]:
        """(source partition, edge) -> (connection, consumer node, the consumer's worker graphs).

        mstar routes a streamed item to the worker that hosts the consumer node, whatever walk
        its partition is in (``dest_graph_walk=None``).
        """
        sc = self.scenario
        out = {}
        for conn in sc.connections:
            consumers = sorted({e.to for w in sc.partitions[conn.src] for n in sc.walk_facts[w].nodes.values()
                                for e in n.outputs if e.stream and e.name == conn.edge})
            for consumer in consumers:
                wgs = tuple(wg.id for wg in self.worker_graphs
                            if wg.partition == conn.dst and consumer in wg.node_names)
                out[(conn.src, conn.edge)] = (conn, consumer, wgs)
        return out

    def assign(self, choose_replica) -> Assignment:
        """Pick one instance per node group; `choose_replica(n)` returns an index in range(n)."""
        replica: dict[int, int] = {}
        groups = self.scenario.placement.node_groups
        for gid in sorted({wg.group for wg in self.worker_graphs}):
            n = len(groups[gid].instances)
            replica[gid] = choose_replica(n) if n > 1 else 0
        wg_ranks = {wg.id: wg.instances[replica[wg.group]] for wg in self.worker_graphs}
        return Assignment(wg_ranks)

    def describe(self) -> list[str]:
        """One line per worker graph, for `--verbose` output and docs."""
        out = []
        for wg in self.worker_graphs:
            ranks = " | ".join(",".join(map(str, inst)) for inst in wg.instances)
            out.append(f"{wg.id:<22} group {wg.group}  ranks {ranks:<8} {section_shape(wg.section)}")
        return out


def section_shape(section: Section) -> str:
    """A worker graph's section in one line: ``Loop(denoise: Par[LLM, LLM_cfg_text])``."""
    if isinstance(section, Node):
        return section.name
    if isinstance(section, Loop):
        return f"Loop({section.name}: {section_shape(section.body)})"
    inner = ", ".join(section_shape(s) for s in section.sections)
    return f"{'Seq' if isinstance(section, Sequential) else 'Par'}[{inner}]"
