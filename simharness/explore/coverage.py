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
from simharness.faults import kinds as fault_kinds
from simharness.faults.message import MessageFaultSpec
from simharness.graph.derive import loop_back_pairs, loop_external_inputs
from simharness.graph.ir import (
    CLIENT,
    CONDUCTOR,
    Loop,
    Node,
    Parallel,
    Section,
    Sequential,
    iter_loops,
    iter_nodes,
)
from simharness.placement.layout import Layout
from simharness.scenario.model import ChunkPolicySpec, NodeGroup, Scenario

UNIVERSE: dict[str, tuple[str, ...]] = {
    "layout": ("single_rank", "multi_rank", "sibling_graphs", "split_loop_sibling",
               "split_loop_peer", "replicas", "walk_scoped", "several_walks", "repeated_walk",
               "shared_node", "parallel", "admission_cap", "concurrent_requests"),
    "edges": ("same_graph", "sibling_graph", "peer_rank", "self_send", "client", "conductor",
              "stream"),
    "loops": ("self_loop", "multi_member", "parallel_body", "nested", "external_inputs",
              "seeded_by_conductor", "seeded_upstream", "combiner_reads_state",
              "per_iteration_emit", "single_iteration", "output_to_node", "output_to_client",
              "output_persisted"),
    # the schedule's perturbations, every fault kind (`simharness.faults`), a fault on STOP_LOOPS
    "faults": ("service_jitter", "link_jitter", "shuffle_ties", *(k.name for k in fault_kinds()),
               "stop_loops"),
    # streaming partitions: the chunk policy of each stream, where its producer runs, what the
    # run released (a partial final chunk, empty chunks after the producer was done), a request
    # kind that skips the consumer's partition
    "streams": ("sliding_window", "left_context", "fixed", "fixed_continue", "producer_in_loop",
                "producer_outside_loop", "consumer_loop", "skipped_partition", "final_chunk",
                "partial_final", "empty_chunk", "producer_done"),
    # dynamic loops: a stop rule, counts drawn per request, a stop found here or sent to a peer
    # (STOP_LOOPS), a speculating single-node loop and the overshoot it discards after a stop
    "dynamic": ("stop", "drawn_count", "stop_self", "stop_peer", "split_loop", "speculating",
                "overshoot"),
    # lockstep instances: TP and SP groups, replicas of an instance, a loop on a TP instance fed
    # by a TP1 node, a TP schedule actually followed
    "tp": ("tp_group", "sp_group", "tp_replicas", "tp_loop", "tp_loop_fed_by_tp1", "tp1_and_tp"),
    # KV hand-off: KV-cache nodes, a walk-scoped placement of one (PD), a pull across ranks, a
    # node that ran where pages had to come from elsewhere
    "kv": ("kv_node", "pd_walk_scoped", "pull", "remote_pages"),
}


class CoverageObserver:
    """Records the kinds of routes a run took (an observer: it never changes the run)."""

    def __init__(self, scenario: Scenario | None = None) -> None:
        self.features: set[str] = set()
        #: stream edge -> its chunk policy (to tell a partial final flush from a full chunk)
        self._policies = {c.edge: c.policy for c in scenario.connections} if scenario else {}
        self._popped: set[tuple[str, str]] = set()

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
            elif where.startswith("stream:"):
                feats.add("edges.stream")

    def on_ChunkPopped(self, e: ev.ChunkPopped) -> None:
        feats = self.features
        first = (e.rid, e.edge) not in self._popped
        self._popped.add((e.rid, e.edge))
        if not e.items:
            feats.add("streams.empty_chunk")
        if e.final:
            feats.add("streams.final_chunk")
            spec = self._policies.get(e.edge)
            if spec is not None and e.items and len(e.items) < _window(spec, first):
                feats.add("streams.partial_final")

    def on_ProducerDoneSent(self, e: ev.ProducerDoneSent) -> None:
        self.features.add("streams.producer_done")

    def on_LoopStopped(self, e: ev.LoopStopped) -> None:
        self.features.add("dynamic.stop_peer" if e.by == "peer" else "dynamic.stop_self")

    def on_Overshoot(self, e: ev.Overshoot) -> None:
        self.features.add("dynamic.overshoot")

    def on_KvPulled(self, e: ev.KvPulled) -> None:
        self.features.add("kv.pull")

    def on_KvUsed(self, e: ev.KvUsed) -> None:
        if e.need:
            self.features.add("kv.remote_pages")


def _window(spec: ChunkPolicySpec, first: bool) -> int:
    """How many items a full chunk of `spec` holds (LeftContext's first chunk has no context)."""
    if spec.kind == "sliding_window":
        return spec.window
    if spec.kind == "left_context":
        return spec.chunk if first else spec.chunk + spec.context
    return spec.chunk


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
    if any(isinstance(f, MessageFaultSpec) and f.message == "stop_loops" for f in scenario.faults):
        out.add("faults.stop_loops")
    if scenario.connections:
        out |= _stream_features(scenario)
    out |= _dynamic_features(scenario, layout)
    if any(g.instance_size > 1 for g in pl.node_groups):
        out |= _tp_features(scenario)
    if any(nf.kv_label for nf in scenario.nodes.values()):
        out |= _kv_features(scenario)
    return frozenset(out)


def _stream_features(scenario: Scenario) -> set[str]:
    out: set[str] = set()
    for c in scenario.connections:
        p = c.policy
        out.add("streams.fixed_continue" if p.continue_after_done else "streams." + p.kind)
    for wf in scenario.walk_facts.values():
        for n in wf.nodes.values():
            if any(e.stream for e in n.outputs):
                out.add("streams.producer_in_loop" if wf.loops_of[n.name]
                        else "streams.producer_outside_loop")
            if n.name in wf.nodes and set(n.inputs) & wf.stream_inputs and wf.loops_of[n.name]:
                out.add("streams.consumer_loop")
    for kind in scenario.requests.values():
        if any(c.src in kind.partitions and c.dst not in kind.partitions
               for c in scenario.connections):
            out.add("streams.skipped_partition")
    return out


def _dynamic_features(scenario: Scenario, layout: Layout) -> set[str]:
    out: set[str] = set()
    for walk, wf in scenario.walk_facts.items():
        for lp in wf.loops.values():
            if lp.stop is None:
                continue
            out.add("dynamic.stop")
            body = lp.body
            if isinstance(body, Node) and body.async_scheduling and all(
                    (i, body.name) in {e.pair for e in body.outputs} for i in body.inputs):
                out.add("dynamic.speculating")
            copies = [wg for wg in layout.by_walk.get(walk, ())
                      if any(x.name == lp.name for x in iter_loops(wg.section))]
            if len(copies) > 1:
                out.add("dynamic.split_loop")
    if any(d.low < d.high for k in scenario.requests.values() for d in k.stops.values()):
        out.add("dynamic.drawn_count")
    return out


def _group_of(scenario: Scenario, node: str, walk: str) -> NodeGroup | None:
    """The node group that places `node` in `walk`: the last one listing it for that walk."""
    found = None
    for g in scenario.placement.node_groups:
        if node in g.node_names and (g.graph_walks is None or walk in g.graph_walks):
            found = g
    return found


def _tp_features(scenario: Scenario) -> set[str]:
    out: set[str] = set()
    for g in scenario.placement.node_groups:
        if g.instance_size > 1:
            out.add("tp.sp_group" if g.sp_size > 1 else "tp.tp_group")
            if len(g.instances) > 1:
                out.add("tp.tp_replicas")
    for walk, wf in scenario.walk_facts.items():
        size = {n: (grp.instance_size if (grp := _group_of(scenario, n, walk)) else 1) for n in wf.nodes}
        if len(set(size.values()) & {1}) and any(v > 1 for v in size.values()):
            out.add("tp.tp1_and_tp")
        for lp in wf.loops.values():
            body = {n.name for n in iter_nodes(lp.body)}
            if not any(size[n] > 1 for n in body):
                continue
            out.add("tp.tp_loop")
            if any(size[n.name] == 1 and any(e.to in body for e in n.outputs)
                   for n in wf.nodes.values() if n.name not in body):
                out.add("tp.tp_loop_fed_by_tp1")
    return out


def _kv_features(scenario: Scenario) -> set[str]:
    out = {"kv.kv_node"}
    for node, nf in scenario.nodes.items():
        if not nf.kv_label:
            continue
        walks = [w for w, wf in scenario.walk_facts.items() if node in wf.nodes]
        groups = {id(_group_of(scenario, node, w)) for w in walks}
        if len(groups) > 1:
            out.add("kv.pd_walk_scoped")
    return out


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

