"""The compiled form of one worker graph: the `Semantics` switches, and per node and per loop
what the per-request state (`graph_state.GraphState`) reads on every signal.

`GraphSpec` is built once per worker graph and rank and shared by every request's state: the
node specs (inputs, outputs, enclosing loop, streaming inputs), the loop specs (external inputs,
loop-back pairs, the pairs dropped when the loop exits) and the registries' entity keys. The
switches of `Semantics` are described in `graph_state`'s module docstring.
"""

from __future__ import annotations

from msgspec import Struct

from simharness.graph.derive import loop_back_pairs, loop_external_inputs
from simharness.graph.ir import Edge, Loop, Node, Pair, Parallel, Section, Sequential


class Semantics(Struct, frozen=True):
    loop_back_scope: str = "all"
    park_in_done_loops: bool = False
    entities_by_name: bool = True
    stream_ready_once: bool = True
    #: STOP_LOOPS is applied only when its stop time is newer than the one the rank knows, and a
    #: peer's data message tells the rank the stop times its sender knows (mstar-ai 0.2.1:
    #: ``Worker._stop_loops``, ``update_request_info``); off: a stop applies once per pass
    stop_times: bool = True


class NodeSpec:
    __slots__ = ("name", "inputs", "input_set", "n_inputs", "outputs", "output_ids", "loop",
                 "async_scheduling", "stream_inputs", "plain_inputs", "registry_outputs",
                 "counted", "clears_own_slot", "saved_by")

    def __init__(self, node: Node, loop: LoopSpec | None, stream_inputs: frozenset[str]) -> None:
        self.name = node.name
        self.inputs = node.inputs
        self.input_set = frozenset(node.inputs)
        self.n_inputs = len(node.inputs)
        #: inputs fed by a StreamBuffer (one chunk per pass), and the others
        self.stream_inputs = self.input_set & stream_inputs
        self.plain_inputs = tuple(i for i in node.inputs if i not in stream_inputs)
        self.outputs = node.outputs
        #: identities of this node's own output edges (a loop's outputs are other Edge objects)
        self.output_ids = frozenset(id(e) for e in node.outputs)
        self.loop = loop
        self.async_scheduling = node.async_scheduling
        # Set by `GraphSpec` once its registries are built (see `GraphSpec._index`):
        #: the outputs the node's registry routes when it completes (mstar
        #: ``managed_entities[name].outputs``: a loop's declared outputs where a loop of the
        #: same name replaced the node in a by-name registry)
        self.registry_outputs: tuple[Edge, ...] = node.outputs
        #: the node's registry counts its completion (it manages an entity of that name)
        self.counted = True
        #: a top-level node whose completion clears its slot (the registry holds it by name)
        self.clears_own_slot = loop is None
        #: input name -> the enclosing loops (innermost first) for which it is an external
        #: input: each saves the first copy it sees, to route it again at every advance. Every
        #: input has an entry (empty for most), so one lookup tells an ingest both whether the
        #: name is an input of the node and who saves it.
        self.saved_by: dict[str, tuple[str, ...]] = {name: () for name in node.inputs}


#: iterations of a loop whose contexts `LoopSpec.context_at` keeps
CONTEXTS_KEPT = 1024


class LoopSpec:
    __slots__ = (
        "name", "max_iters", "parent", "entities", "n_entities", "entity_of", "outputs",
        "declared", "ext_inputs", "loop_back", "local_loop_back", "dynamic", "stop_by", "depth",
        "entity_nodes", "entity_loops", "registry_name", "parent_outputs", "contexts",
    )

    def __init__(self, loop: Loop, parent: LoopSpec | None) -> None:
        self.name = loop.name
        self.max_iters = loop.max_iters
        self.parent = parent
        #: entity keys this loop's registry manages (see `GraphSpec._registry`)
        self.entities: tuple[str, ...] = ()
        self.n_entities = 0
        #: entity name -> its key in `entities`
        self.entity_of: dict[str, str] = {}
        #: declared outputs plus accumulated outputs (emitted once, when the loop finishes)
        self.outputs: tuple[Edge, ...] = loop.outputs + loop.accumulated_outputs
        #: mstar ``Loop.outputs``: what a registry sees as this entity's outputs
        self.declared: tuple[Edge, ...] = loop.outputs
        self.ext_inputs: frozenset[Pair] = loop_external_inputs(loop)
        self.loop_back: frozenset[Pair] = loop_back_pairs(loop)
        self.local_loop_back: frozenset[Pair] = frozenset()
        self.dynamic = loop.stop is not None
        #: nodes whose check_stop ends the loop (None: every node of the body)
        self.stop_by = loop.stop.by if loop.stop is not None else None
        # Set by `GraphSpec._index`: `entities` split into node names and inner loops (an
        # iteration's reset treats the two differently), the name the enclosing registry
        # knows this loop by, and the outputs that registry routes when the loop completes.
        self.entity_nodes: tuple[str, ...] = ()
        self.entity_loops: tuple[LoopSpec, ...] = ()
        self.registry_name = loop_key(loop.name)
        self.parent_outputs: tuple[Edge, ...] = ()
        #: iteration -> a top-level loop's `GraphState.loop_context` at that iteration without a
        #: finish signal: one tuple per iteration for every request (see `context_at`)
        self.contexts: list[tuple[tuple[str, int, int, bool], ...]] = []

    def context_at(self, i: int) -> tuple[tuple[str, int, int, bool], ...]:
        """The loop context of a top-level loop at iteration `i`, no finish signal: made once
        per iteration (kept for the first `CONTEXTS_KEPT` iterations) and shared by every
        request, since a forward's context is one of a handful of tuples. Asked only once the
        spec is final (at the first forward), so a spec changed after it was built (a broken
        runtime's ``max_iters``) is never cached before the change."""
        ctx = ((self.name, i, self.max_iters, self.max_iters == i + 1),)
        ctxs = self.contexts
        if i == len(ctxs) and i < CONTEXTS_KEPT:
            ctxs.append(ctx)
        return ctx


def loop_key(name: str) -> str:
    # Entity keys: node names for nodes, "loop:<name>" for loops, so a loop may share a node's name.
    return "loop:" + name


def loop_of(key: str) -> str | None:
    """The loop an entity key names (the inverse of `loop_key`); None for a node."""
    return key[5:] if key.startswith("loop:") else None


class GraphSpec:
    """The compiled, immutable part of one worker graph, shared by all requests."""

    def __init__(self, wg_id: str, walk: str, section: Section, semantics: Semantics,
                 stream_inputs: frozenset[str] = frozenset()) -> None:
        self.id = wg_id
        self.walk = walk
        self.semantics = semantics
        self.stream_inputs = stream_inputs
        self.nodes: dict[str, NodeSpec] = {}
        self.loops: dict[str, LoopSpec] = {}
        #: `Semantics.park_in_done_loops`, read at every ingest
        self.parks = semantics.park_in_done_loops
        self.root, self.root_of = self._registry(self._compile(section, None))
        self.n_root = len(self.root)
        self._index()
        if semantics.loop_back_scope == "local":  # (only this scope reads them)
            for lp in self.loops.values():
                lp.local_loop_back = frozenset(p for p in lp.loop_back if p[1] in self.nodes)
        #: nodes whose next iteration mstar would speculate (see `speculates`)
        self.spec_nodes = frozenset(n for n in self.nodes if self.speculates(n))
        #: what a finishing loop drops: the whole set, or (pre-fix Rust) the local pairs only
        self.drop_on_exit = {
            name: (lp.local_loop_back if semantics.loop_back_scope == "local" else lp.loop_back)
            for name, lp in self.loops.items()
        }

    def _index(self) -> None:
        """What a completion reads of the registries, worked out once per worker graph rather
        than looked up at every forward."""
        for ns in self.nodes.values():
            of = self.root_of if ns.loop is None else ns.loop.entity_of
            ns.registry_outputs = self.entity_outputs(of, ns.name)
            ns.counted = ns.name in of
            ns.clears_own_slot = ns.loop is None and of.get(ns.name, ns.name) == ns.name
            for name in ns.inputs:
                savers = []
                lp = ns.loop
                while lp is not None:
                    if (name, ns.name) in lp.ext_inputs:
                        savers.append(lp.name)
                    lp = lp.parent
                ns.saved_by[name] = tuple(savers)
        for lp in self.loops.values():
            lp.entity_nodes = tuple(k for k in lp.entities if loop_of(k) is None)
            lp.entity_loops = tuple(self.loops[inner] for k in lp.entities
                                    if (inner := loop_of(k)) is not None)
            lp.registry_name = self.entity_name(loop_key(lp.name))
            of = self.root_of if lp.parent is None else lp.parent.entity_of
            lp.parent_outputs = self.entity_outputs(of, lp.registry_name)

    def speculates(self, node: str) -> bool:
        """mstar speculates the next iteration of an async single-node loop whose every input is
        its own loop-back (reference 4.5: "in practice, speculation = the next iteration of a
        single-node loop with no external inputs")."""
        ns = self.nodes[node]
        lp = ns.loop
        # The node's own outputs must feed every input it has: mstar only speculates targets
        # inside the same worker graph, from the outputs the batch is about to produce.
        own = {e.name for e in ns.outputs if e.to == node}
        return (ns.async_scheduling and lp is not None and lp.n_entities == 1
                and not ns.stream_inputs and all(i in own for i in ns.inputs))

    def _compile(self, section: Section, loop: LoopSpec | None) -> list[str]:
        """Register nodes and loops; return the entity keys managed directly by `loop`."""
        if isinstance(section, Node):
            self.nodes[section.name] = NodeSpec(section, loop, self.stream_inputs)
            return [section.name]
        if isinstance(section, Loop):
            spec = LoopSpec(section, loop)
            self.loops[section.name] = spec
            spec.entities, spec.entity_of = self._registry(self._compile(section.body, spec))
            spec.n_entities = len(spec.entities)
            return [loop_key(section.name)]
        assert isinstance(section, Sequential | Parallel)
        out: list[str] = []
        for part in section.sections:
            out.extend(self._compile(part, loop))
        return out

    def _registry(self, keys: list[str]) -> tuple[tuple[str, ...], dict[str, str]]:
        """The entities one registry manages, and name -> entity key.

        mstar's Python registry is a dict keyed by name: a loop named like a node of the same
        registry replaces it (or is replaced by it), keeping the first one's position.
        """
        of: dict[str, str] = {}
        for key in keys:
            of[self.entity_name(key)] = key
        return tuple(of.values()), of

    def entity_name(self, key: str) -> str:
        """The name a registry knows an entity by."""
        loop = loop_of(key)
        return loop if loop is not None and self.semantics.entities_by_name else key

    def entity_outputs(self, of: dict[str, str], name: str) -> tuple[Edge, ...]:
        """mstar ``managed_entities[name].outputs``: the outputs of the entity that holds that
        name in the registry (a loop's declared outputs, for a loop)."""
        key = of.get(name, name)
        loop = loop_of(key)
        return self.nodes[key].outputs if loop is None else self.loops[loop].declared
