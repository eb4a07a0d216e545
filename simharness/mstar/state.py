"""One request's state in one worker graph, held in mstar's own objects.

`MstarGraphState` implements the `WorkerGraphState` protocol (`simharness.runtime.protocol`)
over a real ``mstar.graph.graph_io.WorkerGraphIO`` (a deep copy of the worker graph's section
per request, as mstar's ``WorkerGraphQueues.add_request`` makes it); `MstarRankRuntime` is our
`RankRuntime` routing over such states. The `mstar` runtime (`simharness.mstar.runtime`) builds them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from simharness.graph.ir import Edge
from simharness.mstar.convert import CARRIES, Carried
from simharness.mstar.package import graph_module
from simharness.placement.layout import Layout
from simharness.runtime.graph_spec import GraphSpec, Semantics
from simharness.runtime.graph_state import CURRENT, NEXT, REJECTED, loop_at_rest
from simharness.runtime.protocol import WorkerGraphState
from simharness.runtime.rank import RankRuntime
from simharness.signals import Signal

# ---------------------------------------------------------------------------------------------
# one request in one worker graph


class _LoopView:
    """``state.loops[name]``: an mstar ``Loop`` seen through our `LoopState`'s names."""

    __slots__ = ("loop", "spec")

    def __init__(self, loop: Any, spec: Any) -> None:
        self.loop = loop
        self.spec = spec

    @property
    def curr_iter(self) -> int:
        return self.loop.curr_iter

    @property
    def done(self) -> bool:
        return self.loop.is_done

    @property
    def finish(self) -> bool:
        return self.loop._finish_signal


class MstarGraphState:
    """One request's state in one worker graph: a real ``WorkerGraphIO``, with the surface of
    our `GraphState` (what `RankRuntime`, the scheduler, fake nodes and stall reports call)."""

    def __init__(self, spec: GraphSpec, template: Any, g: Any | None = None) -> None:
        g = g or graph_module()
        self.spec = spec
        #: the real thing: mstar's per-request worker graph state
        self.io = g.WorkerGraphIO(copy.deepcopy(template), wg_id=spec.id)
        self._g = g
        self._registry = self.io.wg_state_registry
        self._nodes: dict[str, Any] = self.io.nodes
        #: the order in which nodes joined mstar's ``ready_names`` (a set): we serve ready work
        #: in that order so runs are deterministic and match our model's scheduling
        self._order: dict[str, None] = {}
        #: names of loops whose completion finished them, in the order mstar finished them
        self._finished_log: list[str | None] = []
        self.loops = {name: _LoopView(lp, spec.loops.get(name)) for name, lp in self.io.loops.items()}
        for lp in self.io.loops.values():
            self._watch(lp)

    def _watch(self, lp: Any) -> None:
        """Record when a loop's ``complete_iter`` finishes it rather than advancing it.

        The hook only observes: it calls mstar's method and tells the two outcomes apart by
        ``curr_iter`` (an advance adds one; a finish keeps it, or an enclosing loop's finish
        resets it to 0).
        """
        real: Callable[[], Any] = lp.complete_iter
        log = self._finished_log

        def complete_iter() -> Any:
            before = lp.curr_iter
            slot = len(log)
            log.append(None)
            out = real()
            if lp.curr_iter != before + 1:
                log[slot] = lp.name
            return out

        lp.complete_iter = complete_iter

    # -- ingest -------------------------------------------------------------------------------

    def ingest(self, sig: Signal, can_buffer: bool = True) -> str:
        node = self._nodes.get(sig.dest)
        if node is None:
            return REJECTED
        ge = self._g.GraphEdge(next_node=sig.dest, name=sig.name, persist=sig.persist,
                               conductor_new_token=sig.new_token)
        setattr(ge, CARRIES, sig)
        if not self.io.ingest_input(ge, can_buffer):
            return REJECTED
        if sig.dest in self._registry.ready_names and sig.dest not in self._order:
            self._order[sig.dest] = None
        return CURRENT if node.ready_signals.ready_inputs.get(sig.name) is ge else NEXT

    # -- scheduling ---------------------------------------------------------------------------

    @property
    def ready(self) -> list[str]:
        names = self._registry.ready_names
        if not names:
            if self._order:
                self._order.clear()
            return []
        out = [n for n in self._order if n in names]
        if len(out) != len(names):
            out += sorted(n for n in names if n not in self._order)
        return out

    def pop_ready(self, node: str) -> bool:
        """mstar ``WorkerGraphQueues.pop_ready_nodes``: discard from ``ready_names``."""
        names = self._registry.ready_names
        self._order.pop(node, None)
        if node in names:
            names.discard(node)
            return True
        return False

    def inputs(self, node: str) -> dict[str, Signal]:
        """The node's ``ready_signals``, read from mstar each time (mstar swaps the slots)."""
        return {name: getattr(ge, CARRIES)
                for name, ge in self._nodes[node].ready_signals.ready_inputs.items()}

    def next_inputs(self, node: str) -> dict[str, Signal]:
        """The node's ``ready_next_iter``."""
        return {name: getattr(ge, CARRIES)
                for name, ge in self._nodes[node].ready_next_iter.ready_inputs.items()}

    def mark_speculative(self, node: str) -> None:
        """mstar's per-node ``_speculatively_scheduled`` flag."""
        self._nodes[node]._speculatively_scheduled = True

    def unmark_speculative(self, node: str) -> None:
        if node in self._nodes:
            self._nodes[node]._speculatively_scheduled = False

    # -- streams ------------------------------------------------------------------------------

    def streaming_ready(self, node: str) -> bool:
        return node in self._registry.ready_for_streaming

    def ingest_chunk(self, sig: Signal) -> str:
        """mstar ``process_new_streaming_inputs``: only into a node in ``ready_for_streaming``,
        and only for this iteration (``can_buffer=False``)."""
        if sig.dest not in self._nodes or not self.streaming_ready(sig.dest):
            return REJECTED
        return self.ingest(sig, can_buffer=False)

    def counter(self, node: str) -> int | None:
        reg = self._nodes[node]._managing_registry
        return reg.loop.curr_iter if isinstance(reg, self._g.LoopStateRegistry) else None

    def loop_context(self, node: str) -> tuple[tuple[str, int, int, bool], ...]:
        """(loop, curr_iter, max_iters, last) for each enclosing loop, innermost first."""
        out = []
        reg = self._nodes[node]._managing_registry
        while isinstance(reg, self._g.LoopStateRegistry):
            lp = reg.loop
            out.append((lp.name, lp.curr_iter, lp.max_iters,
                        lp._finish_signal or lp.max_iters == lp.curr_iter + 1))
            reg = lp._managing_registry
        return tuple(out)

    def register_finish(self, loop: str) -> bool:
        """mstar ``register_loop_finish_signal``; False when this graph has no such loop."""
        if loop not in self.io.loops:
            return False
        self.io.register_loop_finish_signal(loop)
        return True

    # -- completion ---------------------------------------------------------------------------

    def clear_current(self, node: str) -> None:
        """Postprocess step 1 (mstar ``ready_signals.clear()`` on every node of the batch)."""
        self._nodes[node].ready_signals.clear()

    def complete(self, node: str) -> tuple[list[Edge | Signal], frozenset[tuple[str, str]], list[str]]:
        """mstar ``WorkerGraphIO.mark_node_complete``, in our terms: the routed items (our
        `Edge` for declared outputs, the `Signal` for a re-injected external input), the pairs
        filtered out, and the loops that finished."""
        log = self._finished_log
        log.clear()
        done = self.io.mark_node_complete(node)
        items: list[Edge | Signal] = []
        for ge in done.output_edges:
            carried = getattr(ge, CARRIES, None)
            if isinstance(carried, Carried):
                items.append(carried.edge)
            elif isinstance(carried, Signal):
                items.append(carried)
            else:
                raise RuntimeError(f"mstar routed an edge simharness did not make: "
                                   f"{ge.name}->{ge.next_node!r} from {node} in {self.spec.id}")
        finished = [name for name in log if name is not None]
        log.clear()
        return items, frozenset(done.filtered_signals), finished

    @property
    def done(self) -> bool:
        return self._registry.is_done

    @property
    def times_run(self) -> int:
        return self.io.num_times_run

    @property
    def count(self) -> int:
        return self._registry._num_completed_entities

    # -- reset and inspection -----------------------------------------------------------------

    def reset(self) -> None:
        """mstar ``WorkerGraphIO.clear``: called right after the graph reports done."""
        self.io.clear()
        self._order.clear()

    def held(self) -> Iterator[tuple[str, str, Signal]]:
        """(node, slot, signal) for every signal still held, nodes in graph order."""
        for name in self.spec.nodes:
            node = self._nodes[name]
            for ge in node.ready_signals.ready_inputs.values():
                yield name, CURRENT, getattr(ge, CARRIES)
            for ge in node.ready_next_iter.ready_inputs.values():
                yield name, NEXT, getattr(ge, CARRIES)

    def is_clean(self) -> bool:
        nodes_empty = all(not (n.ready_signals.ready_inputs or n.ready_next_iter.ready_inputs
                               or n.speculative_signals.ready_inputs)
                          for n in self._nodes.values())
        loops_reset = all(loop_at_rest(view) for view in self.loops.values())
        return (nodes_empty and loops_reset and self.count == 0
                and not self._registry.ready_names)


class MstarRankRuntime(RankRuntime):
    """Our worker-level routing (`RankRuntime`) over real mstar per-request state."""

    def __init__(self, rank: int, layout: Layout, templates: dict[str, Any]) -> None:
        super().__init__(rank, layout, Semantics())
        self._g = graph_module()
        self.templates = {wg: templates[wg] for wg in self.specs}

    def new_state(self, wg_id: str) -> WorkerGraphState:
        return MstarGraphState(self.specs[wg_id], self.templates[wg_id], self._g)


