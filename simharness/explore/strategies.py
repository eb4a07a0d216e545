"""Hypothesis strategies for scenarios built from mstar's primitives.

Every strategy yields plain data in the scenario schema (docs/scenarios.md), ready for
`simharness.scenario.parse_scenario`, so a generated example is also a YAML file that replays.

What is generated, and the mstar idioms it follows (a generated scenario must be one the real
runtime could meet: a false failure costs more than extra coverage):

* a walk is a sequence of 1-3 stages; a stage is a node, a parallel group of nodes (a member may
  be a two-node chain), or a loop. Each stage consumes every signal the previous stage produced
  (readiness is by name), so every input is sent and data flows to the client at the end;
* a loop body is a sequence whose first stage (a node or parallel branches, like BAGEL's CFG
  branches) reads the loop's state signals and whose last stage is one *combiner* node that sends
  the state back to every reader (loop-back edges, possibly to itself as ``combine_cfg`` does).
  The loop's declared output carries a state signal, matched by name, to whatever follows the
  loop (BAGEL's ``latents -> vae_decoder``). The first copy of the state comes from the
  conductor (signal-only seeds) or from the stage before the loop; the previous stage's signals
  may instead enter as external inputs, re-injected every iteration (Wan2.2's text embeddings).
  Only the combiner sends loop-backs, and body nodes send only inside the body or to the client
  (a per-iteration token, ``new_token``): a body node that also fed a node after the loop every
  iteration makes mstar's registry count that node twice, a shape no real model has;
* nested loops sit strictly inside an outer body (never first, never last), and the stage before
  them sends their state's first copy each outer iteration, so each inner pass is seeded;
* walks chain through persisted signals (prefill hands ``new_token`` to decode through the
  conductor) or start from client inputs; node names are shared across walks (one LLM in
  prefill and decode); request kinds take the whole chain, a prefix, or one self-contained walk;
* placements are mstar node groups over 1-8 ranks (densely numbered), with data-parallel replicas
  and walk-scoped groups that override the base group for one walk (PD disaggregation);
* workloads are one or two closed-loop phases; schedules and faults follow `schedules` and
  `faults`.

Generation is swarm-style (Groce et al., as in TigerBeetle's VOPR): each example first draws
which features it may use, so examples differ in kind and not only in size, and shrinking
switches features off. Every draw's simplest value is the simplest scenario (one node on rank 0,
no faults), which is what the shrinker moves towards.

Beyond loops, every mechanism of the runtime model, each behind its own feature (docs/fuzzing.md):

* dynamic loops: a ``stop:`` rule ended by the one node that reads the loop state first (copies on
  other worker graphs or ranks learn of it from STOP_LOOPS), counts fixed or drawn per request,
  and the decode idiom (an async node whose only input is the walk's input, sent back to itself)
  that speculates and overshoots after a stop;
* a streaming partition: a node of the main walks streams to a consumer in partition ``sink``
  under one of the four chunk policies; the consumer repeats until the final chunk, or, for a
  stream that continues after its producer is done, runs counted trigger-gated passes or a
  dynamic loop; a request kind may skip the sink;
* TP and SP instances over aligned rank blocks, their replicas, TP1 groups beside them;
* KV-cache nodes and a walk-scoped (PD) placement that makes a later walk pull the pages;
* faults on STOP_LOOPS messages.

`FAMILIES` names feature sets for searches restricted to one family of mechanisms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from simharness import faults
from simharness.faults.message import MessageFault
from simharness.scenario.lockstep import first_refusal
from simharness.scenario.model import NodeGroup

#: Features an example may switch on (swarm testing); `scenarios(features=...)` restricts them.
FEATURES = ("parallel", "loops", "nested_loops", "multi_member_loops", "several_walks",
            "shared_nodes", "sibling_groups", "multi_rank", "replicas", "walk_scoped",
            "concurrency", "costs", "schedule", "faults",
            # mechanisms of the runtime model beyond loops (issue 9); each one switchable
            "dynamic_loops", "drawn_stops", "speculation", "streams", "stream_skip", "tp", "sp",
            "kv", "stop_loops")

#: Feature families: what `scenarios(features=family(...))` restricts a search to.
FAMILIES: dict[str, frozenset[str]] = {
    "loops": frozenset({"loops", "nested_loops", "multi_member_loops", "parallel", "multi_rank",
                        "sibling_groups", "concurrency"}),
    "dynamic": frozenset({"loops", "multi_member_loops", "parallel", "multi_rank", "sibling_groups",
                          "dynamic_loops", "drawn_stops", "speculation", "concurrency"}),
    "streams": frozenset({"loops", "multi_rank", "several_walks", "shared_nodes", "concurrency",
                          "dynamic_loops", "drawn_stops", "speculation", "streams", "stream_skip"}),
    "tp": frozenset({"loops", "multi_member_loops", "parallel", "multi_rank", "sibling_groups",
                     "replicas", "concurrency", "dynamic_loops", "speculation", "tp", "sp"}),
    "kv": frozenset({"loops", "several_walks", "shared_nodes", "multi_rank", "walk_scoped",
                     "replicas", "concurrency", "dynamic_loops", "kv"}),
    "teardown": frozenset({"loops", "multi_member_loops", "parallel", "multi_rank",
                           "sibling_groups", "several_walks", "replicas", "concurrency"}),
}

SERVICE_MS = (1.0, 0.5, 2.0, 5.0, 10.0)
REQUEST_TIMEOUT_S = 60.0


# ---------------------------------------------------------------------------------------------
# graphs


@dataclass
class _Out:
    """Where a producer appends its output edges: a node's ``outputs`` or a loop's."""

    edges: list[dict[str, Any]] | None  # None: the walk's start (the conductor sends)
    #: a loop's declared outputs can only carry names its body produces
    loop: bool = False


@dataclass
class _Build:
    draw: Any
    features: frozenset[str]
    max_depth: int
    fresh: int = 0
    loops: int = 0
    walk_nodes: list[str] = field(default_factory=list)
    #: names used by earlier walks (candidates for sharing a node across walks)
    earlier: list[str] = field(default_factory=list)
    node_count: int = 0
    max_nodes: int = 10
    #: dynamic loops (a ``stop:`` rule): name -> the loop's mapping
    dynamic: dict[str, dict[str, Any]] = field(default_factory=dict)

    def on(self, feature: str) -> bool:
        return feature in self.features

    def node(self) -> dict[str, Any]:
        share = [n for n in self.earlier if n not in self.walk_nodes]
        if share and self.on("shared_nodes") and self.draw(st.booleans()):
            name = self.draw(st.sampled_from(share))
        else:
            name = _node_name(self.fresh)
            self.fresh += 1
        self.walk_nodes.append(name)
        self.node_count += 1
        return {"node": name, "inputs": [], "outputs": []}

    def room(self, n: int = 1) -> bool:
        return self.node_count + n <= self.max_nodes


def _node_name(i: int) -> str:
    letters = "abcdefghijkmnpqrstuvwxyz"
    return letters[i] if i < len(letters) else f"n{i}"


Frontier = list[tuple[_Out, str]]


def _connect(frontier: Frontier, consumer: dict[str, Any]) -> None:
    """Every signal of the frontier goes to `consumer` (one edge per producer and name)."""
    for out, sig in frontier:
        if sig not in consumer["inputs"]:
            consumer["inputs"].append(sig)
        if out.edges is not None:
            edge = {"name": sig, "to": consumer["node"]}
            if edge not in out.edges:
                out.edges.append(edge)


def _produces(node: dict[str, Any]) -> tuple[_Out, str]:
    return _Out(node["outputs"]), "y_" + node["node"]


def _plain_stage(b: _Build, frontier: Frontier) -> tuple[dict[str, Any], Frontier]:
    """A node, or (feature ``parallel``) 2-3 parallel members, each a node or a two-node chain."""
    width = b.draw(st.integers(1, 3)) if b.on("parallel") and b.room(2) else 1
    if width == 1:
        n = b.node()
        _connect(frontier, n)
        return n, [_produces(n)]
    members: list[dict[str, Any]] = []
    out: Frontier = []
    for _ in range(width):
        if not b.room():
            break
        first = b.node()
        _connect(frontier, first)
        if b.room() and b.draw(st.integers(0, 3)) == 3:
            second = b.node()
            _connect([_produces(first)], second)
            members.append({"sequential": [first, second]})
            out.append(_produces(second))
        else:
            members.append(first)
            out.append(_produces(first))
    if len(members) == 1:
        return members[0], out
    return {"parallel": members}, out


def _stages(b: _Build, frontier: Frontier, depth: int, lo: int, hi: int) -> tuple[list[dict], Frontier]:
    n = b.draw(st.integers(lo, hi))
    sections: list[dict[str, Any]] = []
    for _ in range(n):
        if not b.room():
            break
        loop_ok = b.on("loops") and depth < b.max_depth and b.room(1)
        if depth > 0:
            # A nested loop is seeded by the node(s) just before it on every outer iteration.
            loop_ok = loop_ok and b.on("nested_loops") and all(
                out.edges is not None and not out.loop for out, _ in frontier)
        if loop_ok and b.draw(st.booleans()):
            decode = (depth == 0 and b.on("dynamic_loops") and b.on("speculation")
                      and len(frontier) == 1 and frontier[0][0].edges is None)
            if decode and b.draw(st.booleans()):
                sec, frontier = _decode_loop(b, frontier)
            else:
                sec, frontier = _loop(b, frontier, depth)
        else:
            sec, frontier = _plain_stage(b, frontier)
        sections.append(sec)
    return sections, frontier


def _decode_loop(b: _Build, frontier: Frontier) -> tuple[dict[str, Any], Frontier]:
    """Orpheus's and Qwen3-Omni's decode loop at the start of a walk: one async node whose only
    input is the walk's input, which it sends back to itself, so the conductor's copy seeds the
    loop and the node speculates its next step (the step after the stop is the overshoot)."""
    b.loops += 1
    name = f"L{b.loops}"
    sig = frontier[0][1]
    n = b.node()
    n["inputs"].append(sig)
    n["outputs"].append({"name": sig, "to": n["node"]})
    if b.draw(st.booleans()):
        n["outputs"].append({"name": "tok_" + n["node"], "to": "client", "new_token": True})
    loop = {"name": name, "max_iters": b.draw(st.integers(1, 8)), "body": n, "outputs": [],
            "stop": {"by": [n["node"]]}}
    b.dynamic[name] = loop
    return {"loop": loop}, [(_Out(loop["outputs"], loop=True), sig)]


def _loop(b: _Build, frontier: Frontier, depth: int) -> tuple[dict[str, Any], Frontier]:
    b.loops += 1
    name = f"L{b.loops}"
    states = [f"s{b.loops}"] + ([f"t{b.loops}"] if b.draw(st.integers(0, 3)) == 3 else [])
    upstream = bool(frontier) and all(out.edges is not None and not out.loop for out, _ in frontier)
    # Nested loops are seeded by the stage before them on every outer iteration (the conductor
    # seeds a walk once); top-level loops are seeded by the conductor or by that stage.
    seed_upstream = upstream and (depth > 0 or b.draw(st.booleans()))
    multi = b.on("multi_member_loops") and b.room(2)
    # A dynamic loop (below) has one node that reads its state first: a second first reader in
    # another copy of the loop can finish the iteration before the stopper's STOP_LOOPS reaches
    # it, and its copy then advances and waits for a loop-back the stopped copies filtered
    # (mstar hangs on that shape, which no model has; tests/sim/test_dynamic_stop_race.py).
    dynamic = depth == 0 and b.on("dynamic_loops") and b.draw(st.booleans())

    # First body stage: the readers of the loop state.
    if multi and not dynamic:
        first, first_out = _plain_stage(b, [])
    else:
        n = b.node()
        first, first_out = n, [_produces(n)]
    readers = _first_nodes(first)
    for r in readers:
        r["inputs"].extend(states)
    seeder = frontier[0][0] if seed_upstream else None
    if seeder is not None:
        # One node sends the state's first copy (two senders would fill the next-iteration
        # slot too); the others' signals enter as external inputs.
        assert seeder.edges is not None
        for r in readers:
            for s in states:
                seeder.edges.append({"name": s, "to": r["node"]})
            _connect(frontier[1:], r)
    else:
        # The previous stage's signals are external inputs of the loop, re-injected each time.
        for r in readers:
            _connect(frontier, r)
    body: list[dict[str, Any]] = [first]
    inner = first_out
    if multi:
        middle, inner = _stages(b, inner, depth + 1, 0, 2)
        body.extend(middle)
    # The combiner: the last body node, the only one that sends the state back.
    single = len(body) == 1 and isinstance(first, dict) and "node" in first
    if single and not (multi and b.room() and b.draw(st.booleans())):
        comb = first
    else:
        comb = b.node()
        _connect(inner, comb)
        body.append(comb)
        if b.draw(st.booleans()):
            # combine_cfg also reads the state it sends (a self loop-back); its first copy
            # comes from wherever the other readers' first copy comes from.
            comb["inputs"].extend(s for s in states if s not in comb["inputs"])
            readers = [*readers, comb]
            if seeder is not None and seeder.edges is not None:
                seeder.edges.extend({"name": s, "to": comb["node"]} for s in states)
    if comb is first:
        readers = [comb]
    for r in readers:
        for s in states:
            comb["outputs"].append({"name": s, "to": r["node"]})
    if b.draw(st.integers(0, 3)) == 3:
        comb["outputs"].append({"name": "tok_" + comb["node"], "to": "client", "new_token": True})
    loop = {"name": name, "max_iters": b.draw(st.integers(1, 4)),
            "body": body[0] if len(body) == 1 else {"sequential": body}, "outputs": []}
    if dynamic:
        # A dynamic loop (a decode loop, Cosmos's denoise loop): the check_stop of the node that
        # reads the loop state first ends it after the request's drawn number of iterations (at
        # most max_iters); the rest of that iteration still runs, and copies of the loop on other
        # worker graphs or ranks learn of the stop from STOP_LOOPS.
        loop["max_iters"] = b.draw(st.integers(1, 8))
        loop["stop"] = {"by": [readers[0]["node"]]}
        b.dynamic[name] = loop
        if comb is first and not b.on("speculation"):
            # An async single-node loop speculates its next step (the overshoot after a stop);
            # without the feature the node is synchronous, as BAGEL's are.
            comb["async"] = False
    return {"loop": loop}, [(_Out(loop["outputs"], loop=True), states[0])]


def _first_nodes(section: dict[str, Any]) -> list[dict[str, Any]]:
    if "node" in section:
        return [section]
    if "parallel" in section:
        return [n for m in section["parallel"] for n in _first_nodes(m)]
    return _first_nodes(section["sequential"][0])


@st.composite
def graphs(draw: Any, features: frozenset[str] | None = None, max_depth: int = 2,
           max_nodes: int = 10) -> dict[str, Any]:
    """The ``graph:`` mapping of a scenario: walks, request kinds and node costs."""
    feats = frozenset(FEATURES) if features is None else frozenset(features)
    b = _Build(draw, feats, max_depth, max_nodes=max_nodes)
    n_walks = draw(st.integers(1, 3)) if "several_walks" in feats else 1
    walks: dict[str, Any] = {}
    needs: dict[str, list[str]] = {}  # walk -> client inputs
    persisted_from: dict[str, str] = {}  # walk -> the earlier walk whose persisted signal it reads
    handoff: str | None = None
    for w in range(n_walks):
        walk = f"w{w}"
        b.walk_nodes = []
        if handoff is not None and draw(st.booleans()):
            frontier: Frontier = [(_Out(None), handoff)]
            persisted_from[walk] = f"w{w - 1}"
            needs[walk] = []
        else:
            frontier = [(_Out(None), f"in{w}")]
            needs[walk] = [f"in{w}"]
        b.max_nodes = b.node_count + max(2, max_nodes // n_walks)
        sections, frontier = _stages(b, frontier, 0, 1, 3)
        for out, sig in frontier:
            assert out.edges is not None
            out.edges.append({"name": sig, "to": "client"})
        handoff = None
        if w + 1 < n_walks:
            out, sig = frontier[0]
            assert out.edges is not None
            out.edges.append({"name": sig, "to": "conductor"})
            handoff = sig
        walks[walk] = sections[0] if len(sections) == 1 else {"sequential": sections}
        b.earlier.extend(n for n in b.walk_nodes if n not in b.earlier)
    requests = _request_kinds(draw, list(walks), needs, persisted_from)
    stream = _stream_producer(draw, b, walks) if "streams" in feats else None
    _draw_stops(draw, b, walks, requests)
    graph: dict[str, Any] = {"walks": walks, "requests": requests}
    if stream is not None:
        _add_stream(draw, b, graph, *stream)
    costs: dict[str, Any] = {}
    if "costs" in feats:
        for name in b.earlier:
            facts: dict[str, Any] = {}
            ms = draw(st.sampled_from(SERVICE_MS))
            if ms != 1.0:
                facts["service_ms"] = ms
            if draw(st.booleans()):
                facts["max_batch"] = draw(st.integers(1, 2))
            if facts:
                costs[name] = facts
    if "kv" in feats:
        _add_kv(draw, walks, costs)
    if costs:
        graph["nodes"] = costs
    return graph


def _request_kinds(draw: Any, walks: list[str], needs: dict[str, list[str]],
                   persisted_from: dict[str, str]) -> dict[str, Any]:
    def kind(seq: list[str]) -> dict[str, Any]:
        inputs: list[str] = []
        for w in seq:
            inputs.extend(i for i in needs[w] if i not in inputs)
        return {"walks": seq, "inputs": inputs}

    kinds = {"k0": kind(walks)}
    if len(walks) > 1 and draw(st.booleans()):
        # A shorter kind: a prefix of the chain, or one walk that needs nothing persisted.
        options = [walks[:i] for i in range(1, len(walks))]
        options += [[w] for w in walks[1:] if w not in persisted_from]
        kinds["k1"] = kind(draw(st.sampled_from(options)))
    if draw(st.integers(0, 7)) == 7:
        # The same walk twice in one request (BAGEL's prefill_vae once per image).
        w = walks[0]
        kinds["k2"] = kind([w, w])
    return kinds


def _draw_stops(draw: Any, b: _Build, walks: dict[str, Any], requests: dict[str, Any]) -> None:
    """Each request kind's iteration count for every dynamic loop of its walks: fixed, or (feature
    ``drawn_stops``) drawn per request from a range (a decode's length varies by prompt)."""
    if not b.dynamic:
        return
    loops_of = {w: [lp for lp in _loops_in(root) if lp["name"] in b.dynamic] for w, root in walks.items()}
    for kind in requests.values():
        stops: dict[str, Any] = {}
        for w in dict.fromkeys(kind["walks"]):
            for lp in loops_of[w]:
                hi = draw(st.integers(1, lp["max_iters"]))
                if b.on("drawn_stops") and hi > 1 and draw(st.booleans()):
                    stops[lp["name"]] = {"uniform": [draw(st.integers(1, hi - 1)), hi]}
                else:
                    stops[lp["name"]] = hi
        if stops:
            kind["stops"] = stops


def _loops_in(section: dict[str, Any]) -> list[dict[str, Any]]:
    if "loop" in section:
        return [section["loop"], *_loops_in(section["loop"]["body"])]
    if "node" in section:
        return []
    return [lp for part in section.get("sequential", section.get("parallel", []))
            for lp in _loops_in(part)]


def _occurrences(section: dict[str, Any], name: str,
                 loops: tuple[dict[str, Any], ...] = ()) -> list[tuple[dict, tuple[dict, ...]]]:
    """(node mapping, enclosing loop mappings) for each occurrence of node `name` in `section`."""
    if "node" in section:
        return [(section, loops)] if section["node"] == name else []
    if "loop" in section:
        return _occurrences(section["loop"]["body"], name, (*loops, section["loop"]))
    return [o for part in section.get("sequential", section.get("parallel", []))
            for o in _occurrences(part, name, loops)]


#: Chunk policies of a stream (mstar ``mstar/streaming/chunk_policy.py``); `fixed_continue` is
#: ``fixed`` with ``continue_after_done`` (Qwen3-Omni's Thinker-to-Talker stream).
POLICIES = ("sliding_window", "left_context", "fixed", "fixed_continue")
MAIN, SINK = "main", "sink"


def _policy(draw: Any, kind: str) -> tuple[dict[str, Any], int]:
    """(the policy mapping, how many items one chunk advances at most)."""
    if kind == "sliding_window":
        window = draw(st.integers(1, 5))
        stride = draw(st.integers(1, window))
        return {"sliding_window": {"window": window, "stride": stride}}, window
    if kind == "left_context":
        chunk = draw(st.integers(1, 3))
        return {"left_context": {"chunk": chunk, "context": draw(st.integers(0, chunk))}}, chunk
    chunk = draw(st.integers(1, 3))
    body: dict[str, Any] = {"chunk": chunk}
    if kind == "fixed_continue":
        body["continue_after_done"] = True
    return {"fixed": body}, chunk


def _items(walks: dict[str, Any], producer: str, kind: dict[str, Any]) -> int:
    """The most items `producer` streams in one request of `kind` (dynamic loops at their bound)."""
    stops = kind.get("stops", {})
    total = 0
    for w in kind["walks"]:
        for node, loops in _occurrences(walks[w], producer):
            if not any(e.get("stream") for e in node["outputs"]):
                continue
            n = 1
            for lp in loops:
                bound = stops.get(lp["name"], lp["max_iters"])
                n *= bound["uniform"][1] if isinstance(bound, dict) else bound
            total += n
    return total


STREAM = "st"


def _stream_producer(draw: Any, b: _Build, walks: dict[str, Any]) -> tuple[str, str]:
    """Pick the node that streams (mostly one in a loop: a decode step streams a token per
    iteration) and add the streaming edge to each of its occurrences; a dynamic loop around it
    runs longer, as a decode does, so that streams span several chunks."""
    looped = [n for n in b.earlier if any(loops for w in walks.values()
                                          for _, loops in _occurrences(w, n))]
    pool = looped if looped and draw(st.integers(0, 3)) else b.earlier
    producer = draw(st.sampled_from(pool))
    consumer = _node_name(b.fresh)
    b.fresh += 1
    for w in walks.values():
        for node, loops in _occurrences(w, producer):
            node["outputs"].append({"name": STREAM, "to": consumer, "stream": True})
            for lp in loops:
                if "stop" in lp and lp["max_iters"] < 12:
                    lp["max_iters"] = draw(st.integers(lp["max_iters"], 12))
    return producer, consumer


def _add_stream(draw: Any, b: _Build, graph: dict[str, Any], producer: str, consumer: str) -> None:
    """A second partition fed by a stream (Orpheus's LLM to SNAC, Qwen3-Omni's Thinker to Talker).

    One node of the main walks (in a loop: one item per iteration; outside: one per pass) streams
    to the consumer node of the ``sink`` partition. With a policy that ends, the consumer walk
    repeats until the final chunk (a partial flush when the items do not divide); a stream that
    continues after its producer is done never ends, so the consumer runs a counted number of
    passes, or a dynamic loop, covering at least every item. A request kind may skip the sink
    (a text-only request has no Talker).
    """
    walks, requests = graph["walks"], graph["requests"]
    edge = STREAM
    kind = draw(st.sampled_from(POLICIES))
    policy, per_chunk = _policy(draw, kind)
    main_walks = list(walks)
    cons: dict[str, Any] = {"node": consumer, "inputs": [edge],
                            "outputs": [{"name": "y_" + consumer, "to": "client"}]}
    loop_consumer = kind == "fixed_continue" and b.on("dynamic_loops") and draw(st.booleans())
    if loop_consumer:
        # Qwen3-Omni's talker_decode: one chunk per step of a dynamic loop, state sent to itself.
        cons["inputs"].append("h")
        cons["outputs"].append({"name": "h", "to": consumer})
        cons["async"] = False
        walks["c"] = {"loop": {"name": "Lc", "max_iters": 1, "stop": {"by": [consumer]}, "body": cons}}
    else:
        if kind == "fixed_continue":
            # Qwen3-Omni's talker_prefill: a stream that never ends offers empty chunks for ever,
            # so each pass is also gated by a signal-only trigger the conductor sends per walk.
            cons["inputs"].append("trig")
        walks["c"] = cons
    graph["partitions"] = {MAIN: main_walks, SINK: ["c"]}
    graph["streams"] = [{"from": MAIN, "to": SINK, "edge": edge, "policy": policy}]
    out: dict[str, Any] = {}
    for name, k in requests.items():
        new = {"partitions": {MAIN: k["walks"]}, "inputs": k["inputs"]}
        if "stops" in k:
            new["stops"] = dict(k["stops"])
        if kind != "fixed_continue":
            new["partitions"][SINK] = [{"walk": "c", "until": "final_chunk"}]
        else:
            # Enough chunks for every item (more are empty chunks, as the Talker's are).
            n = -(-_items(walks, producer, k) // per_chunk) + draw(st.integers(0, 1))
            n = max(n, 1)
            if loop_consumer:
                walks["c"]["loop"]["max_iters"] = max(walks["c"]["loop"]["max_iters"], n)
                new["stops"] = {**new.get("stops", {}), "Lc": n}
                new["partitions"][SINK] = ["c"]
            else:
                new["partitions"][SINK] = [{"walk": "c", "times": n}] if n > 1 else ["c"]
                new["inputs"] = [*new["inputs"], "trig"]
        out[name] = new
    if b.on("stream_skip"):
        # A request kind that runs the main partition alone: the stream is an empty edge.
        k0 = requests["k0"]
        skip = {"partitions": {MAIN: k0["walks"]}, "inputs": k0["inputs"]}
        if "stops" in k0:
            skip["stops"] = dict(k0["stops"])
        out["ks"] = skip
    graph["requests"] = out


def _add_kv(draw: Any, walks: dict[str, Any], costs: dict[str, Any]) -> None:
    """KV-cache nodes (mstar's ``kv_label``): a node the walks share (an LLM that prefills and
    then decodes) keeps its request's KV pages on the rank that ran it; a prefill adds many
    tokens. Placement may run a later walk's copy elsewhere (PD disaggregation): a KV pull."""
    seen: dict[str, list[str]] = {}
    for w, ns in walk_nodes({"walks": walks}).items():
        for n in ns:
            seen.setdefault(n, []).append(w)
    if "c" in walks and len(seen) > 1:
        seen = {n: ws for n, ws in seen.items() if ws != ["c"]}
    names = sorted(seen, key=lambda n: (-len(seen[n]), n))
    for n in names[:draw(st.integers(1, min(2, len(names))))]:
        facts = costs.setdefault(n, {})
        facts["kv_label"] = "kv_" + n
        if draw(st.booleans()):
            facts["per_walk"] = {seen[n][0]: {"tokens": draw(st.sampled_from((4, 16, 64)))}}


def walk_nodes(graph: dict[str, Any]) -> dict[str, list[str]]:
    """walk -> its node names in declaration order, read from a ``graph:`` mapping."""
    return {walk: [sec["node"] for sec in _node_sections(root)]
            for walk, root in graph["walks"].items()}


def _node_sections(sec: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``node:`` sections of a walk's section, in declaration order."""
    if "node" in sec:
        return [sec]
    if "loop" in sec:
        return _node_sections(sec["loop"]["body"])
    return [n for part in sec.get("sequential", sec.get("parallel", [])) for n in _node_sections(part)]


def _stream_consumers(graph: dict[str, Any]) -> set[str]:
    """Nodes with an input that a stream feeds into their walk's partition (mstar's
    ``consumes_stream``), read from a ``graph:`` mapping."""
    into: dict[str, set[str]] = {}
    for s in graph.get("streams", []):
        into.setdefault(s["to"], set()).add(s["edge"])
    return {sec["node"] for part, walks in graph.get("partitions", {}).items() if part in into
            for walk in walks for sec in _node_sections(graph["walks"][walk])
            if into[part].intersection(sec.get("inputs", ()))}


def _as_mstar_accepts(groups: list[dict[str, Any]], per_walk: dict[str, list[str]],
                      consumers: set[str]) -> None:
    """Take lockstep off each group mstar would refuse (`scenario.lockstep`: a walk-scoped TP
    group with a streaming consumer, one whose node a later group places, or one that gives a
    rank a second lockstep-parallel node), one at a time until it accepts them all: its ranks
    stay, as replicas of one rank each."""
    while True:
        parsed = [NodeGroup(tuple(g["node_names"]), tuple(g["ranks"]),
                            tuple(g["graph_walks"]) if "graph_walks" in g else None,
                            g.get("tp_size", 1), g.get("sp_size", 1)) for g in groups]
        refusal = first_refusal(parsed, per_walk, consumers)
        if refusal is None:
            return
        groups[refusal.group].pop("tp_size", None)
        groups[refusal.group].pop("sp_size", None)


# ---------------------------------------------------------------------------------------------
# placements, workloads


def _ranks(draw: Any, max_ranks: int, replicas: bool, instance: int = 1) -> list[int]:
    """Ranks of one group: 1-3 replicas of an instance of `instance` ranks. A TP instance is an
    aligned block of ranks, as mstar configs write them, so two instances are the same ranks or
    share none (a rank that followed two leaders would get two REMOVEs)."""
    blocks = max_ranks // instance
    n = draw(st.integers(1, max(1, min(3, blocks)))) if replicas else 1
    if instance == 1:
        return draw(st.lists(st.integers(0, max_ranks - 1), min_size=n, max_size=n, unique=True))
    picked = draw(st.lists(st.integers(0, blocks - 1), min_size=n, max_size=n, unique=True))
    return [b * instance + j for b in picked for j in range(instance)]


def _group(draw: Any, members: list[str], top: int, feats: frozenset[str],
           shape: tuple[int, int]) -> dict[str, Any]:
    """One node group; (features ``tp``, ``sp``) its ranks may form lockstep instances of the
    scenario's TP x SP `shape`, several of them when ``replicas`` is on (replicas of a TP
    instance)."""
    tp, sp = shape if shape != (1, 1) and draw(st.integers(0, 3)) else (1, 1)
    group: dict[str, Any] = {"node_names": members,
                             "ranks": _ranks(draw, top, "replicas" in feats, tp * sp)}
    if tp > 1:
        group["tp_size"] = tp
    if sp > 1:
        group["sp_size"] = sp
    return group


@st.composite
def placements(draw: Any, graph: dict[str, Any], features: frozenset[str] | None = None,
               max_ranks: int = 8) -> dict[str, Any]:
    """The ``placement:`` mapping: node groups over 1..`max_ranks` dense ranks."""
    feats = frozenset(FEATURES) if features is None else frozenset(features)
    per_walk = walk_nodes(graph)
    names: list[str] = []
    for ns in per_walk.values():
        names.extend(n for n in ns if n not in names)
    # TP instances need ranks of their own: ``tp`` implies several ranks.
    multi = "multi_rank" in feats or "tp" in feats
    top = max_ranks if multi else 1
    n_groups = draw(st.integers(1, min(len(names), 4))) if "sibling_groups" in feats or multi else 1
    group_of = [draw(st.integers(0, n_groups - 1)) for _ in names]
    groups: list[dict[str, Any]] = []
    shape = (1, 1)
    if "tp" in feats and top >= 2:
        shape = (2, 2) if "sp" in feats and top >= 4 and draw(st.booleans()) else (2, 1)
    for g in range(n_groups):
        members = [n for n, gg in zip(names, group_of, strict=True) if gg == g]
        if members:
            groups.append(_group(draw, members, top, feats, shape))
    if "walk_scoped" in feats and len(per_walk) > 1:
        for _ in range(draw(st.integers(0, 2))):
            walk = draw(st.sampled_from(sorted(per_walk)))
            members = draw(st.lists(st.sampled_from(per_walk[walk]), min_size=1, unique=True))
            groups.append({**_group(draw, members, top, feats, shape), "graph_walks": [walk]})
    kv = sorted(n for n, facts in graph.get("nodes", {}).items() if "kv_label" in facts)
    if "kv" in feats and multi and kv:
        # PD disaggregation: a later walk of a KV-cache node runs it on its own ranks, so the
        # request's KV pages are pulled there from where the earlier walk left them.
        for n in kv:
            later = [w for w, ns in per_walk.items() if n in ns][1:]
            if later and draw(st.booleans()):
                walk = draw(st.sampled_from(later))
                groups.append({"node_names": [n], "ranks": _ranks(draw, top, "replicas" in feats),
                               "graph_walks": [walk]})
    # Ranks must be 0..N-1: renumber the ranks used, keeping their order.
    used = sorted({r for g in groups for r in g["ranks"]})
    dense = {r: i for i, r in enumerate(used)}
    for group in groups:
        group["ranks"] = [dense[r] for r in group["ranks"]]
    _as_mstar_accepts(groups, per_walk, _stream_consumers(graph))
    out: dict[str, Any] = {"node_groups": groups}
    if "concurrency" in feats and draw(st.booleans()):
        out["max_concurrent_requests"] = draw(st.integers(1, 3))
    return out


@st.composite
def workloads(draw: Any, graph: dict[str, Any], features: frozenset[str] | None = None) -> list[dict]:
    """One or two closed-loop phases over the graph's request kinds."""
    feats = frozenset(FEATURES) if features is None else frozenset(features)
    kinds = sorted(graph["requests"])
    n_phases = draw(st.integers(1, 2)) if len(kinds) > 1 or "concurrency" in feats else 1
    phases = []
    for _ in range(n_phases):
        count = draw(st.integers(1, 3))
        conc = draw(st.integers(1, count)) if "concurrency" in feats else 1
        phases.append({"request": draw(st.sampled_from(kinds)), "count": count, "concurrency": conc})
    return phases


# ---------------------------------------------------------------------------------------------
# schedules, faults


@st.composite
def schedules(draw: Any) -> dict[str, Any]:
    """The ``schedule:`` mapping: service-time jitter, link jitter, seeded tie-breaking."""
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["service_jitter"] = draw(st.sampled_from((0.1, 0.3, 0.6, 0.9)))
    if draw(st.booleans()):
        out["link_jitter_us"] = draw(st.sampled_from((10.0, 100.0, 1000.0, 10000.0)))
    if draw(st.booleans()):
        out["shuffle_ties"] = True
    return out


@st.composite
def fault_lists(draw: Any, num_ranks: int, tolerated_only: bool = False) -> list[dict[str, Any]]:
    """The ``faults:`` list: 0-2 faults of the registered kinds (`simharness.faults`), each drawn
    by its kind; the tolerated kinds first, then (unless `tolerated_only`) the others."""
    names = [n for n in faults.names() if faults.kind(n).tolerated or not tolerated_only]
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 2))):
        fault = faults.kind(draw(st.sampled_from(names))).draw(draw, num_ranks, out)
        if fault is not None:
            out.append(fault)
    return out


@st.composite
def stop_loops_faults(draw: Any, num_ranks: int, tolerated_only: bool = False) -> dict[str, Any]:
    """A fault on a STOP_LOOPS message (a peer's ``check_stop`` telling the other copies of a
    dynamic loop that it ended), of a kind that acts on one message (`MessageFault`); with
    `tolerated_only`, of a tolerated one."""
    kinds = [k for k in faults.kinds(tolerated_only) if isinstance(k, MessageFault)]
    # one kind to choose from takes no draw
    kind = kinds[0] if len(kinds) == 1 else faults.kind(draw(st.sampled_from(tuple(k.name for k in kinds))))
    assert isinstance(kind, MessageFault)
    fault: dict[str, Any] = {"kind": kind.name, "message": "stop_loops"}
    dst = draw(st.one_of(st.none(), st.integers(0, num_ranks - 1)))
    if dst is not None:
        fault["to"] = dst
    fault["nth"] = draw(st.integers(1, 3))
    fault.update(kind.draw_effect(draw))
    return fault


# ---------------------------------------------------------------------------------------------
# whole scenarios


@st.composite
def feature_sets(draw: Any, allowed: frozenset[str] | None = None) -> frozenset[str]:
    """Swarm testing: the subset of `allowed` features one example may use."""
    pool = FEATURES if allowed is None else tuple(f for f in FEATURES if f in allowed)
    return frozenset(f for f in pool if draw(st.booleans()))


@st.composite
def scenarios(draw: Any, features: frozenset[str] | None = None, tolerated_only: bool = False,
              max_ranks: int = 8, max_nodes: int = 10) -> dict[str, Any]:
    """A whole scenario as plain data: graph, placement, workload, seed, schedule and faults."""
    feats = draw(feature_sets(features))
    graph = draw(graphs(feats, max_nodes=max_nodes))
    placement = draw(placements(graph, feats, max_ranks=max_ranks))
    raw: dict[str, Any] = {
        "name": "fuzz",
        "seed": draw(st.integers(0, 2**16)),
        "graph": graph,
        "placement": placement,
        "workload": draw(workloads(graph, feats)),
        # Generated requests finish in well under a second of simulated time; a tight API
        # timeout ends a runaway (a graph that keeps cycling) quickly, in simulated time.
        "limits": {"request_timeout_s": REQUEST_TIMEOUT_S},
    }
    if "schedule" in feats:
        sched = draw(schedules())
        if sched:
            raw["schedule"] = sched
    num_ranks = 1 + max(r for g in placement["node_groups"] for r in g["ranks"])
    faults = draw(fault_lists(num_ranks, tolerated_only)) if "faults" in feats else []
    if "stop_loops" in feats and any("stop" in lp for w in graph["walks"].values()
                                     for lp in _loops_in(w)):
        faults.append(draw(stop_loops_faults(num_ranks, tolerated_only)))
    if faults:
        raw["faults"] = faults
    return raw
