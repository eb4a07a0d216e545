"""Validation passes over the frozen `Scenario`: the loader's third pass.

The section parsers have checked each section on its own. These passes check what needs the whole
scenario, and each raises a `ScenarioError` naming the key path of the offending part:

* `check_walk_edges`: every edge reaches a node of its walk and one of that node's inputs;
* `check_cycles`: the graph of a walk has no cycle outside a loop (mstar would wait forever on
  such an input: an impossible graph, not a runtime bug), self-edges outside loops included;
* `check_stream_edges`: streams are declared, produced by some node and feed one consumer;
* `check_inputs_are_sent`: every input some walk of a request needs comes from somewhere;
* `check_workload`: the workload submits at least one request;
* `check_cost`: the run's size (ranks, requests, node forwards) is estimated up front and refused
  above a limit unless the user allows a large run (``--allow-large``).

Walk facts are the scenario's own (`Scenario.walk_facts`), computed once.
"""

from __future__ import annotations

import graphlib

from msgspec import Struct

from simharness import fields as f
from simharness.errors import ScenarioError
from simharness.graph.analysis import WalkFacts
from simharness.graph.ir import SPECIAL_DESTINATIONS, Edge, Node, iter_nodes
from simharness.scenario.model import RequestKind, Scenario
from simharness.wording import hint

#: Above these a run is refused unless allowed: a few minutes of simulation and a few GB at most.
MAX_REQUESTS = 10_000
MAX_FORWARDS = 500_000
MAX_RANKS_RUN = 256


def validate(sc: Scenario, *, implicit_requests: bool, allow_large: bool = False) -> list[str]:
    """Every pass, in order: the graph's shape first, then what the workload will cost.

    Returns the notes for the user about what was accepted as mstar accepts it."""
    notes = check_walk_edges(sc)
    check_cycles(sc)
    check_stream_edges(sc)
    check_inputs_are_sent(sc, implicit_requests)
    check_workload(sc)
    check_cost(sc, allow_large)
    return notes


def check_walk_edges(sc: Scenario) -> list[str]:
    """Every edge goes to a node of its walk (or a special destination) and to one of its inputs;
    returns a note for each self edge to a name its node does not take (mstar drops the copy)."""
    notes: list[str] = []
    for walk, facts in sc.walk_facts.items():
        _check_walk(walk, facts, notes)
    return notes


def _check_walk(walk: str, facts: WalkFacts, notes: list[str]) -> None:
    nodes = facts.nodes
    loop_outputs = [e for lp in facts.loops.values() for e in lp.outputs + lp.accumulated_outputs]
    for edge in [e for n in nodes.values() for e in n.outputs] + loop_outputs:
        if edge.to in SPECIAL_DESTINATIONS or edge.stream:
            continue
        if edge.to not in nodes:
            raise ScenarioError(f.join(edge.path, "to"),
                                f"edge {edge.name!r} goes to {edge.to!r}, which is not a node of "
                                f"walk {walk!r}{hint(edge.to, [*nodes, *sorted(SPECIAL_DESTINATIONS)])} "
                                f"(nodes: {', '.join(nodes)}; or client, conductor)")
        if edge.name not in nodes[edge.to].inputs:
            if edge.to == _producer(edge, nodes):
                # A self edge to a name the node does not take: mstar's ingest refuses the copy
                # (vjepa2 declares one so that its loop can accumulate that name).
                notes.append(f"{edge.path}: self edge {edge.name!r} of {edge.to!r}, which has no "
                             f"input {edge.name!r}: mstar refuses the copy at ingest")
                continue
            raise ScenarioError(f.join(edge.path, "name"),
                                f"edge {edge.name!r} goes to {edge.to!r}, which has no input named "
                                f"{edge.name!r} in walk {walk!r}{hint(edge.name, nodes[edge.to].inputs)} "
                                f"(inputs: {', '.join(nodes[edge.to].inputs) or 'none'})")


def _producer(edge: Edge, nodes: dict[str, Node]) -> str | None:
    return next((n.name for n in nodes.values() if any(e is edge for e in n.outputs)), None)


def check_stream_edges(sc: Scenario) -> None:
    """Every streaming edge has a declared connection and reaches one consumer node's input."""
    facts, partitions, connections = sc.walk_facts, sc.partitions, sc.connections
    part_of = {w: p for p, ws in partitions.items() for w in ws}
    # A stream is one buffer with one consumer node: (partition, edge) -> that node.
    consumer_of: dict[tuple[str, str], str] = {}
    for walk, wf in facts.items():
        for node in wf.nodes.values():
            for edge in node.outputs:
                if not edge.stream:
                    continue
                conn = next((c for c in connections if c.src == part_of[walk] and c.edge == edge.name), None)
                if conn is None:
                    raise ScenarioError(f.join(edge.path, "stream"),
                                        f"no stream {edge.name!r} leaves partition {part_of[walk]!r} "
                                        f"(declare it in graph.streams)"
                                        f"{_declared(edge.name, part_of[walk], connections)}")
                consumers = {n.name: n for w in partitions[conn.dst] for n in facts[w].nodes.values()}
                if edge.to not in consumers:
                    raise ScenarioError(f.join(edge.path, "to"),
                                        f"stream {edge.name!r} goes to partition {conn.dst!r}, which has "
                                        f"no node {edge.to!r}{hint(edge.to, consumers)} "
                                        f"(nodes of {conn.dst!r}: {', '.join(consumers)})")
                inputs = consumers[edge.to].inputs
                if edge.name not in inputs:
                    raise ScenarioError(f.join(edge.path, "name"),
                                        f"stream {edge.name!r} goes to {edge.to!r} (partition "
                                        f"{conn.dst!r}), which has no input named {edge.name!r}"
                                        f"{hint(edge.name, inputs)} (inputs: {', '.join(inputs)})")
                first = consumer_of.setdefault((part_of[walk], edge.name), edge.to)
                if first != edge.to:
                    raise ScenarioError(f.join(edge.path, "to"),
                                        f"stream {edge.name!r} from partition {part_of[walk]!r} "
                                        f"already goes to {first!r}; a stream feeds one consumer node")
    for conn in connections:
        if (conn.src, conn.edge) not in consumer_of:
            # Its consumer would only ever get producer_done: no model streams nothing, and the
            # simulation routes a stream by the edges that produce it.
            streamed = sorted({e.name for w in partitions[conn.src] for n in facts[w].nodes.values()
                               for e in n.outputs if e.stream})
            raise ScenarioError(f.join(conn.path, "edge") if conn.path else "graph.streams",
                                f"no node of partition {conn.src!r} sends {conn.edge!r} as a "
                                f"streaming edge (an output with stream: true){hint(conn.edge, streamed)}")


def _declared(name: str, part: str, connections: tuple) -> str:
    """What graph.streams declares from `part` under other names than `name`, when it does:
    the stream is more likely misspelt there than missing."""
    declared = [c for c in connections if c.src == part]
    if not declared:
        return ""
    return (f"; graph.streams declares {', '.join(f'{c.edge!r} ({c.path})' for c in declared)} "
            f"from {part!r}{hint(name, [c.edge for c in declared])}")


def check_inputs_are_sent(sc: Scenario, implicit: bool) -> None:
    """Every external input of every walk a request takes must come from somewhere.

    The conductor sends a walk's loop-back seeds itself and streams feed themselves; other
    external inputs must be supplied by the client (``graph.requests.KIND.inputs``) or persisted
    by an earlier walk of the same partition.
    """
    facts = sc.walk_facts
    for kind in sc.requests.values():
        for steps in kind.partitions.values():
            persisted: set[str] = set()
            for step in steps:
                wf = facts[step.walk]
                for name, dest in sorted(wf.external_inputs):
                    if name in kind.inputs or name in persisted or (name, dest) in kind.start_pairs:
                        continue
                    node = wf.nodes[dest]
                    path = f.join(f.join(node.path, "inputs"), node.inputs.index(name))
                    # Without graph.requests every walk is a request kind of its own that
                    # supplies nothing: say where the input could be declared.
                    supply = ("and no request supplies it (declare graph.requests with a kind "
                              "whose inputs list it)" if implicit
                              else f"request kind {kind.name!r} does not supply it (add it to "
                                   f"graph.requests.{kind.name}.inputs), and no earlier walk of the "
                                   f"kind persists it")
                    raise ScenarioError(path, f"input {name!r} of node {dest!r} is never sent in walk "
                                              f"{step.walk!r}: no edge in the walk targets it, it is "
                                              f"neither a loop-back input nor a stream, {supply}")
                persisted |= {e.name for n in wf.nodes.values() for e in n.outputs if e.persist}
                persisted |= {e.name for lp in wf.loops.values()
                              for e in lp.outputs + lp.accumulated_outputs if e.persist}



def check_cycles(sc: Scenario) -> None:
    """No cycle of edges outside a loop: only a loop's body may send back to an earlier node.

    An edge between two nodes that share an enclosing loop is a loop-back edge (mstar feeds it to
    the next iteration). Every other edge between nodes of the walk goes into a directed graph;
    any cycle in it, a self-edge included, is a wait that nothing can ever satisfy. The standard
    library's `graphlib` finds and names the cycle (networkx would do as well, but a plain run
    does not otherwise import it).
    """
    for walk, facts in sc.walk_facts.items():
        loops_of = {n: {lp.name for lp in chain} for n, chain in facts.loops_of.items()}
        edges = [(n.name, e) for n in facts.nodes.values() for e in n.outputs]
        for loop in facts.loops.values():
            body = {n.name for n in iter_nodes(loop.body)}
            for out in loop.outputs + loop.accumulated_outputs:
                edges += [(n, out) for n in sorted(body)
                          if any(e.name == out.name for e in facts.nodes[n].outputs)]
        preds: dict[str, set[str]] = {n: set() for n in facts.nodes}
        path_of: dict[tuple[str, str], str] = {}
        for src, edge in edges:
            if edge.to in SPECIAL_DESTINATIONS or edge.stream or edge.to not in facts.nodes:
                continue
            if edge.name not in facts.nodes[edge.to].inputs:
                continue  # a copy mstar refuses at ingest (see check_walk_edges): nobody waits
            if loops_of[src] & loops_of[edge.to]:
                continue
            preds[edge.to].add(src)
            path_of.setdefault((src, edge.to), edge.path)
        try:
            graphlib.TopologicalSorter(preds).prepare()
        except graphlib.CycleError as exc:
            cycle = list(exc.args[1])
            if (cycle[0], cycle[1]) not in path_of:
                cycle.reverse()  # graphlib walks predecessors; name the cycle in edge order
            names = " -> ".join(cycle)
            what = "a node's edge to itself" if len(cycle) == 2 else "a cycle of edges"
            raise ScenarioError(f.join(path_of[cycle[0], cycle[1]], "to"),
                                f"{what} outside any loop in walk {walk!r}: {names}; only the "
                                f"body of a loop may send back to an earlier node (each node "
                                f"would wait for the other forever)") from None


def check_workload(sc: Scenario) -> None:
    if sc.total_requests == 0:
        raise ScenarioError("workload", "every phase has count 0: the run would submit no "
                                        "request and check nothing")


class CostEstimate(Struct, frozen=True):
    """What a run will do at most, estimated from the scenario before anything runs."""

    ranks: int
    requests: int
    forwards: int

    def over(self) -> list[str]:
        out = []
        if self.ranks > MAX_RANKS_RUN:
            out.append(f"{self.ranks:,} ranks (limit {MAX_RANKS_RUN:,})")
        if self.requests > MAX_REQUESTS:
            out.append(f"{self.requests:,} requests (limit {MAX_REQUESTS:,})")
        if self.forwards > MAX_FORWARDS:
            out.append(f"about {self.forwards:,} node forwards (limit {MAX_FORWARDS:,})")
        return out


def estimate_cost(sc: Scenario) -> CostEstimate:
    """Ranks, requests and node forwards (every loop at max_iters or its largest stop draw,
    times the ranks of the instance that runs the node)."""
    per_kind = {name: _forwards_per_request(sc, kind) for name, kind in sc.requests.items()}
    forwards = 0
    for phase in sc.workload:
        n = len(phase.kinds)
        for j, kind in enumerate(phase.kinds):
            count = phase.count // n + (1 if j < phase.count % n else 0)
            forwards += count * per_kind[kind]
    return CostEstimate(sc.placement.num_ranks, sc.total_requests, forwards)


def _forwards_per_request(sc: Scenario, kind: RequestKind) -> int:
    total = 0
    for steps in kind.partitions.values():
        for step in steps:
            facts = sc.walk_facts[step.walk]
            per_pass = 0
            for node in facts.nodes:
                n = _instance_size(sc, node, step.walk)
                for lp in facts.loops_of[node]:
                    d = kind.stops.get(lp.name)
                    n *= d.high if d is not None else lp.max_iters
                per_pass += n
            total += per_pass * step.times
    return total


def _instance_size(sc: Scenario, node: str, walk: str) -> int:
    for g in sc.placement.node_groups:
        if node in g.node_names and (g.graph_walks is None or walk in g.graph_walks):
            return g.instance_size
    return 1


def check_cost(sc: Scenario, allow_large: bool) -> None:
    if allow_large:
        return
    est = estimate_cost(sc)
    over = est.over()
    if over:
        key = "placement.node_groups" if est.ranks > MAX_RANKS_RUN and len(over) == 1 else "workload"
        raise ScenarioError(key, f"this run is estimated at {'; '.join(over)}; refusing "
                                        f"it up front (lower the counts, or pass --allow-large "
                                        f"to run it anyway)")
