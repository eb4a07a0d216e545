"""What mstar refuses of a placement's lockstep (TP/SP) groups at start-up: the conductor's
checks and the worker's, both refused here (`check_lockstep_groups`).

mstar makes one sharding group of every node group whose instance spans several ranks
(``tp_size * sp_size > 1``, ``model/base.py`` ``get_sharding_config``) and, before any worker
starts, checks them against the worker graphs (``conductor/conductor.py``, the block after
"Assert that streaming consumers don't have graph-walk-specific sharding config"):

* a lockstep group that includes a streaming consumer (a node with an input fed by a stream, in
  any walk) may not name ``graph_walks``: a ``RuntimeError``;
* every worker graph that a lockstep group's nodes run in, in the walks the group covers, must be
  that group's own: one sharding group per worker graph, and the worker graph's instance size
  equal to the group's (two ``assert``\\ s). A later node group that lists the same node for one
  of those walks takes the node there (the last group that lists a node for a walk places it),
  so the lockstep group would claim a worker graph another group placed.

A layout mstar refuses never runs there, so a finding on it would be about nothing: the loader
refuses it the same way, naming the group, so that neither a user's scenario nor a generated
one is simulated as if mstar accepted it.

Each worker then refuses to hold more than one lockstep-parallel node (``worker/worker.py``:
"at most one lockstep-parallel node per worker"; a node is lockstep-parallel when its instance
spans several ranks, and the worker counts node names, so one node in two walks is one). The
loader refuses that too, naming the group that brings a rank its second such node.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

from simharness import fields as f
from simharness.errors import ScenarioError
from simharness.graph.analysis import WalkFacts
from simharness.graph.divide import group_of_nodes
from simharness.scenario.model import NodeGroup


class Refusal(NamedTuple):
    """The first lockstep group mstar would refuse: its index, the key under it that is wrong
    ("" for the group itself) and why."""

    group: int
    key: str
    message: str


def check_lockstep_groups(groups: Sequence[NodeGroup], facts: Mapping[str, WalkFacts],
                          groups_path: str) -> None:
    """Raise a `ScenarioError` at the `first_refusal`."""
    nodes_of = {walk: wf.nodes.keys() for walk, wf in facts.items()}
    refusal = first_refusal(groups, nodes_of, streaming_consumers(facts), groups_path)
    if refusal is not None:
        path = groups[refusal.group].path or f.join(groups_path, refusal.group)
        raise ScenarioError(f.join(path, refusal.key) if refusal.key else path, refusal.message)


def first_refusal(groups: Sequence[NodeGroup], nodes_of: Mapping[str, Collection[str]],
                  consumers: Collection[str], groups_path: str = "node_groups") -> Refusal | None:
    """What mstar refuses first of `groups` at start-up, given each walk's node names
    (`nodes_of`) and the streaming consumers: a lockstep group its conductor refuses, else the
    group that gives a rank a second lockstep-parallel node, which that rank's worker refuses
    (`second_lockstep_node`); None when mstar accepts them all. The loader and the generator
    both ask this, so a rule added here holds for both."""
    return (_conductor_refusal(groups, nodes_of, consumers, groups_path)
            or second_lockstep_node(groups, nodes_of, groups_path))


def _conductor_refusal(groups: Sequence[NodeGroup], nodes_of: Mapping[str, Collection[str]],
                       consumers: Collection[str], groups_path: str) -> Refusal | None:
    """The first lockstep group of `groups` that mstar's conductor refuses."""
    spec = [(g.node_names, g.graph_walks) for g in groups]
    for i, g in enumerate(groups):
        if g.instance_size == 1:
            continue
        if g.graph_walks is not None:
            fed = [n for n in g.node_names if n in consumers]
            if fed:
                return Refusal(i, "graph_walks", (
                    f"this lockstep group (tp_size*sp_size = {g.instance_size}) includes the "
                    f"streaming consumer {fed[0]!r} and names graph_walks; mstar's conductor "
                    f"refuses custom graph walks for a TP group with a streaming consumer "
                    f"(drop graph_walks, or place {fed[0]!r} in a group of its own)"))
        for walk in (g.graph_walks if g.graph_walks is not None else nodes_of):
            names = [n for n in g.node_names if n in nodes_of[walk]]
            placer = group_of_nodes(names, walk, spec)
            for node in names:
                j = placer[node]
                if j != i and not _same_sharding_group(g, groups[j]):
                    return Refusal(i, "", (
                        f"this lockstep group (tp_size*sp_size = {g.instance_size}) lists "
                        f"{node!r}, which {groups[j].path or f.join(groups_path, j)} places in "
                        f"walk {walk!r} (the last group that lists a node for a walk places it "
                        f"there); mstar's conductor refuses a worker graph that is not its "
                        f"lockstep group's own (one sharding group per worker graph, of the "
                        f"group's instance size): name graph_walks on one of the two groups so "
                        f"that they do not overlap"))
    return None


def second_lockstep_node(groups: Sequence[NodeGroup], nodes_of: Mapping[str, Collection[str]],
                         groups_path: str = "node_groups") -> Refusal | None:
    """The first group (in layout order) that gives some rank a second lockstep-parallel node,
    which mstar's worker refuses at start-up; None when every rank runs at most one.

    A node is lockstep-parallel on the ranks of the group that places it in some walk (the last
    group that lists it for the walk) when that group's instance spans several ranks. The
    worker collects its nodes by name over all its worker graphs, so one node in several walks
    is one node."""
    spec = [(g.node_names, g.graph_walks) for g in groups]
    #: (group index, node, rank) for every placement of a lockstep-parallel node
    placed: set[tuple[int, str, int]] = set()
    for walk, names in nodes_of.items():
        for node, gi in group_of_nodes(list(names), walk, spec).items():
            if groups[gi].instance_size > 1:
                placed.update((gi, node, r) for r in groups[gi].ranks)
    first_on: dict[int, tuple[str, int]] = {}  # rank -> its first lockstep node, and whose
    for gi, node, rank in sorted(placed):
        held = first_on.setdefault(rank, (node, gi))
        if held[0] != node:
            other, oi = held
            where = "this group" if oi == gi else groups[oi].path or f.join(groups_path, oi)
            return Refusal(gi, "", (
                f"rank {rank} would run two lockstep-parallel nodes: {other!r} (from {where}) "
                f"and {node!r} (tp_size*sp_size = {groups[gi].instance_size}); mstar's worker "
                f"allows at most one lockstep-parallel node per worker and refuses this at "
                f"start-up: place them on different ranks, or one of them without tp_size/sp_size"))
    return None


def streaming_consumers(facts: Mapping[str, WalkFacts]) -> frozenset[str]:
    """Names of the nodes that take a stream's chunks in some walk (mstar ``consumes_stream``,
    collected by name over every worker graph, as the conductor does)."""
    return frozenset(node.name for wf in facts.values() if wf.stream_inputs
                     for node in wf.nodes.values() if wf.stream_inputs.intersection(node.inputs))


def _same_sharding_group(a: NodeGroup, b: NodeGroup) -> bool:
    """Whether mstar sees one sharding group in both: its key is the sorted node names and
    walks, and the worker graph's instance size is checked against the group's."""
    walks_a = None if a.graph_walks is None else frozenset(a.graph_walks)
    walks_b = None if b.graph_walks is None else frozenset(b.graph_walks)
    return (frozenset(a.node_names) == frozenset(b.node_names) and walks_a == walks_b
            and a.instance_size == b.instance_size)
