"""Coverage over the graph, not the code: which layout classes, edge kinds, loop shapes and fault
kinds a campaign exercised.

Two sources per example: the scenario and its layout (static: a loop split over worker graphs on
one rank or over ranks, replicas, walk-scoped groups, nested loops...) and the run itself
(`CoverageObserver`: where routed signals actually went: the same worker graph, a sibling graph,
a peer rank, the client, the conductor). Features are ``area.name`` strings; `UNIVERSE` lists every
one, so a report shows what was never reached as well as what was.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from simharness import events as ev
from simharness.graph.derive import loop_back_pairs, loop_external_inputs
from simharness.graph.ir import CLIENT, CONDUCTOR, Loop, Node, Parallel, Section, Sequential, iter_loops
from simharness.placement.layout import Layout
from simharness.scenario.model import Scenario

UNIVERSE: dict[str, tuple[str, ...]] = {
    "layout": ("single_rank", "multi_rank", "sibling_graphs", "split_loop_sibling",
               "split_loop_peer", "replicas", "walk_scoped", "several_walks", "repeated_walk",
               "shared_node", "parallel", "admission_cap", "concurrent_requests"),
    # TODO(issue 3): "stream" edges, partitions, TP instances.
    "edges": ("same_graph", "sibling_graph", "peer_rank", "self_send", "client", "conductor",
              "stream"),
    "loops": ("self_loop", "multi_member", "parallel_body", "nested", "external_inputs",
              "seeded_by_conductor", "seeded_upstream", "combiner_reads_state",
              "per_iteration_emit", "single_iteration", "output_to_node", "output_to_client",
              "output_persisted"),
    "faults": ("service_jitter", "link_jitter", "shuffle_ties", "delay", "duplicate", "drop",
               "slow_rank", "crash"),
}


class CoverageObserver:
    """Records the kinds of routes a run took (an observer: it never changes the run)."""

    def __init__(self) -> None:
        self.features: set[str] = set()

    def on_Forward(self, e: ev.Forward) -> None:
        feats = self.features
        for _sig, where in e.routes:
            if where.startswith("local:"):
                feats.add("edges.same_graph" if where[6:] == e.wg else "edges.sibling_graph")
            elif where.startswith("rank:"):
                feats.add("edges.self_send" if int(where[5:]) == e.rank else "edges.peer_rank")
            elif where == CLIENT:
                feats.add("edges.client")
            elif where == CONDUCTOR:
                feats.add("edges.conductor")


def static_features(scenario: Scenario, layout: Layout) -> frozenset[str]:
    out: set[str] = set()
    pl = scenario.placement
    out.add("layout.multi_rank" if pl.num_ranks > 1 else "layout.single_rank")
    if any(len(g.instances) > 1 for g in pl.node_groups):
        out.add("layout.replicas")
    if any(g.graph_walks is not None for g in pl.node_groups):
        out.add("layout.walk_scoped")
    if pl.max_concurrent_requests is not None:
        out.add("layout.admission_cap")
    if any(p.concurrency > 1 for p in scenario.workload):
        out.add("layout.concurrent_requests")
    if len(scenario.walks) > 1:
        out.add("layout.several_walks")
    if any(len(set(k.walks)) < len(k.walks) for k in scenario.requests.values()):
        out.add("layout.repeated_walk")
    seen: Counter[str] = Counter()
    for wf in scenario.walk_facts.values():
        seen.update(list(wf.nodes))
    if any(n > 1 for n in seen.values()):
        out.add("layout.shared_node")
    for walk, root in scenario.walks.items():
        if _has(root, Parallel):
            out.add("layout.parallel")
        wgs = layout.by_walk.get(walk, ())
        for i, a in enumerate(wgs):
            for b in wgs[i + 1:]:
                if set(a.ranks) & set(b.ranks):
                    out.add("layout.sibling_graphs")
        copies: dict[str, list[tuple[int, ...]]] = {}
        for wg in wgs:
            for lp in iter_loops(wg.section):
                copies.setdefault(lp.name, []).append(wg.ranks)
        for ranks in copies.values():
            if len(ranks) > 1:
                shared = any(set(x) & set(y) for i, x in enumerate(ranks) for y in ranks[i + 1:])
                out.add("layout.split_loop_sibling" if shared else "layout.split_loop_peer")
                if len({r for rs in ranks for r in rs}) > 1:
                    out.add("layout.split_loop_peer")
        out |= _loop_features(scenario, walk, root)
    sched = scenario.schedule
    if sched.service_jitter:
        out.add("faults.service_jitter")
    if sched.link_jitter_us:
        out.add("faults.link_jitter")
    if sched.shuffle_ties:
        out.add("faults.shuffle_ties")
    out |= {"faults." + f.kind for f in scenario.faults}
    return frozenset(out)


def _loop_features(scenario: Scenario, walk: str, root: Section) -> set[str]:
    out: set[str] = set()
    wf = scenario.walk_facts[walk]
    for lp in wf.loops.values():
        body_nodes = [n for n in wf.nodes.values() if lp in wf.loops_of[n.name]]
        if isinstance(lp.body, Node):
            out.add("loops.self_loop")
        else:
            out.add("loops.multi_member")
        if _has(lp.body, Parallel):
            out.add("loops.parallel_body")
        if _has(lp.body, Loop):
            out.add("loops.nested")
        if loop_external_inputs(lp):
            out.add("loops.external_inputs")
        pairs = loop_back_pairs(lp)
        if pairs & wf.seeds:
            out.add("loops.seeded_by_conductor")
        if pairs - wf.seeds:
            out.add("loops.seeded_upstream")
        if lp.max_iters == 1:
            out.add("loops.single_iteration")
        if any(e.to == CLIENT for n in body_nodes for e in n.outputs):
            out.add("loops.per_iteration_emit")
        senders = {n.name for n in body_nodes for e in n.outputs if e.pair in pairs}
        if any((e.name, n.name) in pairs for n in body_nodes for e in n.outputs
               if n.name in senders and e.to == n.name) and not isinstance(lp.body, Node):
            out.add("loops.combiner_reads_state")
        for e in lp.outputs:
            out.add("loops.output_persisted" if e.persist else
                    "loops.output_to_client" if e.to == CLIENT else "loops.output_to_node")
    return out


def _has(section: Section, kind: type) -> bool:
    if isinstance(section, kind):
        return True
    if isinstance(section, Sequential | Parallel):
        return any(_has(s, kind) for s in section.sections)
    if isinstance(section, Loop):
        return _has(section.body, kind)
    return False


def summarize(counts: Counter[str], examples: int) -> dict[str, Any]:
    """``{area: {feature: examples}}`` over `UNIVERSE`, plus how many features were reached."""
    out: dict[str, Any] = {}
    reached = 0
    for area, names in UNIVERSE.items():
        out[area] = {n: counts.get(f"{area}.{n}", 0) for n in names}
        reached += sum(1 for n in names if counts.get(f"{area}.{n}", 0))
    total = sum(len(v) for v in UNIVERSE.values())
    out["reached"] = f"{reached}/{total}"
    out["examples"] = examples
    return out

