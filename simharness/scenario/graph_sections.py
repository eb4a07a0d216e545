"""Section parsers of ``graph:``: walks, partitions, streams, node facts and request kinds.

The second pass of the loader. Each parser turns one section of plain data into the model's
frozen objects and checks what it can see from there (types, ranges, names it refers to); a
default is never written here but read from the model's records (`WalkCost()`, `Step`), so the
model and the loader cannot disagree. Checks that need the whole scenario (edges to real inputs,
streams, inputs that are never sent, cycles) run afterwards over the frozen `Scenario`
(`simharness.scenario.validate`).
"""

from __future__ import annotations

from typing import Any

from simharness import fields as f
from simharness.errors import ScenarioError
from simharness.graph.analysis import WalkFacts
from simharness.graph.derive import produced_names
from simharness.graph.ir import (
    CONDUCTOR,
    SPECIAL_DESTINATIONS,
    Edge,
    Loop,
    Node,
    Parallel,
    Section,
    Sequential,
    StopRule,
    iter_nodes,
)
from simharness.scenario.model import (
    DEFAULT_PARTITION,
    ChunkPolicySpec,
    Connection,
    Dist,
    NodeFacts,
    RequestKind,
    ScriptStep,
    Step,
    WalkCost,
)
from simharness.wording import hint, plural

POLICIES = ("sliding_window", "left_context", "fixed")
SECTION_KINDS = ("node", "sequential", "parallel", "loop")
#: Upper bounds that keep a typo from becoming a run without end (a count, iterations, items).
MAX_COUNT = 1_000_000
#: Longest service time of one batch: an hour.
MAX_MS = 3_600_000.0
MAX_TOKENS = 10_000_000


class _WalkContext:
    def __init__(self, walk: str, notes: list[str]) -> None:
        self.walk = walk
        #: what the loader accepted as mstar does, with a note for the user
        self.notes = notes
        self.node_paths: dict[str, str] = {}
        self.loop_paths: dict[str, str] = {}
        self.unnamed_loops = 0


def parse_walks(raw: Any, notes: list[str]) -> dict[str, Section]:
    walks_raw = f.mapping(raw, "graph.walks", f.any_keys(raw))
    if not walks_raw:
        raise ScenarioError("graph.walks", "expected at least one walk")
    walks: dict[str, Section] = {}
    for walk, body in walks_raw.items():
        path = f.join("graph.walks", walk)
        f.name(walk, path, "a walk name")
        ctx = _WalkContext(walk, notes)
        walks[walk] = _section(body, path, ctx)
    return walks


def _section(raw: Any, path: str, ctx: _WalkContext) -> Section:
    if not isinstance(raw, dict):
        raise ScenarioError(path, f"expected a mapping with one of {', '.join(SECTION_KINDS)}, "
                                  f"got {f.describe(raw)}")
    kinds = [k for k in SECTION_KINDS if k in raw]
    if len(kinds) != 1:
        found = ", ".join(kinds) if kinds else "none of them"
        raise ScenarioError(path, f"expected exactly one of {', '.join(SECTION_KINDS)} "
                                  f"(found {found})")
    kind = kinds[0]
    if kind == "node":
        return _node(raw, path, ctx)
    if kind in ("sequential", "parallel"):
        f.mapping(raw, path, (kind,))
        items = f.sequence(raw[kind], f.join(path, kind), non_empty=True)
        parts = tuple(_section(item, f.join(f.join(path, kind), i), ctx) for i, item in enumerate(items))
        cls = Sequential if kind == "sequential" else Parallel
        return cls(parts, path=path)
    f.mapping(raw, path, ("loop",))
    return _loop(raw["loop"], f.join(path, "loop"), ctx)


def _node(raw: dict[str, Any], path: str, ctx: _WalkContext) -> Node:
    f.mapping(raw, path, ("node", "inputs", "outputs", "async"), required=("node",))
    name = f.name(raw["node"], f.join(path, "node"), "a node name")
    if name in SPECIAL_DESTINATIONS:
        raise ScenarioError(f.join(path, "node"), f"{name!r} is reserved for a destination")
    if name in ctx.node_paths:
        raise ScenarioError(f.join(path, "node"), f"node {name!r} appears twice in walk "
                                                  f"{ctx.walk!r} (first at {ctx.node_paths[name]})")
    ctx.node_paths[name] = path
    inputs = f.name_list(raw.get("inputs", []), f.join(path, "inputs"), "an input name")
    if not inputs:
        # mstar queues a node when an input arrives (`ingest_input`): one without any never runs,
        # and every request that walks it hangs. An impossible graph, as a cycle is.
        raise ScenarioError(f.join(path, "inputs"), f"node {name!r} has no inputs: mstar runs a "
                                                    f"node once its inputs arrive, so it would never run")
    outputs = _edges(raw.get("outputs", []), f.join(path, "outputs"))
    async_ = f.boolean(raw.get("async", True), f.join(path, "async"))
    return Node(name, inputs, outputs, async_, path=path)


def _edges(raw: Any, path: str) -> tuple[Edge, ...]:
    out = []
    for i, item in enumerate(f.sequence(raw, path)):
        p = f.join(path, i)
        m = f.mapping(item, p, ("name", "to", "persist", "new_token", "stream"), required=("name", "to"))
        to = f.name(m["to"], f.join(p, "to"), "a destination")
        persist = f.boolean(m.get("persist", to == CONDUCTOR), f.join(p, "persist"))
        if to == CONDUCTOR and not persist:
            raise ScenarioError(f.join(p, "persist"), "an edge to conductor hands a tensor to the "
                                                     "conductor: persist must be true")
        out.append(Edge(
            name=f.name(m["name"], f.join(p, "name"), "a signal name"),
            to=to,
            persist=persist,
            new_token=f.boolean(m.get("new_token", False), f.join(p, "new_token")),
            stream=f.boolean(m.get("stream", False), f.join(p, "stream")),
            path=p,
        ))
        if out[-1].stream and to in SPECIAL_DESTINATIONS:
            raise ScenarioError(f.join(p, "to"), f"a streaming edge goes to a node of another "
                                                 f"partition, not to {to}")
        if out[-1].stream and persist:
            raise ScenarioError(f.join(p, "persist"), "a streaming edge cannot persist (persist: "
                                                      "true is for edges the conductor keeps)")
    return tuple(out)


def _loop(raw: Any, path: str, ctx: _WalkContext) -> Loop:
    m = f.mapping(raw, path, ("name", "max_iters", "body", "outputs", "accumulated_outputs", "stop"),
                  required=("max_iters", "body"))
    if "name" in m:
        name = f.name(m["name"], f.join(path, "name"), "a loop name")
    else:
        ctx.unnamed_loops += 1
        name = f"{ctx.walk}.loop{ctx.unnamed_loops}"
    if name in ctx.loop_paths:
        raise ScenarioError(f.join(path, "name"), f"loop {name!r} appears twice in walk {ctx.walk!r}")
    ctx.loop_paths[name] = path
    max_iters = f.integer(m["max_iters"], f.join(path, "max_iters"), minimum=1, maximum=MAX_COUNT,
                          unit="iterations")
    body = _section(m["body"], f.join(path, "body"), ctx)
    outputs = _edges(m.get("outputs", []), f.join(path, "outputs"))
    accumulated = _edges(m.get("accumulated_outputs", []), f.join(path, "accumulated_outputs"))
    produced = produced_names(body)
    unproduced = [e for e in outputs + accumulated if e.name not in produced]
    if unproduced:
        # mstar's Loop keeps only the declared outputs its body produces and drops the rest
        # without a word; so do we, but we say so.
        # The walk keeps them as written: placement's loop copies drop them as mstar's do.
        names = sorted({e.name for e in unproduced})
        ctx.notes.append(f"{path}: loop {name!r} declares {plural(len(names), 'output')} "
                         f"{', '.join(names)} that no node in its body produces; mstar drops "
                         f"{'it' if len(names) == 1 else 'them'}, and so does this run "
                         f"(the body produces: {', '.join(sorted(produced)) or 'nothing'})")
    clash = {e.name for e in outputs} & {e.name for e in accumulated}
    if clash:
        raise ScenarioError(f.join(path, "accumulated_outputs"),
                            f"{plural(len(clash), 'output')} {', '.join(repr(n) for n in sorted(clash))} "
                            f"{'is' if len(clash) == 1 else 'are'} in both outputs and "
                            f"accumulated_outputs: give {'it' if len(clash) == 1 else 'each'} one of "
                            f"the two")
    stop = None
    if "stop" in m:
        sm = f.mapping(m["stop"] if m["stop"] is not None else {}, f.join(path, "stop"), ("by",))
        by = None
        if "by" in sm:
            by = f.name_list(sm["by"], f.join(f.join(path, "stop"), "by"), "a node name", non_empty=True)
            body_nodes = sorted({n.name for n in iter_nodes(body)})
            for i, n in enumerate(by):
                if n not in body_nodes:
                    raise ScenarioError(f.join(f.join(f.join(path, "stop"), "by"), i),
                                        f"node {n!r} is not in the body of loop {name!r}"
                                        f"{hint(n, body_nodes)} (body nodes: {', '.join(body_nodes)})")
        stop = StopRule(by)
    return Loop(name, max_iters, body, outputs, accumulated, stop=stop, path=path)


def parse_node_facts(raw: Any, facts: dict[str, WalkFacts]) -> dict[str, NodeFacts]:
    known = {n for w in facts.values() for n in w.nodes}
    out: dict[str, NodeFacts] = {}
    for node, body in f.mapping(raw, "graph.nodes", f.any_keys(raw)).items():
        path = f.join("graph.nodes", node)
        if node not in known:
            raise ScenarioError(path, f"unknown node {node!r}: no walk of this scenario has a node "
                                      f"of that name{hint(node, sorted(known))} "
                                      f"(nodes: {', '.join(sorted(known))})")
        m = f.mapping(body, path, ("service_ms", "per_request_ms", "max_batch", "tokens", "per_walk",
                                   "script", "kv_label"))
        script = tuple(_script_step(item, f.join(f.join(path, "script"), i), node, facts)
                       for i, item in enumerate(f.sequence(m.get("script", []), f.join(path, "script"))))
        base = _walk_cost(m, path, WalkCost())
        per_walk: dict[str, WalkCost] = {}
        pw = m.get("per_walk", {})
        for walk, cost in f.mapping(pw, f.join(path, "per_walk"), f.any_keys(pw)).items():
            wpath = f.join(f.join(path, "per_walk"), walk)
            if walk not in facts:
                raise ScenarioError(wpath, f"unknown walk {walk!r}{hint(walk, facts)} "
                                           f"(walks: {', '.join(facts)})")
            if node not in facts[walk].nodes:
                raise ScenarioError(wpath, f"walk {walk!r} has no node {node!r} (walks with {node}: "
                                           f"{', '.join(w for w in facts if node in facts[w].nodes)})")
            per_walk[walk] = _walk_cost(f.mapping(cost, wpath, ("service_ms", "per_request_ms",
                                                                "max_batch", "tokens")), wpath, base)
        kv_label = None
        if m.get("kv_label") is not None:
            kv_label = f.name(m["kv_label"], f.join(path, "kv_label"), "a KV cache label")
        out[node] = NodeFacts(base, per_walk, script, kv_label)
    return out


def _walk_cost(m: dict[str, Any], path: str, default: WalkCost) -> WalkCost:
    """A node's cost; `default` is the model's `WalkCost()` or, per walk, the node's own base."""
    return WalkCost(
        service_ms=f.number(m.get("service_ms", default.service_ms), f.join(path, "service_ms"),
                            minimum=0, maximum=MAX_MS, unit="milliseconds"),
        per_request_ms=f.number(m.get("per_request_ms", default.per_request_ms),
                                f.join(path, "per_request_ms"), minimum=0, maximum=MAX_MS,
                                unit="milliseconds"),
        max_batch=(default.max_batch if m.get("max_batch") is None
                   else f.integer(m["max_batch"], f.join(path, "max_batch"), minimum=1,
                                  maximum=MAX_COUNT, unit="requests")),
        tokens=f.integer(m.get("tokens", default.tokens), f.join(path, "tokens"), minimum=0,
                         maximum=MAX_TOKENS, unit="tokens"),
    )


def _script_step(raw: Any, path: str, node: str, facts: dict[str, WalkFacts]) -> ScriptStep:
    m = f.mapping(raw, path, ("at_counter", "wait_for_walk_start"),
                  required=("at_counter", "wait_for_walk_start"))
    at = f.integer(m["at_counter"], f.join(path, "at_counter"), minimum=0, maximum=MAX_COUNT)
    names = f.name_list(m["wait_for_walk_start"], f.join(path, "wait_for_walk_start"),
                        "an input name", non_empty=True)
    in_loops = [w for w in facts.values() if node in w.nodes and w.loops_of[node]]
    if not in_loops:
        raise ScenarioError(path, f"node {node!r} is in no loop, so it has no loop counter to script")
    for w in in_loops:
        missing = [n for n in names if n not in w.nodes[node].inputs]
        if missing:
            inputs = w.nodes[node].inputs
            raise ScenarioError(f.join(path, "wait_for_walk_start"),
                                f"node {node!r} has no input {missing[0]!r} in walk {w.name!r}"
                                f"{hint(missing[0], inputs)} (inputs: {', '.join(inputs)})")
    return ScriptStep(at, names, path=path)


def parse_partitions(raw: Any, walks: dict[str, Section]) -> dict[str, tuple[str, ...]]:
    if raw is None:
        return {DEFAULT_PARTITION: tuple(walks)}
    out: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for part, ws in f.mapping(raw, "graph.partitions", f.any_keys(raw)).items():
        path = f.join("graph.partitions", part)
        f.name(part, path, "a partition name")
        names = f.name_list(ws, path, "a walk name", non_empty=True)
        for i, w in enumerate(names):
            if w not in walks:
                raise ScenarioError(f.join(path, i), f"unknown walk {w!r}{hint(w, walks)} "
                                                     f"(walks: {', '.join(walks)})")
            if w in seen:
                raise ScenarioError(f.join(path, i), f"walk {w!r} is already in partition {seen[w]!r}")
            seen[w] = part
        out[part] = names
    missing = [w for w in walks if w not in seen]
    if missing:
        raise ScenarioError("graph.partitions", f"walk {missing[0]!r} is in no partition")
    return out


def parse_streams(raw: Any, partitions: dict[str, tuple[str, ...]]) -> tuple[Connection, ...]:
    out: list[Connection] = []
    for i, item in enumerate(f.sequence(raw, "graph.streams")):
        path = f.join("graph.streams", i)
        m = f.mapping(item, path, ("from", "to", "edge", "policy"), required=("from", "to", "edge", "policy"))
        ends = []
        for key in ("from", "to"):
            part = f.name(m[key], f.join(path, key), "a partition name")
            if part not in partitions:
                raise ScenarioError(f.join(path, key), f"unknown partition {part!r}"
                                                       f"{hint(part, partitions)} "
                                                       f"(partitions: {', '.join(partitions)})")
            ends.append(part)
        if ends[0] == ends[1]:
            raise ScenarioError(f.join(path, "to"), f"from and to are both partition {ends[0]!r}: a "
                                                    f"stream connects two different partitions")
        edge = f.name(m["edge"], f.join(path, "edge"), "a signal name")
        if any(c.src == ends[0] and c.edge == edge for c in out):
            raise ScenarioError(f.join(path, "edge"), f"partition {ends[0]!r} already streams {edge!r}")
        out.append(Connection(ends[0], ends[1], edge, _policy(m["policy"], f.join(path, "policy")), path))
    return tuple(out)


#: Policies of two counts where the second may not exceed the first: (first, second, second's minimum).
_BOUNDED_POLICIES = {
    "sliding_window": ("window", "stride", 1),
    "left_context": ("chunk", "context", 0),
}


def _policy(raw: Any, path: str) -> ChunkPolicySpec:
    m = f.mapping(raw, path, POLICIES)
    if len(m) != 1:
        raise ScenarioError(path, f"expected exactly one of {', '.join(POLICIES)}")
    kind, body = next(iter(m.items()))
    p = f.join(path, kind)
    if kind in _BOUNDED_POLICIES:
        big, small, small_min = _BOUNDED_POLICIES[kind]
        b = f.mapping(body, p, (big, small), required=(big, small))
        hi = f.integer(b[big], f.join(p, big), minimum=1, maximum=MAX_COUNT, unit="items")
        lo = f.integer(b[small], f.join(p, small), minimum=small_min, maximum=MAX_COUNT, unit="items")
        if lo > hi:
            raise ScenarioError(f.join(p, small), f"expected a {small} <= {big} ({hi}), got {lo}")
        sizes: dict[str, Any] = {big: hi, small: lo}  # the policy's own two field names
        return ChunkPolicySpec(kind, **sizes)
    b = f.mapping(body, p, ("chunk", "continue_after_done"), required=("chunk",))
    chunk = f.integer(b["chunk"], f.join(p, "chunk"), minimum=1, maximum=MAX_COUNT, unit="items")
    return ChunkPolicySpec(kind, chunk=chunk,
                           continue_after_done=f.boolean(b.get("continue_after_done", False),
                                                         f.join(p, "continue_after_done")))


def _dist(raw: Any, path: str, max_iters: int) -> Dist:
    """A stop draw; no draw may exceed the loop's `max_iters` (the loop would never reach it)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return Dist("fixed", _stop(raw, path, max_iters), raw)
    m = f.mapping(raw, path, ("fixed", "uniform"))
    if len(m) != 1:
        raise ScenarioError(path, "expected an integer, {fixed: N} or {uniform: [LOW, HIGH]}")
    if "fixed" in m:
        n = _stop(m["fixed"], f.join(path, "fixed"), max_iters)
        return Dist("fixed", n, n)
    lo_hi = f.sequence(m["uniform"], f.join(path, "uniform"))
    if len(lo_hi) != 2:
        raise ScenarioError(f.join(path, "uniform"), "expected [LOW, HIGH]")
    lo = _stop(lo_hi[0], f.join(f.join(path, "uniform"), 0), max_iters)
    hi = _stop(lo_hi[1], f.join(f.join(path, "uniform"), 1), max_iters, minimum=lo)
    return Dist("uniform", lo, hi)


def _stop(raw: Any, path: str, max_iters: int, minimum: int = 1) -> int:
    n = f.integer(raw, path, minimum=minimum)
    if n > max_iters:
        raise ScenarioError(path, f"expected at most the loop's max_iters ({max_iters}) "
                                  f"iterations, got {f.describe(n).removeprefix('the number ')}")
    return n


def _steps(raw: Any, path: str, part: str, partitions: dict[str, tuple[str, ...]]) -> tuple[Step, ...]:
    out = []
    items = f.sequence(raw, path, non_empty=True)
    for i, item in enumerate(items):
        p = f.join(path, i)
        if isinstance(item, dict):
            m = f.mapping(item, p, ("walk", "times", "until"), required=("walk",))
            walk = f.name(m["walk"], f.join(p, "walk"), "a walk name")
            times = f.integer(m.get("times", f.default(Step, "times")), f.join(p, "times"), minimum=1,
                              maximum=MAX_COUNT, unit="passes")
            until = m.get("until")
            if until is not None and until != "final_chunk":
                raise ScenarioError(f.join(p, "until"), f"expected final_chunk, got {f.describe(until)}")
            if until is not None and i != len(items) - 1:
                raise ScenarioError(f.join(p, "until"), "only the last step can repeat until the final chunk")
            step = Step(walk, times, until is not None)
            wpath = f.join(p, "walk")
        else:
            walk = f.name(item, p, "a walk name")
            step = Step(walk)
            wpath = p
        if walk not in partitions[part]:
            where = next((q for q, ws in partitions.items() if walk in ws), None)
            raise ScenarioError(wpath, f"unknown walk {walk!r}{hint(walk, partitions[part])}" if where is None
                                else f"walk {walk!r} belongs to partition {where!r}, not {part!r}")
        out.append(step)
    return tuple(out)


def parse_requests(
    raw: Any, walks: dict[str, Section], partitions: dict[str, tuple[str, ...]],
    facts: dict[str, WalkFacts],
) -> dict[str, RequestKind]:
    only = next(iter(partitions)) if len(partitions) == 1 else None
    if raw is None:
        # Without request kinds, each walk is a kind of its own: the simplest useful default.
        return {w: RequestKind(w, {next(p for p, ws in partitions.items() if w in ws): (Step(w),)})
                for w in walks}
    out: dict[str, RequestKind] = {}
    for kind, body in f.mapping(raw, "graph.requests", f.any_keys(raw)).items():
        path = f.join("graph.requests", kind)
        f.name(kind, path, "a request kind")
        if isinstance(body, list):
            body = {"walks": body}
            list_form = True
        else:
            list_form = False
        m = f.mapping(body, path, ("walks", "partitions", "inputs", "stops", "max_output_tokens"))
        if ("walks" in m) == ("partitions" in m):
            raise ScenarioError(path, "expected exactly one of walks (one partition) or partitions")
        parts: dict[str, tuple[Step, ...]] = {}
        if "walks" in m:
            if only is None:
                raise ScenarioError(path if list_form else f.join(path, "walks"),
                                    "the graph has several partitions: give partitions: "
                                    "{PARTITION: [walks]}")
            parts[only] = _steps(m["walks"], path if list_form else f.join(path, "walks"), only, partitions)
        else:
            pm = f.mapping(m["partitions"], f.join(path, "partitions"), list(partitions))
            if not pm:
                raise ScenarioError(f.join(path, "partitions"), "expected at least one partition")
            for part, steps in pm.items():
                parts[part] = _steps(steps, f.join(f.join(path, "partitions"), part), part, partitions)
        used_walks = {st.walk for steps in parts.values() for st in steps}
        inputs, start_pairs = _kind_inputs(m.get("inputs", []), f.join(path, "inputs"), kind,
                                           [w for w in facts if w in used_walks], facts)
        dynamic = {lp.name: (w, lp) for w in sorted(used_walks) for lp in facts[w].loops.values()
                   if lp.stop is not None}
        stops: dict[str, Dist] = {}
        sraw = m.get("stops", {})
        for loop, d in f.mapping(sraw, f.join(path, "stops"), f.any_keys(sraw)).items():
            lpath = f.join(f.join(path, "stops"), loop)
            if loop not in dynamic:
                raise ScenarioError(lpath, f"no dynamic loop {loop!r} (a loop with stop:) in the walks "
                                           f"of {kind!r}{hint(loop, dynamic)} "
                                           f"(dynamic loops: {', '.join(dynamic) or 'none'})")
            stops[loop] = _dist(d, lpath, dynamic[loop][1].max_iters)
        for loop, (walk, _) in dynamic.items():
            if loop not in stops:
                raise ScenarioError(f.join(path, "stops"),
                                    f"dynamic loop {loop!r} of walk {walk!r} needs an iteration count "
                                    f"here (e.g. {loop}: {{uniform: [20, 60]}})")
        mot = m.get("max_output_tokens")
        cap = None if mot is None else f.integer(mot, f.join(path, "max_output_tokens"), minimum=1,
                                                 maximum=MAX_TOKENS, unit="tokens")
        out[kind] = RequestKind(kind, parts, inputs, stops, cap, start_pairs)
    if not out:
        raise ScenarioError("graph.requests", "expected at least one request kind")
    return out


def _untaken(name: str, node: str, kind: str, walks: list[str], facts: dict[str, WalkFacts]) -> str:
    """Why no walk of `kind` takes `name` at `node`: no such node, or no such input there."""
    where = [w for w in walks if node in facts[w].nodes]
    if not where:
        nodes = list(dict.fromkeys(n for w in walks for n in facts[w].nodes))
        return (f"no walk of kind {kind!r} has a node {node!r}{hint(node, nodes)} "
                f"(nodes: {', '.join(nodes)})")
    inputs = list(dict.fromkeys(i for w in where for i in facts[w].nodes[node].inputs))
    return (f"node {node!r} has no input {name!r} in {'walk' if len(where) == 1 else 'walks'} "
            f"{', '.join(where)}{hint(name, inputs)} (inputs: {', '.join(inputs)})")


def _kind_inputs(
    raw: Any, path: str, kind: str, walks: list[str], facts: dict[str, WalkFacts]
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """A kind's ``inputs``: names the client supplies (sent to every walk input of that name),
    and ``{name, to}`` pairs sent to that one node's input at the start of each walk that has
    the node (mstar's initial forward-pass arguments may target any input of any node)."""
    names: list[str] = []
    pairs: list[tuple[str, str]] = []
    for i, item in enumerate(f.sequence(raw, path)):
        p = f.join(path, i)
        if not isinstance(item, dict):
            names.append(f.name(item, p, "a signal name, or {name: SIGNAL, to: NODE}"))
            continue
        m = f.mapping(item, p, ("name", "to"), required=("name", "to"))
        name = f.name(m["name"], f.join(p, "name"), "a signal name")
        node = f.name(m["to"], f.join(p, "to"), "a node name")
        takes = [w for w in walks if node in facts[w].nodes and name in facts[w].nodes[node].inputs]
        if not takes:
            raise ScenarioError(p, f"walk-start input {name}→{node} can never be taken: "
                                   f"{_untaken(name, node, kind, walks, facts)}")
        pairs.append((name, node))
    return tuple(names), tuple(pairs)
