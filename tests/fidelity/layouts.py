"""A seeded generator of small serving layouts for the fidelity suite.

`layout(seed)` returns a raw scenario (plain data, as read from YAML): one or two walks built
from nodes, parallel stages and loops (nested at most once), wired stage to stage, placed over
one to three ranks by a random set of node groups (sibling worker graphs on one rank, split
loops, data-parallel replicas), with one to three requests.

Wiring, so that every input is sent: each exit node of a stage sends ``<src>_<dst>`` to each
entry node of the next stage; a loop's exit nodes send ``<exit>_back`` to the body's entry nodes
(the loop-back edges, seeded by the conductor at the walk start), and the loop declares the same
names as its outputs to the stage after it; the first stage reads the client's ``in`` (or, in a
second walk, what the first walk persisted); the last stage emits ``out`` to the client.

Most layouts are *safe*: no shape mstar is known to mishandle. About a third are *hazards*, on
purpose: a loop whose last stage is parallel (a loop-back edge from an entity that does not
close the iteration is destroyed at the advance, reference section 3.3), a self edge on a node
that does not close the iteration, nested loops (section 2.5), one input name sent to several
entry nodes of a loop (saved once per name, so only one destination gets it again), a loop that
shares its name with a node of the same registry (mstar keys a registry's entities by name).
Those hang or misbehave, and the two runtimes must hang or misbehave in exactly the same way.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Stage:
    kind: str  # node | parallel | loop
    nodes: list[str] = field(default_factory=list)  # node, parallel
    body: list[_Stage] = field(default_factory=list)  # loop
    name: str = ""
    max_iters: int = 1
    self_edge: str | None = None  # a node of the stage with a self edge (loops only)
    emitter: str | None = None  # a body node that emits a token to the client every iteration
    accumulate: bool = False  # the loop hands all the emitter's tokens on at its end


class _Builder:
    def __init__(self, rng: random.Random, hazard: bool) -> None:
        self.rng = rng
        self.hazard = hazard
        self.n_nodes = 0
        self.n_loops = 0

    def new_node(self) -> str:
        self.n_nodes += 1
        return f"n{self.n_nodes}"

    def stages(self, depth: int, budget: int) -> list[_Stage]:
        rng = self.rng
        out: list[_Stage] = []
        for _ in range(rng.randint(1, budget)):
            roll = rng.random()
            if roll < 0.3 and depth < 2 and (depth == 0 or self.hazard):
                out.append(self.loop(depth))
            elif roll < 0.55:
                out.append(_Stage("parallel", [self.new_node() for _ in range(rng.randint(2, 3))]))
            else:
                out.append(_Stage("node", [self.new_node()]))
        loops = [st for st in out if st.kind == "loop"]
        names = [n for st in out if st.kind != "loop" for n in st.nodes]
        if self.hazard and loops and names and rng.random() < 0.3:
            # A loop named like a node its registry also manages: mstar keys both by name.
            rng.choice(loops).name = rng.choice(names)
        return out

    def loop(self, depth: int) -> _Stage:
        rng = self.rng
        self.n_loops += 1
        name = f"L{self.n_loops}"
        body = self.stages(depth + 1, 3)
        if not self.hazard and body[-1].kind != "node":
            body.append(_Stage("node", [self.new_node()]))  # one entity closes the iteration
        st = _Stage("loop", body=body, name=name, max_iters=rng.randint(1, 4))
        if rng.random() < 0.3:
            candidates = [n for s in body if s.kind != "loop" for n in s.nodes]
            if not self.hazard:
                candidates = body[-1].nodes if body[-1].kind == "node" else []
            if candidates:
                st.self_edge = rng.choice(candidates)
        if rng.random() < 0.4:
            st.emitter = rng.choice([n for s in body if s.kind != "loop" for n in s.nodes] or [None])
            st.accumulate = st.emitter is not None and rng.random() < 0.5
        return st


def _entries(st: _Stage) -> list[str]:
    return _entries(st.body[0]) if st.kind == "loop" else list(st.nodes)


def _exits(st: _Stage) -> list[str]:
    return _exits(st.body[-1]) if st.kind == "loop" else list(st.nodes)


class _Wiring:
    """Inputs and outputs per node, filled in as the stages are wired."""

    def __init__(self) -> None:
        self.inputs: dict[str, list[str]] = {}
        self.outputs: dict[str, list[dict[str, Any]]] = {}
        self.loop_outputs: dict[str, list[dict[str, Any]]] = {}
        self.loop_accumulated: dict[str, list[dict[str, Any]]] = {}

    def take(self, src: str, name: str, node: str) -> None:
        """`node` gets `name` from `src`: a node, or a loop's (accumulated) output."""
        if src.startswith("@@"):
            self.loop_accumulated.setdefault(src[2:], []).append({"name": name, "to": node})
            self.need(node, name)
        elif src.startswith("@"):
            self.loop_outputs.setdefault(src[1:], []).append({"name": name, "to": node})
            self.need(node, name)
        else:
            self.edge(src, f"{src}_{node}", node)

    def edge(self, src: str, name: str, dest: str, **flags: Any) -> None:
        self.outputs.setdefault(src, []).append({"name": name, "to": dest, **flags})
        if dest not in ("client", "conductor"):
            self.need(dest, name)

    def need(self, node: str, name: str) -> None:
        if name not in self.inputs.setdefault(node, []):
            self.inputs[node].append(name)


def _section(st: _Stage, w: _Wiring) -> dict[str, Any]:
    if st.kind == "node":
        return _node(st.nodes[0], w)
    if st.kind == "parallel":
        return {"parallel": [_node(n, w) for n in st.nodes]}
    body = [_section(s, w) for s in st.body]
    loop = {"name": st.name, "max_iters": st.max_iters,
            "body": body[0] if len(body) == 1 else {"sequential": body},
            "outputs": w.loop_outputs.get(st.name, [])}
    if w.loop_accumulated.get(st.name):
        loop["accumulated_outputs"] = w.loop_accumulated[st.name]
    return {"loop": loop}


def _node(name: str, w: _Wiring) -> dict[str, Any]:
    return {"node": name, "inputs": w.inputs.get(name, []), "outputs": w.outputs.get(name, []),
            "async": False}


def _connect(stages: list[_Stage], w: _Wiring, first_inputs: list[str]) -> list[str]:
    """Wire one walk; return its final exit nodes."""
    feed: list[tuple[str, str]] = [("", name) for name in first_inputs]
    for st in stages:
        for node in _entries(st):
            for src, name in feed:
                if src == "":
                    w.need(node, name)
                else:
                    w.take(src, name, node)
        if st.kind == "loop":
            feed = _connect_loop(st, w)
        else:
            feed = [(n, "") for n in st.nodes]
    return [src for src, _ in feed]


def _connect_loop(st: _Stage, w: _Wiring) -> list[tuple[str, str]]:
    w.loop_outputs.setdefault(st.name, [])
    first = st.body[0]
    feed = _connect_loop(first, w) if first.kind == "loop" else [(n, "") for n in first.nodes]
    for inner in st.body[1:]:
        for node in _entries(inner):
            for src, name in feed:
                w.take(src, name, node)
        feed = _connect_loop(inner, w) if inner.kind == "loop" else [(n, "") for n in inner.nodes]
    exits = [src for src, _ in feed]
    if any(s.startswith("@") for s in exits):
        # A nested loop closes this body: it hands its own outputs on; loop back through them.
        backs = []
        for src, name in feed:
            if src.startswith("@@"):
                continue  # the inner loop's accumulated tokens go nowhere
            for e in _entries(st):
                w.take(src, name, e)
            backs.append(("@" + st.name, name))
        _maybe_self(st, w)
        return backs + _emits(st, w)
    for x in exits:
        for e in _entries(st):
            w.edge(x, f"{x}_back", e)
    _maybe_self(st, w)
    return [("@" + st.name, f"{x}_back") for x in exits] + _emits(st, w)


def _emits(st: _Stage, w: _Wiring) -> list[tuple[str, str]]:
    if not st.emitter:
        return []
    w.edge(st.emitter, f"{st.emitter}_tok", "client")
    return [("@@" + st.name, f"{st.emitter}_tok")] if st.accumulate else []


def _maybe_self(st: _Stage, w: _Wiring) -> None:
    if st.self_edge:
        w.edge(st.self_edge, f"{st.self_edge}_self", st.self_edge)


def _all_nodes(stages: list[_Stage]) -> list[str]:
    out: list[str] = []
    for st in stages:
        out.extend(_all_nodes(st.body) if st.kind == "loop" else st.nodes)
    return out


def _reuse_names(stages: list[_Stage], earlier: list[str], rng: random.Random) -> None:
    """Rename some nodes of a later walk to nodes of an earlier walk (mstar's LLM serves
    prefill, decode and image_gen): one node name, one group, several walks."""
    mine = _all_nodes(stages)
    pool = [n for n in earlier if n not in mine]
    rename = {}
    for n in mine:
        if pool and rng.random() < 0.5:
            rename[n] = pool.pop(rng.randrange(len(pool)))

    def apply(sts: list[_Stage]) -> None:
        for st in sts:
            if st.kind == "loop":
                apply(st.body)
                st.self_edge = rename.get(st.self_edge, st.self_edge) if st.self_edge else None
                st.emitter = rename.get(st.emitter, st.emitter) if st.emitter else None
            else:
                st.nodes = [rename.get(n, n) for n in st.nodes]

    apply(stages)


def _one_name_per_dest(stages: list[_Stage], b: _Builder) -> list[_Stage]:
    """Put a node before a loop whose entries would all get the same input name.

    A loop saves its external inputs one per *name* (mstar ``ingest_external_input``), so when
    the walk's ``in`` or an earlier loop's output goes to several entry nodes of a loop, only the
    first destination gets it again at the next iteration, and the others wait for ever.
    """
    out: list[_Stage] = []
    for st in stages:
        if st.kind == "loop" and len(_entries(st)) > 1 and (not out or out[-1].kind == "loop"):
            out.append(_Stage("node", [b.new_node()]))
        out.append(st)
    return out


def layout(seed: int) -> dict[str, Any]:
    """One generated raw scenario; the same seed always gives the same layout."""
    rng = random.Random(seed)
    hazard = rng.random() < 0.3
    b = _Builder(rng, hazard)
    n_walks = 1 if rng.random() < 0.7 else 2
    walks: dict[str, Any] = {}
    w_all: list[tuple[str, list[_Stage], _Wiring]] = []
    first_inputs = ["in"]
    for wi in range(n_walks):
        stages = b.stages(0, 3)
        if wi > 0 and rng.random() < 0.4:
            _reuse_names(stages, [n for _, st0, _ in w_all for n in _all_nodes(st0)], rng)
        if not hazard:
            stages = _one_name_per_dest(stages, b)
        if stages[-1].kind == "loop":
            stages.append(_Stage("node", [b.new_node()]))  # someone takes the loop's outputs
        w = _Wiring()
        ends = _connect(stages, w, first_inputs)
        persist = wi + 1 < n_walks
        for x in ends:
            w.edge(x, "out", "client")
            if persist:
                w.edge(x, f"{x}_p", "conductor", persist=True)
        first_inputs = [f"{x}_p" for x in ends]
        walk = f"w{wi}"
        body = [_section(s, w) for s in stages]
        walks[walk] = body[0] if len(body) == 1 else {"sequential": body}
        w_all.append((walk, stages, w))
    nodes = sorted({n for _, sts, _ in w_all for n in _all_nodes(sts)}, key=lambda n: int(n[1:]))
    # Placement: node groups over 1..3 ranks; ranks 0..N-1 without gaps.
    n_ranks = rng.randint(1, 3)
    n_groups = rng.randint(1, min(4, len(nodes)))
    group_of = {n: rng.randrange(n_groups) for n in nodes}
    group_ranks: list[list[int]] = []
    for gi in range(n_groups):
        if n_ranks >= 2 and rng.random() < 0.1:
            group_ranks.append(sorted(rng.sample(range(n_ranks), 2)))  # data-parallel replicas
        else:
            group_ranks.append([gi % n_ranks if gi < n_ranks else rng.randrange(n_ranks)])
    used = sorted({r for rs in group_ranks for r in rs})
    renumber = {r: i for i, r in enumerate(used)}
    groups = [{"node_names": [n for n in nodes if group_of[n] == gi],
               "ranks": [renumber[r] for r in group_ranks[gi]]}
              for gi in range(n_groups)]
    groups = [g for g in groups if g["node_names"]]
    # A node that serves two walks may be placed apart for one of them (mstar's BAGEL CFG
    # branches): a later group that names the node for that walk only wins there.
    if len(w_all) > 1:
        shared = [n for n in _all_nodes(w_all[1][1]) if n in _all_nodes(w_all[0][1])]
        if shared and rng.random() < 0.5:
            groups.append({"node_names": rng.sample(shared, rng.randint(1, len(shared))),
                           "ranks": [rng.randrange(max(r for g in groups for r in g["ranks"]) + 2)],
                           "graph_walks": [w_all[1][0]]})
    used = sorted({r for g in groups for r in g["ranks"]})
    renumber = {r: i for i, r in enumerate(used)}
    for g in groups:
        g["ranks"] = [renumber[r] for r in g["ranks"]]
    count = rng.randint(1, 4)
    placement: dict[str, Any] = {"node_groups": groups}
    if rng.random() < 0.2:
        placement["max_concurrent_requests"] = rng.randint(1, 2)
    return {
        "name": f"gen{seed}",
        "seed": seed,
        "graph": {
            "nodes": {n: _facts(rng) for n in nodes},
            "walks": walks,
            "requests": {"req": {"walks": list(walks), "inputs": ["in"]}},
        },
        "placement": placement,
        "workload": [{"request": "req", "count": count, "concurrency": rng.randint(1, count)}],
        "network": {"latency_us": rng.choice([1, 10, 100]), "bandwidth_gbps": 100},
        "limits": {"request_timeout_s": 60},
    }


def _facts(rng: random.Random) -> dict[str, Any]:
    facts: dict[str, Any] = {"service_ms": rng.choice([0.5, 1, 2, 3, 5])}
    if rng.random() < 0.3:
        facts["max_batch"] = rng.choice([1, 2])
        facts["per_request_ms"] = rng.choice([0, 0.5])
    return facts
