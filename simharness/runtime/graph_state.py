"""The per-request state of one worker graph: slots, loops, readiness, completion.

This is the model of mstar's ``WorkerGraphIO`` and its registries (reference/mstar_semantics.md
sections 1.2, 2.1, 3.5), a pure state machine: signals in, routed outputs out, no I/O and no
clock. It follows the Python runtime's behaviour, quirks included, with two switches for the Rust
runtime (`Semantics`):

* ``loop_back_scope``: which loop-back pairs a loop drops when its last iteration completes.
  ``"all"`` is mstar's Python runtime and the fixed Rust runtime: every pair of the loop's
  (original, undivided) loop-back set. ``"local"`` is the Rust runtime before the fix, whose
  compiler kept only pairs whose destination is in this worker graph.
* ``park_in_done_loops``: the Rust runtime parks an edge that arrives for a node whose loop (or
  an enclosing loop) is already done, instead of making the node ready again.
* ``entities_by_name``: mstar's Python registries keep their entities in a dict keyed by name,
  nodes and loops alike, so a loop that shares its name with a node of the same registry
  collides with it: the one declared later replaces the other, the registry expects one entity
  fewer, a completion of either name counts, routes the survivor's outputs, and only the
  survivor is cleared at a reset (found by the fidelity suite; docs/fidelity.md). The Rust
  runtime keeps nodes and loops in separate id spaces.
* ``stream_ready_once``: mstar-ai 0.2.1's Python registry lets a chunk into a node whose every
  input is a stream only while the node is in ``ready_for_streaming``; the node leaves that set
  when a chunk fills it, and only a worker-graph clear puts it back, never a loop's advance. So
  such a node inside a loop takes one chunk per pass and the request hangs at the second
  iteration (docs/fidelity.md). The Rust profiles keep such a node ready at every iteration.

The compiled worker graph (`GraphSpec`, `Semantics`) lives in `graph_spec`.

Structure. A worker graph has *root entities* (top-level nodes and loops); a loop has its own
entities. Each registry counts completions; a loop completes an iteration when all its entities
completed, and either finishes (last iteration or finish signal) or advances: ``curr_iter += 1``,
each node's current slot is cleared and swapped with its next-iteration slot, inner loops are
reset, and the saved external inputs are re-routed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from simharness.graph.ir import Edge, Pair
from simharness.runtime.graph_spec import GraphSpec, LoopSpec, loop_of
from simharness.runtime.protocol import LoopStatus
from simharness.signals import Signal

# Ingest outcomes.
CURRENT = "current"        #: stored in the node's current slot
NEXT = "next"              #: stored in the next-iteration slot
PARKED = "parked"          #: stored, but the node's loop is done: it will not run (Rust)
REJECTED = "rejected"      #: refused (not this graph, not an input, or both slots full)

#: what a completion that finishes no loop filters out
NOTHING_FILTERED: frozenset[Pair] = frozenset()


def loop_at_rest(lp: LoopStatus) -> bool:
    """The loop is as a reset leaves it: iteration 0, not done, no finish signal."""
    return lp.curr_iter == 0 and not lp.done and not lp.finish


class LoopState:
    __slots__ = ("spec", "curr_iter", "done", "finish", "count", "reg_done", "saved", "saved_names")

    def __init__(self, spec: LoopSpec) -> None:
        self.spec = spec
        self.curr_iter = 0
        self.done = False
        self.finish = False
        self.count = 0
        self.reg_done = False
        #: the loop's external inputs, saved at first ingest, re-routed at every advance
        self.saved: list[Signal] = []
        self.saved_names: set[str] = set()

    def reset_metadata(self) -> None:
        self.saved.clear()
        self.saved_names.clear()
        self.curr_iter = 0
        self.finish = False
        self.done = False


class GraphState:
    """One request's state in one worker graph (mstar ``WorkerGraphIO``)."""

    __slots__ = ("spec", "cur", "nxt", "ready", "loops", "count", "done", "times_run", "scheduled",
                 "stream_spent")

    def __init__(self, spec: GraphSpec) -> None:
        self.spec = spec
        self.cur: dict[str, dict[str, Signal]] = {n: {} for n in spec.nodes}
        self.nxt: dict[str, dict[str, Signal]] = {n: {} for n in spec.nodes}
        #: nodes whose current slot was full at an ingest; add-only until the scheduler pops
        #: (mstar's ``ready_names``). A dict, so iteration follows insertion order.
        self.ready: dict[str, None] = {}
        self.loops = {name: LoopState(lp) for name, lp in spec.loops.items()}
        self.count = 0
        self.done = False
        self.times_run = 0
        #: nodes speculatively scheduled: they are never queued as ready (issue 3)
        self.scheduled: set[str] = set()
        #: streaming-only nodes a chunk has filled since the last reset: out of mstar's
        #: ``ready_for_streaming`` until then (``Semantics.stream_ready_once``)
        self.stream_spent: set[str] = set()

    # -- ingest -------------------------------------------------------------------------------

    def streaming_ready(self, node: str) -> bool:
        """The node holds every non-stream input: a stream chunk may be ingested now."""
        ns = self.spec.nodes[node]
        if node in self.stream_spent and self.spec.semantics.stream_ready_once:
            return False
        cur = self.cur[node]
        return all(i in cur for i in ns.plain_inputs)

    def ingest_chunk(self, sig: Signal) -> str:
        """A stream chunk, for this iteration only (mstar ingests chunks with can_buffer=False,
        and only into a node whose other inputs are all present)."""
        ns = self.spec.nodes.get(sig.dest)
        if ns is None or sig.name not in ns.stream_inputs or not self.streaming_ready(ns.name):
            return REJECTED
        return self.ingest(sig, can_buffer=False)

    def ingest(self, sig: Signal, can_buffer: bool = True) -> str:
        spec = self.spec
        ns = spec.nodes.get(sig.dest)
        if ns is None:
            return REJECTED
        name = sig.name
        savers = ns.saved_by.get(name)
        if savers is None:  # not an input of the node
            return REJECTED
        node = ns.name
        cur = self.cur[node]
        if name not in cur:
            cur[name] = sig
            where = CURRENT
        else:
            nxt = self.nxt[node]
            if not can_buffer or name in nxt:
                return REJECTED
            nxt[name] = sig
            where = NEXT
        lp = ns.loop
        if lp is not None:
            # (the innermost loop asked here: most loops have no parent to walk up to)
            if spec.parks and (self.loops[lp.name].done or (
                    lp.parent is not None and self._loop_or_ancestor_done(lp.parent))):
                # Rust: "the slot keeps it for reset; queueing the node would start the body again"
                return PARKED
            # The loop registries see every ingest on the way up: each loop saves the first copy
            # of each of its external inputs for re-injection at the next iteration.
            if savers:
                loops = self.loops
                for saver in savers:
                    st = loops[saver]
                    if name not in st.saved_names:
                        st.saved.append(sig)
                        st.saved_names.add(name)
        if len(cur) == ns.n_inputs:
            if not ns.plain_inputs:
                self.stream_spent.add(node)
            if node not in self.scheduled:
                self.ready[node] = None
        return where

    def _loop_or_ancestor_done(self, lp: LoopSpec | None) -> bool:
        while lp is not None:
            if self.loops[lp.name].done:
                return True
            lp = lp.parent
        return False

    # -- scheduling ---------------------------------------------------------------------------

    def pop_ready(self, node: str) -> bool:
        """The scheduler takes the node for a batch (mstar ``pop_ready_nodes``)."""
        return self.ready.pop(node, 0) is None

    def counter(self, node: str) -> int | None:
        lp = self.spec.nodes[node].loop
        return None if lp is None else self.loops[lp.name].curr_iter

    def loop_context(self, node: str) -> tuple[tuple[str, int, int, bool], ...]:
        """(loop, curr_iter, max_iters, last) for each enclosing loop, innermost first."""
        lp = self.spec.nodes[node].loop
        if lp is not None and lp.parent is None:  # most nodes: one loop
            st = self.loops[lp.name]
            i = st.curr_iter
            if st.finish:
                return ((lp.name, i, lp.max_iters, True),)
            ctxs = lp.contexts
            return ctxs[i] if i < len(ctxs) else lp.context_at(i)
        out = []
        while lp is not None:
            st = self.loops[lp.name]
            out.append((lp.name, st.curr_iter, lp.max_iters,
                        st.finish or lp.max_iters == st.curr_iter + 1))
            lp = lp.parent
        return tuple(out)

    def register_finish(self, loop: str) -> bool:
        """A dynamic stop for `loop` (mstar ``register_loop_finish_signal``); False if absent."""
        st = self.loops.get(loop)
        if st is None:
            return False
        st.finish = True
        return True

    # -- completion ---------------------------------------------------------------------------

    def clear_current(self, node: str) -> None:
        """Postprocess step 1: the batch consumed the node's current inputs."""
        self.cur[node].clear()

    def complete(self, node: str) -> tuple[Sequence[Edge | Signal], frozenset[Pair], list[str]]:
        """mstar ``WorkerGraphIO.mark_node_complete``.

        Returns the edges to route (declared `Edge`s for this completion's own outputs and the
        loop outputs; saved `Signal`s for re-injected external inputs), the loop-back pairs
        filtered out, and the names of loops that finished on this completion. When the edges
        are the node's own outputs and nothing else (most completions), they are the node's
        ``registry_outputs`` tuple itself, not a copy: the rank routes that tuple by a plan it
        keeps for it (`RankRuntime.complete`).
        """
        ns = self.spec.nodes[node]
        lp = ns.loop
        edges: Sequence[Edge | Signal] = ns.registry_outputs
        if lp is None:
            prev_done = self.done
            if ns.counted:
                self._root_complete()
            # Top-level nodes have no loop to swap their slots: the WG registry clears them here
            # (the node that holds the name in the registry, see `Semantics.entities_by_name`).
            if ns.clears_own_slot:
                self.cur[node].clear()
            if self.done and not prev_done:
                self.times_run += 1
            return edges, NOTHING_FILTERED, []
        st = self.loops[lp.name]
        if not st.reg_done and ns.counted:
            st.count += 1
            st.reg_done = st.count == lp.n_entities
        if not st.reg_done:
            return edges, NOTHING_FILTERED, []  # the iteration goes on: nothing else changes
        prev_done = self.done
        finished: list[str] = []
        added: list[Edge | Signal] = []
        filtered = self._complete_iter(st, added, finished)
        if added:
            edges = [*edges, *added]
        if filtered:
            # What a finishing loop drops is filtered out of all of this completion's edges.
            edges = [e for e in edges if (e.name, _dest(e)) not in filtered]
        if self.done and not prev_done:
            self.times_run += 1
        return edges, filtered, finished

    def _root_complete(self) -> None:
        """The worker graph's registry counts one of its entities complete."""
        if not self.done:
            self.count += 1
            self.done = self.count == self.spec.n_root

    def _complete_iter(self, st: LoopState, edges: list[Edge | Signal],
                       finished: list[str]) -> frozenset[Pair]:
        """Every entity of the loop completed this iteration: the loop finishes or advances.
        Adds what it routes to `edges`; returns the loop-back pairs a finishing loop drops."""
        spec = st.spec
        if spec.max_iters == st.curr_iter + 1 or st.finish:
            st.done = True
            finished.append(spec.name)
            self._clear_entities(spec)
            # The parent registry counts the loop as one entity. mstar ignores what that call
            # returns (an inner loop that closes the outer iteration loses the outer result).
            parent = spec.parent
            if parent is None:
                if spec.registry_name in self.spec.root_of:
                    self._root_complete()
            else:
                outer = self.loops[parent.name]
                if not outer.reg_done and spec.registry_name in parent.entity_of:
                    outer.count += 1
                    outer.reg_done = outer.count == parent.n_entities
                if outer.reg_done:
                    self._complete_iter(outer, list(spec.parent_outputs), finished)
            edges.extend(spec.outputs)
            return self.spec.drop_on_exit[spec.name]
        st.curr_iter += 1
        self._reset_entities_for_iter(spec)
        edges.extend(st.saved)
        return NOTHING_FILTERED

    def _clear_entities(self, spec: LoopSpec) -> None:
        """mstar ``GraphStateRegistry.clear`` on a loop's inner registry."""
        st = self.loops[spec.name]
        st.count = 0
        st.reg_done = False
        self._clear_keys(spec.entities)

    def _clear_keys(self, keys: tuple[str, ...]) -> None:
        for key in keys:
            loop = loop_of(key)
            if loop is None:
                self.cur[key].clear()
                self.nxt[key].clear()
            else:
                inner = self.loops[loop]
                self._clear_entities(inner.spec)
                inner.reset_metadata()

    def _reset_entities_for_iter(self, spec: LoopSpec) -> None:
        """mstar ``reset_for_iter``: clear each node's current slot and promote its next slot."""
        st = self.loops[spec.name]
        st.count = 0
        st.reg_done = False
        cur, nxt = self.cur, self.nxt
        for key in spec.entity_nodes:
            # Loop-back inputs that arrived early become current. The node is queued only at
            # its next ingest, even if the promoted slot is already full (mstar quirk Q5).
            cur[key], nxt[key] = nxt[key], {}
        for inner in spec.entity_loops:
            self._reset_entities_for_iter(inner)
            self.loops[inner.name].reset_metadata()

    # -- reset and inspection -----------------------------------------------------------------

    def reset(self) -> None:
        """mstar ``WorkerGraphIO.clear``: called right after the graph reports done."""
        self.count = 0
        self.done = False
        self.ready.clear()
        self.stream_spent.clear()
        self._clear_keys(self.spec.root)

    # -- the rest of the WorkerGraphState protocol ----------------------------------------

    def inputs(self, node: str) -> dict[str, Signal]:
        return self.cur[node]

    def next_inputs(self, node: str) -> dict[str, Signal]:
        return self.nxt[node]

    def mark_speculative(self, node: str) -> None:
        self.scheduled.add(node)

    def unmark_speculative(self, node: str) -> None:
        self.scheduled.discard(node)

    def held(self) -> Iterator[tuple[str, str, Signal]]:
        """(node, slot, signal) for every signal still held, nodes in graph order."""
        for node in self.spec.nodes:
            for sig in self.cur[node].values():
                yield node, CURRENT, sig
            for sig in self.nxt[node].values():
                yield node, NEXT, sig

    def is_clean(self) -> bool:
        return (not any(self.cur[n] or self.nxt[n] for n in self.spec.nodes)
                and all(loop_at_rest(st) for st in self.loops.values())
                and self.count == 0 and not self.ready)


def _dest(item: Edge | Signal) -> str:
    return item.to if isinstance(item, Edge) else item.dest
