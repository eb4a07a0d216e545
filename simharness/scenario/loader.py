"""Read a scenario YAML file, apply ``--set`` overrides, validate, and freeze it.

Validation happens here and only here. Every error names the file, the key path and what was
expected (`ScenarioError`); the CLI turns it into one line and exit code 2. Beyond types and
unknown keys, the loader checks what would make mstar itself fail or hang for reasons that are
not runtime bugs: edges to unknown nodes or to inputs the destination does not declare, inputs
that nobody sends, loops with ``max_iters < 1``, nodes that no node group places, unknown request
kinds and walks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

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
from simharness.scenario import fields as f
from simharness.scenario.model import (
    DEFAULT_PARTITION,
    FAULT_KINDS,
    FAULT_MESSAGES,
    ChunkPolicySpec,
    Connection,
    Dist,
    Expect,
    Fault,
    KvConfig,
    Limits,
    Network,
    NodeFacts,
    NodeGroup,
    Phase,
    Placement,
    RequestKind,
    RuntimeChoice,
    Scenario,
    Schedule,
    ScriptStep,
    Step,
    WalkCost,
)
from simharness.scenario.overrides import apply_overrides

TOP_KEYS = (
    "name", "description", "seed", "graph", "placement", "runtime", "workload", "network",
    "payloads", "expect", "limits", "kv", "schedule", "faults", "corpus",
)
POLICIES = ("sliding_window", "left_context", "fixed")
#: Keys of a fuzz corpus case's ``corpus:`` block (metadata; it does not change the run).
CORPUS_KEYS = ("signature", "check", "key", "runtime", "status", "seed", "example", "trace_digest",
               "nodes", "ranks", "note")
CORPUS_STATUSES = ("open", "fixed")
SECTION_KINDS = ("node", "sequential", "parallel", "loop")
TRANSPORTS = ("shm", "ipc", "tcp", "rdma")
DEFAULT_RUNTIME = "mstar-python"


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys instead of silently keeping the last one."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (line {mark.line + 1})", mark
            )
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError("", "file not found", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError("", f"cannot read file: {exc}", source=str(path)) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError("", f"not valid YAML{where}: {problem}", source=str(path)) from None
    if not isinstance(data, dict):
        raise ScenarioError("", f"expected a mapping at the top level, got {f.describe(data)}",
                            source=str(path))
    return data


def load_scenario(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read, override, validate and freeze one scenario file."""
    raw = read_yaml(path)
    raw, overridden = apply_overrides(raw, overrides)
    default_name = Path(path).stem
    try:
        return parse_scenario(raw, source=str(path), default_name=default_name)
    except ScenarioError as err:
        for key_path, text in overridden:
            if err.path == key_path or err.path.startswith((key_path + ".", key_path + "[")):
                err.message += f" (set by --set {text})"
                break
        raise err.with_source(str(path)) from None


def parse_scenario(raw: dict[str, Any], source: str = "<memory>", default_name: str = "scenario",
                   base_dir: str | Path | None = None) -> Scenario:
    """Validate plain data (as read from YAML) into a frozen `Scenario`.

    `base_dir` is where relative paths inside the scenario (``placement.mstar_config``) are
    read from: by default the scenario file's folder, or the working directory.
    """
    if base_dir is None:
        src = Path(source)
        base_dir = src.parent if src.is_file() else Path.cwd()
    top = f.mapping(raw, "", TOP_KEYS, required=("graph", "placement", "workload"))
    name = f.name(top.get("name", default_name), "name", "a scenario name")
    description = f.string(top.get("description", ""), "description")
    seed = f.integer(top.get("seed", 0), "seed", minimum=0)

    graph = f.mapping(top["graph"], "graph", ("nodes", "walks", "requests", "partitions", "streams",
                                              "mstar_model", "mstar_config", "mstar_options"))
    notes: list[str] = []
    resolved_graph = None
    if "mstar_model" in graph:
        # The walks come from mstar's own model code (simharness.mstar_import.reference).
        from simharness.mstar_import.reference import resolve_graph

        graph, model_notes = resolve_graph(graph, top["placement"], Path(base_dir))
        resolved_graph = graph
        notes.extend(model_notes)
    elif "walks" not in graph:
        raise ScenarioError("graph.walks", "missing required key (or name a model: graph.mstar_model)")
    walks = _walks(graph["walks"], notes)
    partitions = _partitions(graph.get("partitions"), walks)
    connections = _streams(graph.get("streams", []), partitions)
    part_of = {w: p for p, ws in partitions.items() for w in ws}
    facts = {w: WalkFacts(w, root, frozenset(c.edge for c in connections if c.dst == part_of[w]))
             for w, root in walks.items()}
    _check_stream_edges(facts, partitions, connections)
    nodes = _node_facts(graph.get("nodes", {}), facts)
    requests = _requests(graph.get("requests"), walks, partitions, facts)
    _check_inputs_are_sent(requests, facts, graph.get("requests") is None)

    placement, resolved = _placement(top["placement"], facts, Path(base_dir), notes)
    runtime = _runtime(top.get("runtime", DEFAULT_RUNTIME))
    workload = _workload(top["workload"], requests)
    network = _network(top.get("network", {}))
    payloads = {
        f.name(k, f.join("payloads", str(k)), "a signal name"): f.size(v, f.join("payloads", str(k)))
        for k, v in f.mapping(top.get("payloads", {}), "payloads", _any_key(top.get("payloads"))).items()
    }
    expect = _expect(top.get("expect", {}), facts, requests)
    limits = _limits(top.get("limits", {}))
    kv = _kv(top.get("kv", {}))
    schedule = _schedule(top.get("schedule", {}))
    faults = _faults(top.get("faults", []), placement.num_ranks)
    if "corpus" in top:
        _corpus(top["corpus"])
    return Scenario(
        name=name,
        description=description,
        seed=seed,
        walks=walks,
        nodes=nodes,
        requests=requests,
        placement=placement,
        runtime=runtime,
        workload=workload,
        network=network,
        payloads=payloads,
        expect=expect,
        limits=limits,
        partitions=partitions,
        connections=connections,
        kv=kv,
        source=source,
        fingerprint=fingerprint({**raw, **({} if resolved is None else {"placement": resolved}),
                                 **({} if resolved_graph is None else {"graph": resolved_graph})}),
        raw=raw,
        schedule=schedule,
        faults=faults,
        notes=tuple(notes),
    )


def fingerprint(raw: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of the scenario, leaving out seed and prose."""
    core = {k: v for k, v in raw.items() if k not in ("seed", "name", "description", "corpus")}
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _any_key(value: Any) -> Iterable[str]:
    return [k for k in value] if isinstance(value, dict) else []


# ---------------------------------------------------------------------------------------------
# graph.walks


class _WalkContext:
    def __init__(self, walk: str, notes: list[str]) -> None:
        self.walk = walk
        #: what the loader accepted as mstar does, with a note for the user
        self.notes = notes
        self.node_paths: dict[str, str] = {}
        self.loop_paths: dict[str, str] = {}
        self.unnamed_loops = 0


def _walks(raw: Any, notes: list[str]) -> dict[str, Section]:
    walks_raw = f.mapping(raw, "graph.walks", _any_key(raw))
    if not walks_raw:
        raise ScenarioError("graph.walks", "expected at least one walk")
    walks: dict[str, Section] = {}
    for walk, body in walks_raw.items():
        path = f.join("graph.walks", walk)
        f.name(walk, path, "a walk name")
        ctx = _WalkContext(walk, notes)
        root = _section(body, path, ctx)
        _check_walk(root, ctx)
        walks[walk] = root
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
        if out[-1].stream and (out[-1].to in SPECIAL_DESTINATIONS or out[-1].persist):
            raise ScenarioError(f.join(p, "stream"), "a streaming edge goes to a node of another "
                                                     "partition, never to client or conductor")
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
    max_iters = f.integer(m["max_iters"], f.join(path, "max_iters"), minimum=1)
    body = _section(m["body"], f.join(path, "body"), ctx)
    outputs = _edges(m.get("outputs", []), f.join(path, "outputs"))
    accumulated = _edges(m.get("accumulated_outputs", []), f.join(path, "accumulated_outputs"))
    produced = produced_names(body)
    unproduced = [e for e in outputs + accumulated if e.name not in produced]
    if unproduced:
        # mstar's Loop keeps only the declared outputs its body produces and drops the rest
        # without a word; so do we, but we say so.
        # The walk keeps them as written: placement's loop copies drop them as mstar's do.
        ctx.notes.append(f"{path}: loop {name!r} declares output(s) "
                         f"{', '.join(sorted({e.name for e in unproduced}))} that no node in its "
                         f"body produces; mstar drops them, and so does this run "
                         f"(the body produces: {', '.join(sorted(produced)) or 'nothing'})")
    clash = {e.name for e in outputs} & {e.name for e in accumulated}
    if clash:
        raise ScenarioError(f.join(path, "accumulated_outputs"),
                            f"outputs and accumulated_outputs must differ by name: {sorted(clash)}")
    stop = None
    if "stop" in m:
        sm = f.mapping(m["stop"] if m["stop"] is not None else {}, f.join(path, "stop"), ("by",))
        by = None
        if "by" in sm:
            by = f.name_list(sm["by"], f.join(f.join(path, "stop"), "by"), "a node name", non_empty=True)
            body_nodes = {n.name for n in iter_nodes(body)}
            for i, n in enumerate(by):
                if n not in body_nodes:
                    raise ScenarioError(f.join(f.join(f.join(path, "stop"), "by"), i),
                                        f"node {n!r} is not in the body of loop {name!r}")
        stop = StopRule(by)
    return Loop(name, max_iters, body, outputs, accumulated, stop=stop, path=path)


def _check_walk(root: Section, ctx: _WalkContext) -> None:
    """Every edge goes to a node of this walk (or a special destination) and to one of its inputs."""
    facts = WalkFacts(ctx.walk, root)
    nodes = facts.nodes
    loop_outputs = [e for lp in facts.loops.values() for e in lp.outputs + lp.accumulated_outputs]
    for edge in [e for n in nodes.values() for e in n.outputs] + loop_outputs:
        if edge.to in SPECIAL_DESTINATIONS or edge.stream:
            continue
        if edge.to not in nodes:
            raise ScenarioError(f.join(edge.path, "to"),
                                f"edge {edge.name!r} goes to {edge.to!r}, which is not a node of "
                                f"walk {ctx.walk!r} (nodes: {', '.join(nodes)}; or client, conductor)")
        if edge.name not in nodes[edge.to].inputs:
            if edge.to == _producer(edge, nodes):
                # A self edge to a name the node does not take: mstar's ingest refuses the copy
                # (vjepa2 declares one so that its loop can accumulate that name).
                ctx.notes.append(f"{edge.path}: self edge {edge.name!r} of {edge.to}, which has no "
                                 f"input {edge.name!r}: mstar refuses the copy at ingest")
                continue
            raise ScenarioError(f.join(edge.path, "name"),
                                f"edge {edge.name!r} goes to {edge.to}, which has no input named "
                                f"{edge.name!r} in walk {ctx.walk!r} "
                                f"(inputs: {', '.join(nodes[edge.to].inputs) or 'none'})")


def _producer(edge: Edge, nodes: dict[str, Node]) -> str | None:
    return next((n.name for n in nodes.values() if any(e is edge for e in n.outputs)), None)


# ---------------------------------------------------------------------------------------------
# graph.nodes, graph.requests


def _node_facts(raw: Any, facts: dict[str, WalkFacts]) -> dict[str, NodeFacts]:
    known = {n for w in facts.values() for n in w.nodes}
    out: dict[str, NodeFacts] = {}
    for node, body in f.mapping(raw, "graph.nodes", _any_key(raw)).items():
        path = f.join("graph.nodes", node)
        if node not in known:
            raise ScenarioError(path, f"node {node!r} appears in no walk "
                                      f"(nodes in walks: {', '.join(sorted(known))})")
        m = f.mapping(body, path, ("service_ms", "per_request_ms", "max_batch", "tokens", "per_walk",
                                   "script", "kv_label"))
        script = tuple(_script_step(item, f.join(f.join(path, "script"), i), node, facts)
                       for i, item in enumerate(f.sequence(m.get("script", []), f.join(path, "script"))))
        base = _walk_cost(m, path, WalkCost())
        per_walk: dict[str, WalkCost] = {}
        pw = m.get("per_walk", {})
        for walk, cost in f.mapping(pw, f.join(path, "per_walk"), _any_key(pw)).items():
            wpath = f.join(f.join(path, "per_walk"), walk)
            if walk not in facts or node not in facts[walk].nodes:
                raise ScenarioError(wpath, f"node {node!r} is not in walk {walk!r}")
            per_walk[walk] = _walk_cost(f.mapping(cost, wpath, ("service_ms", "per_request_ms",
                                                                "max_batch", "tokens")), wpath, base)
        kv_label = None
        if m.get("kv_label") is not None:
            kv_label = f.name(m["kv_label"], f.join(path, "kv_label"), "a KV cache label")
        out[node] = NodeFacts(base, per_walk, script, kv_label)
    return out


def _walk_cost(m: dict[str, Any], path: str, default: WalkCost) -> WalkCost:
    return WalkCost(
        service_ms=f.number(m.get("service_ms", default.service_ms), f.join(path, "service_ms"), minimum=0),
        per_request_ms=f.number(m.get("per_request_ms", default.per_request_ms),
                                f.join(path, "per_request_ms"), minimum=0),
        max_batch=(default.max_batch if m.get("max_batch") is None
                   else f.integer(m["max_batch"], f.join(path, "max_batch"), minimum=1)),
        tokens=f.integer(m.get("tokens", default.tokens), f.join(path, "tokens"), minimum=0),
    )


def _script_step(raw: Any, path: str, node: str, facts: dict[str, WalkFacts]) -> ScriptStep:
    m = f.mapping(raw, path, ("at_counter", "wait_for_walk_start"),
                  required=("at_counter", "wait_for_walk_start"))
    at = f.integer(m["at_counter"], f.join(path, "at_counter"), minimum=0)
    names = f.name_list(m["wait_for_walk_start"], f.join(path, "wait_for_walk_start"),
                        "an input name", non_empty=True)
    in_loops = [w for w in facts.values() if node in w.nodes and w.loops_of[node]]
    if not in_loops:
        raise ScenarioError(path, f"node {node!r} is in no loop, so it has no loop counter to script")
    for w in in_loops:
        missing = [n for n in names if n not in w.nodes[node].inputs]
        if missing:
            raise ScenarioError(f.join(path, "wait_for_walk_start"),
                                f"{node} has no input {missing[0]!r} in walk {w.name!r}")
    return ScriptStep(at, names, path=path)


def _partitions(raw: Any, walks: dict[str, Section]) -> dict[str, tuple[str, ...]]:
    if raw is None:
        return {DEFAULT_PARTITION: tuple(walks)}
    out: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for part, ws in f.mapping(raw, "graph.partitions", _any_key(raw)).items():
        path = f.join("graph.partitions", part)
        f.name(part, path, "a partition name")
        names = f.name_list(ws, path, "a walk name", non_empty=True)
        for i, w in enumerate(names):
            if w not in walks:
                raise ScenarioError(f.join(path, i), f"unknown walk {w!r} (walks: {', '.join(walks)})")
            if w in seen:
                raise ScenarioError(f.join(path, i), f"walk {w!r} is already in partition {seen[w]!r}")
            seen[w] = part
        out[part] = names
    missing = [w for w in walks if w not in seen]
    if missing:
        raise ScenarioError("graph.partitions", f"walk {missing[0]!r} is in no partition")
    return out


def _streams(raw: Any, partitions: dict[str, tuple[str, ...]]) -> tuple[Connection, ...]:
    out = []
    for i, item in enumerate(f.sequence(raw, "graph.streams")):
        path = f.join("graph.streams", i)
        m = f.mapping(item, path, ("from", "to", "edge", "policy"), required=("from", "to", "edge", "policy"))
        ends = []
        for key in ("from", "to"):
            part = f.name(m[key], f.join(path, key), "a partition name")
            if part not in partitions:
                raise ScenarioError(f.join(path, key), f"unknown partition {part!r} "
                                                       f"(partitions: {', '.join(partitions)})")
            ends.append(part)
        if ends[0] == ends[1]:
            raise ScenarioError(f.join(path, "to"), "a stream connects two different partitions")
        edge = f.name(m["edge"], f.join(path, "edge"), "an edge name")
        if any(c.src == ends[0] and c.edge == edge for c in out):
            raise ScenarioError(f.join(path, "edge"), f"partition {ends[0]!r} already streams {edge!r}")
        out.append(Connection(ends[0], ends[1], edge, _policy(m["policy"], f.join(path, "policy")), path))
    return tuple(out)


def _policy(raw: Any, path: str) -> ChunkPolicySpec:
    m = f.mapping(raw, path, POLICIES)
    if len(m) != 1:
        raise ScenarioError(path, f"expected exactly one of {', '.join(POLICIES)}")
    kind, body = next(iter(m.items()))
    p = f.join(path, kind)
    if kind == "sliding_window":
        b = f.mapping(body, p, ("window", "stride"), required=("window", "stride"))
        window = f.integer(b["window"], f.join(p, "window"), minimum=1)
        stride = f.integer(b["stride"], f.join(p, "stride"), minimum=1)
        if stride > window:
            raise ScenarioError(f.join(p, "stride"), f"expected a stride <= window ({window}), got {stride}")
        return ChunkPolicySpec(kind, window=window, stride=stride)
    if kind == "left_context":
        b = f.mapping(body, p, ("chunk", "context"), required=("chunk", "context"))
        chunk = f.integer(b["chunk"], f.join(p, "chunk"), minimum=1)
        ctx = f.integer(b["context"], f.join(p, "context"), minimum=0)
        if ctx > chunk:
            raise ScenarioError(f.join(p, "context"), f"expected a context <= chunk ({chunk}), got {ctx}")
        return ChunkPolicySpec(kind, chunk=chunk, context=ctx)
    b = f.mapping(body, p, ("chunk", "continue_after_done"), required=("chunk",))
    return ChunkPolicySpec(kind, chunk=f.integer(b["chunk"], f.join(p, "chunk"), minimum=1),
                           continue_after_done=f.boolean(b.get("continue_after_done", False),
                                                         f.join(p, "continue_after_done")))


def _check_stream_edges(
    facts: dict[str, WalkFacts], partitions: dict[str, tuple[str, ...]], connections: tuple[Connection, ...]
) -> None:
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
                                        f"(declare it in graph.streams)")
                consumers = {n.name: n for w in partitions[conn.dst] for n in facts[w].nodes.values()}
                if edge.to not in consumers:
                    raise ScenarioError(f.join(edge.path, "to"),
                                        f"stream {edge.name!r} goes to partition {conn.dst!r}, which has "
                                        f"no node {edge.to!r}")
                if edge.name not in consumers[edge.to].inputs:
                    raise ScenarioError(f.join(edge.path, "name"),
                                        f"{edge.to} has no input named {edge.name!r}")
                first = consumer_of.setdefault((part_of[walk], edge.name), edge.to)
                if first != edge.to:
                    raise ScenarioError(f.join(edge.path, "to"),
                                        f"stream {edge.name!r} from partition {part_of[walk]!r} "
                                        f"already goes to {first!r}; a stream feeds one consumer node")


def _dist(raw: Any, path: str) -> Dist:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return Dist("fixed", f.integer(raw, path, minimum=1), raw)
    m = f.mapping(raw, path, ("fixed", "uniform"))
    if len(m) != 1:
        raise ScenarioError(path, "expected an integer, {fixed: N} or {uniform: [LOW, HIGH]}")
    if "fixed" in m:
        n = f.integer(m["fixed"], f.join(path, "fixed"), minimum=1)
        return Dist("fixed", n, n)
    lo_hi = f.sequence(m["uniform"], f.join(path, "uniform"))
    if len(lo_hi) != 2:
        raise ScenarioError(f.join(path, "uniform"), "expected [LOW, HIGH]")
    lo = f.integer(lo_hi[0], f.join(f.join(path, "uniform"), 0), minimum=1)
    hi = f.integer(lo_hi[1], f.join(f.join(path, "uniform"), 1), minimum=lo)
    return Dist("uniform", lo, hi)


def _steps(raw: Any, path: str, part: str, partitions: dict[str, tuple[str, ...]]) -> tuple[Step, ...]:
    out = []
    items = f.sequence(raw, path, non_empty=True)
    for i, item in enumerate(items):
        p = f.join(path, i)
        if isinstance(item, dict):
            m = f.mapping(item, p, ("walk", "times", "until"), required=("walk",))
            walk = f.name(m["walk"], f.join(p, "walk"), "a walk name")
            times = f.integer(m.get("times", 1), f.join(p, "times"), minimum=1)
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
            raise ScenarioError(wpath, f"unknown walk {walk!r}" if where is None
                                else f"walk {walk!r} belongs to partition {where!r}, not {part!r}")
        out.append(step)
    return tuple(out)


def _requests(
    raw: Any, walks: dict[str, Section], partitions: dict[str, tuple[str, ...]],
    facts: dict[str, WalkFacts],
) -> dict[str, RequestKind]:
    only = next(iter(partitions)) if len(partitions) == 1 else None
    if raw is None:
        # Without request kinds, each walk is a kind of its own: the simplest useful default.
        return {w: RequestKind(w, {next(p for p, ws in partitions.items() if w in ws): (Step(w),)})
                for w in walks}
    out: dict[str, RequestKind] = {}
    for kind, body in f.mapping(raw, "graph.requests", _any_key(raw)).items():
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
                raise ScenarioError(f.join(path, "walks"), "the graph has several partitions: give "
                                                           "partitions: {PARTITION: [walks]}")
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
        dynamic = {lp.name: w for w in used_walks for lp in facts[w].loops.values() if lp.stop is not None}
        stops: dict[str, Dist] = {}
        sraw = m.get("stops", {})
        for loop, d in f.mapping(sraw, f.join(path, "stops"), _any_key(sraw)).items():
            lpath = f.join(f.join(path, "stops"), loop)
            if loop not in dynamic:
                raise ScenarioError(lpath, f"no dynamic loop {loop!r} (a loop with stop:) in the walks "
                                           f"of {kind!r}")
            stops[loop] = _dist(d, lpath)
        for loop, walk in dynamic.items():
            if loop not in stops:
                raise ScenarioError(f.join(path, "stops"),
                                    f"dynamic loop {loop!r} of walk {walk!r} needs an iteration count "
                                    f"here (e.g. {loop}: {{uniform: [20, 60]}})")
        mot = m.get("max_output_tokens")
        cap = None if mot is None else f.integer(mot, f.join(path, "max_output_tokens"), minimum=1)
        out[kind] = RequestKind(kind, parts, inputs, stops, cap, start_pairs)
    if not out:
        raise ScenarioError("graph.requests", "expected at least one request kind")
    return out


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
            names.append(f.name(item, p, "an input name, or {name: SIGNAL, to: NODE}"))
            continue
        m = f.mapping(item, p, ("name", "to"), required=("name", "to"))
        name = f.name(m["name"], f.join(p, "name"), "a signal name")
        node = f.name(m["to"], f.join(p, "to"), "a node name")
        takes = [w for w in walks if node in facts[w].nodes and name in facts[w].nodes[node].inputs]
        if not takes:
            where = [w for w in walks if node in facts[w].nodes]
            why = (f"node {node!r} has no input {name!r} in walk(s) {', '.join(where)}" if where
                   else f"no walk of kind {kind!r} has a node {node!r} (walks: {', '.join(walks)})")
            raise ScenarioError(p, f"walk-start input {name}->{node} can never be taken: {why}")
        pairs.append((name, node))
    return tuple(names), tuple(pairs)


def _check_inputs_are_sent(
    requests: dict[str, RequestKind], facts: dict[str, WalkFacts], implicit: bool
) -> None:
    """Every external input of every walk a request takes must come from somewhere.

    The conductor sends a walk's loop-back seeds itself and streams feed themselves; other
    external inputs must be supplied by the client (``graph.requests.KIND.inputs``) or persisted
    by an earlier walk of the same partition.
    """
    for kind in requests.values():
        for steps in kind.partitions.values():
            persisted: set[str] = set()
            for step in steps:
                wf = facts[step.walk]
                for name, dest in sorted(wf.external_inputs):
                    if name in kind.inputs or name in persisted or (name, dest) in kind.start_pairs:
                        continue
                    node = wf.nodes[dest]
                    path = f.join(f.join(node.path, "inputs"), node.inputs.index(name))
                    supply = ("list it in graph.requests" if implicit
                              else f"request kind {kind.name!r} neither supplies it (graph.requests."
                                   f"{kind.name}.inputs) nor persists it in an earlier walk")
                    raise ScenarioError(path, f"input {name!r} of node {dest} is never sent in walk "
                                              f"{step.walk!r}: no edge in the walk targets it, it is not a "
                                              f"loop-back input or a stream, and {supply}")
                persisted |= {e.name for n in wf.nodes.values() for e in n.outputs if e.persist}
                persisted |= {e.name for lp in wf.loops.values()
                              for e in lp.outputs + lp.accumulated_outputs if e.persist}


# ---------------------------------------------------------------------------------------------
# placement, runtime, workload, network, expect, limits


def _placement(
    raw: Any, facts: dict[str, WalkFacts], base_dir: Path, notes: list[str]
) -> tuple[Placement, dict[str, Any] | None]:
    """The placement, and (for ``mstar_config``) what was read from the config file, so that
    the scenario's fingerprint covers it."""
    if isinstance(raw, dict) and "mstar_config" in raw:
        return _mstar_config(raw, facts, base_dir, notes)
    m = f.mapping(raw, "placement", ("node_groups", "max_concurrent_requests", "mstar_config"),
                  required=("node_groups",))
    return _node_groups(m, "placement", facts, None), None


def _mstar_config(
    raw: dict[str, Any], facts: dict[str, WalkFacts], base_dir: Path, notes: list[str]
) -> tuple[Placement, dict[str, Any]]:
    """``placement: {mstar_config: PATH}``: read an mstar config YAML as mstar writes it.

    Its ``node_groups`` and ``max_concurrent_requests`` mean what they mean to mstar; its other
    keys (``model``, ``max_seq_len``, ``resources``, ...) are mstar's business and are ignored.
    Errors inside it name the config file and the key path within it.
    """
    f.mapping(raw, "placement", ("mstar_config",))
    rel = f.string(raw["mstar_config"], "placement.mstar_config")
    path = Path(rel) if Path(rel).is_absolute() else base_dir / rel
    if not path.is_file() and "/" not in rel:
        path = _shipped_config(rel) or path
    if not path.is_file():
        raise ScenarioError("placement.mstar_config", f"mstar config file {rel!r} not found "
                                                      f"(paths are relative to the scenario file; a "
                                                      f"bare name is a config shipped with mstar-ai)")
    cfg = read_yaml(path)
    try:
        if "node_groups" not in cfg:
            raise ScenarioError("node_groups", "missing required key (an mstar config lists its "
                                               "node_groups)")
        placement = _node_groups(cfg, "", facts, notes, source=rel)
    except ScenarioError as err:
        raise err.with_source(str(path)) from None
    resolved = {"mstar_config": rel, "node_groups": cfg["node_groups"],
                "max_concurrent_requests": cfg.get("max_concurrent_requests")}
    return placement, resolved


def _shipped_config(name: str) -> Path | None:
    """A config shipped in mstar-ai's ``default_configs`` (found without importing mstar)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("mstar.default_configs")
    except ImportError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / (
        name if name.endswith(".yaml") else name + ".yaml")
    return path if path.is_file() else None


def _node_groups(m: dict[str, Any], prefix: str, facts: dict[str, WalkFacts],
                 notes: list[str] | None, source: str = "") -> Placement:
    """``node_groups`` and ``max_concurrent_requests`` of `m`, whose key path is `prefix`.

    With `notes` (an mstar config file), a ``graph_walks`` entry naming a walk the scenario does
    not model is ignored with a note, as mstar ignores a group for walks it does not list;
    without (the scenario's own placement) it is an error, as a typo would be.
    """
    groups_path = f.join(prefix, "node_groups")
    groups_raw = f.sequence(m["node_groups"], groups_path, non_empty=True)
    groups: list[NodeGroup] = []
    for i, g in enumerate(groups_raw):
        path = f.join(groups_path, i)
        gm = f.mapping(g, path, ("node_names", "ranks", "graph_walks", "tp_size", "sp_size"),
                       required=("node_names", "ranks"))
        names = f.name_list(gm["node_names"], f.join(path, "node_names"), "a node name", non_empty=True)
        ranks_raw = f.sequence(gm["ranks"], f.join(path, "ranks"), non_empty=True)
        ranks = tuple(f.integer(r, f.join(f.join(path, "ranks"), j), minimum=0)
                      for j, r in enumerate(ranks_raw))
        if len(set(ranks)) != len(ranks):
            raise ScenarioError(f.join(path, "ranks"), "a rank is listed twice")
        walks = None
        if "graph_walks" in gm:
            walks = f.name_list(gm["graph_walks"], f.join(path, "graph_walks"), "a walk name")
            unknown = [w for w in walks if w not in facts]
            if unknown and notes is None:
                j = walks.index(unknown[0])
                raise ScenarioError(f.join(f.join(path, "graph_walks"), j),
                                    f"unknown walk {unknown[0]!r} (walks: {', '.join(facts)})")
            if unknown:
                notes.append(f"{source}: {path}.graph_walks: walk(s) {', '.join(unknown)} are not "
                             f"in this scenario; ignored")
                walks = tuple(w for w in walks if w in facts)
        tp = f.integer(gm.get("tp_size", 1), f.join(path, "tp_size"), minimum=1)
        sp = f.integer(gm.get("sp_size", 1), f.join(path, "sp_size"), minimum=1)
        if len(ranks) % (tp * sp):
            raise ScenarioError(f.join(path, "ranks"),
                                f"{len(ranks)} ranks do not split into instances of tp_size*sp_size "
                                f"= {tp * sp}")
        groups.append(NodeGroup(names, ranks, walks, tp, sp, path=path))
    all_ranks = sorted({r for g in groups for r in g.ranks})
    missing = sorted(set(range(all_ranks[-1] + 1)) - set(all_ranks))
    if missing:
        raise ScenarioError(groups_path,
                            f"ranks must be 0..N-1 without gaps (mstar names workers worker_0.."
                            f"worker_N-1); rank {missing[0]} is used by no group")
    for walk, wf in facts.items():
        for node in wf.nodes.values():
            if not any(node.name in g.node_names and (g.graph_walks is None or walk in g.graph_walks)
                       for g in groups):
                raise ScenarioError(groups_path,
                                    f"node {node.name!r} of walk {walk!r} ({node.path}) is not "
                                    f"placed: no node group lists it for that walk")
    mcr = m.get("max_concurrent_requests")
    return Placement(
        tuple(groups),
        None if mcr is None else f.integer(mcr, f.join(prefix, "max_concurrent_requests"), minimum=1),
    )


def _runtime(raw: Any) -> RuntimeChoice:
    if isinstance(raw, str):
        return RuntimeChoice(f.name(raw, "runtime", "a runtime name"))
    m = f.mapping(raw, "runtime", ("name", "options"), required=("name",))
    options = f.mapping(m.get("options", {}), "runtime.options", _any_key(m.get("options")))
    return RuntimeChoice(f.name(m["name"], "runtime.name", "a runtime name"), dict(options))


def _workload(raw: Any, requests: dict[str, RequestKind]) -> tuple[Phase, ...]:
    phases = []
    for i, item in enumerate(f.sequence(raw, "workload", non_empty=True)):
        path = f.join("workload", i)
        m = f.mapping(item, path, ("request", "count", "concurrency"), required=("request", "count"))
        rp = f.join(path, "request")
        if isinstance(m["request"], list):
            kinds = f.name_list(m["request"], rp, "a request kind", non_empty=True)
            paths = [f.join(rp, j) for j in range(len(kinds))]
        else:
            kinds = (f.name(m["request"], rp, "a request kind"),)
            paths = [rp]
        for kind, kpath in zip(kinds, paths, strict=True):
            if kind not in requests:
                raise ScenarioError(kpath, f"unknown request kind {kind!r} (kinds: {', '.join(requests)})")
        count = f.integer(m["count"], f.join(path, "count"), minimum=0)
        conc = f.integer(m.get("concurrency", 1), f.join(path, "concurrency"), minimum=1)
        phases.append(Phase(kinds, count, conc))
    return tuple(phases)


def _network(raw: Any) -> Network:
    m = f.mapping(raw, "network", ("transport", "latency_us", "bandwidth_gbps"))
    transport = f.string(m.get("transport", "shm"), "network.transport")
    if transport not in TRANSPORTS:
        raise ScenarioError("network.transport", f"expected one of {', '.join(TRANSPORTS)}, "
                                                 f"got {transport!r}")
    return Network(
        transport,
        f.number(m.get("latency_us", 10.0), "network.latency_us", minimum=0),
        f.number(m.get("bandwidth_gbps", 100.0), "network.bandwidth_gbps", positive=True),
    )


def _expect(raw: Any, facts: dict[str, WalkFacts], requests: dict[str, RequestKind]) -> Expect:
    m = f.mapping(raw, "expect", ("forwards_per_request", "per_request_kind"))
    fpr = _walk_counts(m.get("forwards_per_request", {}), "expect.forwards_per_request", facts)
    per_kind: dict[str, dict[str, dict[str, int]]] = {}
    pk = m.get("per_request_kind", {})
    for kind, body in f.mapping(pk, "expect.per_request_kind", _any_key(pk)).items():
        path = f.join("expect.per_request_kind", kind)
        if kind not in requests:
            raise ScenarioError(path, f"unknown request kind {kind!r} (kinds: {', '.join(requests)})")
        per_kind[kind] = _walk_counts(body, path, facts)
    return Expect(fpr, per_kind)


def _walk_counts(raw: Any, base: str, facts: dict[str, WalkFacts]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for walk, counts in f.mapping(raw, base, _any_key(raw)).items():
        path = f.join(base, walk)
        if walk not in facts:
            raise ScenarioError(path, f"unknown walk {walk!r} (walks: {', '.join(facts)})")
        out[walk] = {}
        for node, n in f.mapping(counts, path, _any_key(counts)).items():
            if node not in facts[walk].nodes:
                raise ScenarioError(f.join(path, node), f"walk {walk!r} has no node {node!r}")
            out[walk][node] = f.integer(n, f.join(path, node), minimum=0)
    return out


def _kv(raw: Any) -> KvConfig:
    m = f.mapping(raw, "kv", ("bytes_per_token",))
    return KvConfig(f.size(m.get("bytes_per_token", KvConfig().bytes_per_token), "kv.bytes_per_token"))


def _limits(raw: Any) -> Limits:
    m = f.mapping(raw, "limits", ("request_timeout_s",))
    return Limits(f.number(m.get("request_timeout_s", 600.0), "limits.request_timeout_s", positive=True))


# ---------------------------------------------------------------------------------------------
# schedule, faults, corpus (fuzzing; docs/scenarios.md "Schedules and faults")


def _schedule(raw: Any) -> Schedule:
    m = f.mapping(raw, "schedule", ("service_jitter", "link_jitter_us", "shuffle_ties"))
    jitter = f.number(m.get("service_jitter", 0.0), "schedule.service_jitter", minimum=0)
    if jitter >= 1:
        raise ScenarioError("schedule.service_jitter", f"expected a fraction below 1 (service "
                                                       f"times stay positive), got {jitter:g}")
    return Schedule(
        service_jitter=jitter,
        link_jitter_us=f.number(m.get("link_jitter_us", 0.0), "schedule.link_jitter_us", minimum=0),
        shuffle_ties=f.boolean(m.get("shuffle_ties", False), "schedule.shuffle_ties"),
    )


def _endpoint(value: Any, path: str, num_ranks: int) -> int | str:
    if value in ("conductor", "client"):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < num_ranks:
        return value
    raise ScenarioError(path, f"expected a rank 0..{num_ranks - 1}, conductor or client, "
                              f"got {f.describe(value)}")


_FAULT_KEYS = {
    "delay": ("kind", "message", "from", "to", "nth", "delay_ms"),
    "duplicate": ("kind", "message", "from", "to", "nth"),
    "drop": ("kind", "message", "from", "to", "nth"),
    "slow_rank": ("kind", "rank", "factor"),
    "crash": ("kind", "rank", "at_ms"),
}


def _faults(raw: Any, num_ranks: int) -> tuple[Fault, ...]:
    out = []
    for i, item in enumerate(f.sequence(raw, "faults")):
        path = f.join("faults", i)
        if not isinstance(item, dict):
            raise ScenarioError(path, f"expected a mapping with a kind, got {f.describe(item)}")
        kind = item.get("kind")
        if kind not in FAULT_KINDS:
            raise ScenarioError(f.join(path, "kind"), f"expected one of {', '.join(FAULT_KINDS)}, "
                                                      f"got {f.describe(kind)}")
        m = f.mapping(item, path, _FAULT_KEYS[kind], required=_FAULT_KEYS[kind][:2])
        if kind in ("slow_rank", "crash"):
            rank = m["rank"]
            if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_ranks:
                raise ScenarioError(f.join(path, "rank"), f"expected a rank 0..{num_ranks - 1}, "
                                                          f"got {f.describe(rank)}")
            out.append(Fault(kind, rank=rank,
                             factor=f.number(m.get("factor", 2.0), f.join(path, "factor"), positive=True),
                             at_ms=f.number(m.get("at_ms", 0.0), f.join(path, "at_ms"), minimum=0),
                             path=path))
            continue
        message = m["message"]
        if message not in FAULT_MESSAGES:
            raise ScenarioError(f.join(path, "message"), f"expected one of {', '.join(FAULT_MESSAGES)}, "
                                                         f"got {f.describe(message)}")
        src = None if m.get("from") is None else _endpoint(m["from"], f.join(path, "from"), num_ranks)
        dst = None if m.get("to") is None else _endpoint(m["to"], f.join(path, "to"), num_ranks)
        out.append(Fault(kind, message=message, src=src, dst=dst,
                         nth=f.integer(m.get("nth", 1), f.join(path, "nth"), minimum=1),
                         delay_ms=f.number(m.get("delay_ms", 1.0), f.join(path, "delay_ms"), minimum=0),
                         path=path))
    return tuple(out)


def _corpus(raw: Any) -> None:
    """A corpus case's metadata block: checked here, read by `simharness.explore.corpus`."""
    m = f.mapping(raw, "corpus", CORPUS_KEYS, required=("signature", "runtime", "status"))
    f.string(m["signature"], "corpus.signature")
    f.name(m["runtime"], "corpus.runtime", "a runtime name")
    if m["status"] not in CORPUS_STATUSES:
        raise ScenarioError("corpus.status", f"expected one of {', '.join(CORPUS_STATUSES)}, "
                                             f"got {f.describe(m['status'])}")
    for key in ("seed", "example", "nodes", "ranks"):
        if key in m:
            f.integer(m[key], f.join("corpus", key), minimum=0)
