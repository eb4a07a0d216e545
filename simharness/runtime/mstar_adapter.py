"""``mstar``: the real mstar graph code as the runtime under test.

Where the other runtimes are our model of mstar, this adapter runs mstar's own graph classes
from the ``mstar-ai`` package (pinned at 0.2.1; ``mstar.graph.*`` is plain Python) inside our
drivers, so the harness tests the real thing:

* the scenario's walks become mstar ``GraphNode`` / ``Sequential`` / ``Parallel`` / ``Loop``
  objects (`to_mstar`), so loops derive their own external and loop-back inputs;
* the walks are divided into worker graphs by mstar's own ``_divide_into_worker_graphs``
  (``mstar/model/base.py``) when that module can be imported. It imports torch, triton, pyzmq
  and msgpack; without them the adapter says so (`MstarRuntime.notes`, printed on stderr by the
  CLI) and converts the worker graphs of our placement instead, with each loop copy's external
  and loop-back inputs set as mstar's placement sets them. Either way the division must agree
  with the `Layout` the drivers use, or the run stops with `PlacementMismatch`;
* each request's state in each worker graph is a real ``mstar.graph.graph_io.WorkerGraphIO``
  over a deep copy of the worker graph's section, as mstar's ``WorkerGraphQueues.add_request``
  makes it. `MstarGraphState` wraps it with the surface our worker loop, scheduler, fake nodes
  and stall reports read (`simharness.runtime.graph_state.GraphState`'s): every answer is read
  from, and every change is made through, the mstar objects;
* the worker-level routing around it (same or sibling worker graph, peer ranks, client,
  conductor, the done-sweep) is our `RankRuntime`, which follows mstar's
  ``process_node_outputs`` (reference/mstar_semantics.md section 3.4).

Our `Signal` objects stay the identity of every edge: an ingested signal travels inside mstar as
a ``GraphEdge`` that carries it, and a declared output edge carries the scenario `Edge` it came
from, so routing, traces and checks work unchanged.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from simharness.errors import UsageError
from simharness.graph.derive import loop_back_pairs, loop_external_inputs
from simharness.graph.ir import CLIENT, CONDUCTOR, Edge, Loop, Node, Parallel, Section, Sequential
from simharness.placement.layout import Layout
from simharness.runtime.graph_state import CURRENT, NEXT, REJECTED, GraphSpec, GraphState, Semantics
from simharness.runtime.protocol import LoopPolicy
from simharness.runtime.rank import RankRuntime
from simharness.runtime.signals import Signal

PINNED = "0.2.1"
PIP_INSTALL = f"pip install --no-deps --ignore-requires-python mstar-ai=={PINNED}"
#: mstar's special destinations (``mstar/graph/special_destinations.py``)
EMIT_TO_CLIENT = "emit_to_client"
EMPTY_DESTINATION = ""
#: the attribute on an mstar GraphEdge that carries our Edge (declared) or Signal (ingested)
CARRIES = "_simharness"
PLACEMENT_CHOICES = ("auto", "mstar", "simharness")


class PlacementMismatch(RuntimeError):
    """mstar's division of a walk differs from the `Layout` our drivers run."""


# ---------------------------------------------------------------------------------------------
# importing mstar


_GRAPH: Any = None
_DIVIDE: tuple[Any, str] | None = None


def graph_module() -> Any:
    """``mstar.graph.graph_io`` (which re-exports ``mstar.graph.base``), or a UsageError."""
    global _GRAPH
    if _GRAPH is None:
        try:
            _GRAPH = importlib.import_module("mstar.graph.graph_io")
        except ImportError as exc:
            raise UsageError(f"runtime 'mstar' needs the mstar-ai package ({exc}); install it "
                             f"with: {PIP_INSTALL}") from None
    return _GRAPH


def is_available() -> bool:
    try:
        graph_module()
    except UsageError:
        return False
    return True


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mstar-ai")
    except PackageNotFoundError:
        return None


def mstar_divider() -> tuple[Any, str]:
    """(mstar's ``Model`` class, "") when ``mstar.model.base`` imports, else (None, why not)."""
    global _DIVIDE
    if _DIVIDE is None:
        try:
            base = importlib.import_module("mstar.model.base")
            _DIVIDE = (base.Model, "")
        except Exception as exc:  # an ImportError, or anything the heavy imports raise
            _DIVIDE = (None, f"{type(exc).__name__}: {exc}")
    return _DIVIDE


# ---------------------------------------------------------------------------------------------
# our IR -> mstar objects


class _Carried:
    """Our scenario `Edge`, riding on an mstar GraphEdge. Deep copies share it (mstar deep-copies
    a worker graph's section per request; the declared edge it stands for is the same)."""

    __slots__ = ("edge",)

    def __init__(self, edge: Edge) -> None:
        self.edge = edge

    def __deepcopy__(self, memo: dict[int, Any]) -> _Carried:
        return self


def _dest(to: str) -> str:
    if to == CLIENT:
        return EMIT_TO_CLIENT
    if to == CONDUCTOR:
        return EMPTY_DESTINATION
    return to


def _graph_edge(g: Any, edge: Edge) -> Any:
    ge = g.GraphEdge(next_node=_dest(edge.to), name=edge.name, persist=edge.persist,
                     conductor_new_token=edge.new_token)
    setattr(ge, CARRIES, _Carried(edge))
    return ge


def to_mstar(section: Section, g: Any | None = None) -> Any:
    """Build mstar graph objects for one of our sections.

    A loop as written gets no ``_external_inputs`` / ``_loop_back_inputs``: mstar derives them
    from the body. A per-worker-graph copy made by our placement passes its sets explicitly, as
    mstar's placement does.
    """
    g = g or graph_module()
    if isinstance(section, Node):
        return g.GraphNode(name=section.name, input_names=set(section.inputs),
                           outputs=[_graph_edge(g, e) for e in section.outputs],
                           enable_async_scheduling=section.async_scheduling)
    if isinstance(section, Sequential):
        return g.Sequential([to_mstar(s, g) for s in section.sections])
    if isinstance(section, Parallel):
        return g.Parallel([to_mstar(s, g) for s in section.sections])
    assert isinstance(section, Loop)
    return g.Loop(
        section=to_mstar(section.body, g),
        max_iters=section.max_iters,
        outputs=[_graph_edge(g, e) for e in section.outputs],
        name=section.name,
        accumulated_outputs=[_graph_edge(g, e) for e in section.accumulated_outputs],
        _external_inputs=None if section.ext_inputs is None else set(section.ext_inputs),
        _loop_back_inputs=None if section.loop_back is None else set(section.loop_back),
    )


def mstar_shape(section: Any, g: Any | None = None) -> str:
    """The same one-line shape `Layout.describe` prints, for an mstar section."""
    g = g or graph_module()
    if isinstance(section, g.GraphNode):
        return section.name
    if isinstance(section, g.Loop):
        return f"Loop({section.name}: {mstar_shape(section.section, g)})"
    inner = ", ".join(mstar_shape(s, g) for s in section.sections)
    return f"{'Seq' if isinstance(section, g.Sequential) else 'Par'}[{inner}]"


class _Part:
    __slots__ = ("name", "graph_walks")

    def __init__(self, name: str, walks: tuple[str, ...]) -> None:
        self.name = name
        self.graph_walks = set(walks)


class _Conn:
    __slots__ = ("from_partition", "to_partition", "edge_name")

    def __init__(self, src: str, dst: str, edge: str) -> None:
        self.from_partition = src
        self.to_partition = dst
        self.edge_name = edge


class _ModelShape:
    """Stands in for a Model when calling mstar's per-walk division: the scenario's partitions
    and stream connections, which is all that method reads of the model."""

    def __init__(self, layout: Layout) -> None:
        sc = layout.scenario
        self._parts = [_Part(name, walks) for name, walks in sc.partitions.items()]
        self.connections = [_Conn(c.src, c.dst, c.edge) for c in sc.connections]

    def get_partitions(self) -> list[Any]:
        return self._parts

    def get_partition_topology(self) -> _ModelShape:
        return self


def mstar_worker_graphs(layout: Layout, model_cls: Any) -> dict[str, Any]:
    """Divide every walk with mstar's own code; return our worker graph id -> mstar section.

    Each walk is converted whole (so mstar derives each loop's sets), divided by
    ``Model._get_worker_graphs_for_graph_walk`` (mstar's node-group rule, then
    ``_divide_into_worker_graphs``), and matched piece by piece against our layout.
    """
    g = graph_module()
    groups = [{"node_names": list(ng.node_names), "ranks": list(ng.ranks),
               "tp_size": ng.tp_size, "sp_size": ng.sp_size,
               **({} if ng.graph_walks is None else {"graph_walks": list(ng.graph_walks)})}
              for ng in layout.scenario.placement.node_groups]
    out: dict[str, Any] = {}
    shape = _ModelShape(layout)
    for walk, root in layout.scenario.walks.items():
        theirs = model_cls._get_worker_graphs_for_graph_walk(shape, walk, to_mstar(root, g), groups)
        ours = layout.by_walk.get(walk, ())
        if len(theirs) != len(ours):
            raise PlacementMismatch(
                f"walk {walk!r}: mstar divides it into {len(theirs)} worker graphs "
                f"({'; '.join(mstar_shape(w.section, g) for w in theirs)}), simharness into "
                f"{len(ours)} ({'; '.join(w.id for w in ours)})")
        for mine, real in zip(ours, theirs, strict=True):
            check_same_worker_graph(mine.id, mine.section, mine.group, real.section,
                                    real._group_id, g)
            out[mine.id] = real.section
    return out


def check_same_worker_graph(wg_id: str, ours: Section, group: int, theirs: Any, their_group: int,
                            g: Any | None = None) -> None:
    """Raise `PlacementMismatch` unless an mstar worker graph matches ours: shape, node group,
    and for every loop copy its external inputs, loop-back inputs and kept outputs."""
    from simharness.placement.layout import _shape

    g = g or graph_module()
    problems = []
    if _shape(ours) != mstar_shape(theirs, g):
        problems.append(f"shape {mstar_shape(theirs, g)} (simharness: {_shape(ours)})")
    if group != their_group:
        problems.append(f"node group {their_group} (simharness: {group})")
    our_loops = {lp.name: lp for lp in _iter_loops(ours)}
    for name, lp in theirs.get_loops().items():
        mine = our_loops.get(name)
        if mine is None:
            continue
        for what, real, model in (
            ("external inputs", set(lp._external_inputs), set(loop_external_inputs(mine))),
            ("loop-back inputs", set(lp._loop_back_inputs), set(loop_back_pairs(mine))),
            ("outputs", [(e.name, e.next_node) for e in lp.outputs + lp.accumulated_outputs],
             [(e.name, _dest(e.to)) for e in mine.outputs + mine.accumulated_outputs]),
        ):
            if real != model:
                problems.append(f"loop {name!r} {what} {sorted(real)} (simharness: {sorted(model)})")
    if problems:
        raise PlacementMismatch(f"worker graph {wg_id}: mstar's placement gives " + "; ".join(problems))


def _iter_loops(section: Section) -> Iterator[Loop]:
    from simharness.graph.ir import iter_loops

    return iter_loops(section)


# ---------------------------------------------------------------------------------------------
# one request in one worker graph


class _SlotView:
    """``state.cur[node]`` / ``state.nxt[node]``: a node's slot as name -> Signal, read from the
    mstar node's ``ready_signals`` / ``ready_next_iter`` each time (mstar swaps them)."""

    __slots__ = ("_nodes", "_attr")

    def __init__(self, nodes: dict[str, Any], attr: str) -> None:
        self._nodes = nodes
        self._attr = attr

    def __getitem__(self, node: str) -> dict[str, Signal]:
        slot = getattr(self._nodes[node], self._attr)
        return {name: getattr(ge, CARRIES) for name, ge in slot.ready_inputs.items()}


class _SpeculativeFlags:
    """mstar's per-node ``_speculatively_scheduled`` flags, with the set methods our worker loop
    calls (`add`, `discard`)."""

    __slots__ = ("_nodes",)

    def __init__(self, nodes: dict[str, Any]) -> None:
        self._nodes = nodes

    def add(self, node: str) -> None:
        self._nodes[node]._speculatively_scheduled = True

    def discard(self, node: str) -> None:
        if node in self._nodes:
            self._nodes[node]._speculatively_scheduled = False


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

    @property
    def count(self) -> int:
        return self.loop.inner_registry._num_completed_entities


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
        self.cur = _SlotView(self._nodes, "ready_signals")
        self.nxt = _SlotView(self._nodes, "ready_next_iter")
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

    @property
    def scheduled(self) -> _SpeculativeFlags:
        """mstar's ``_speculatively_scheduled`` flags, as the set our worker loop adds to."""
        return _SpeculativeFlags(self._nodes)

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
            if isinstance(carried, _Carried):
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
        loops_reset = all(lp.curr_iter == 0 and not lp.is_done and not lp._finish_signal
                          for lp in self.io.loops.values())
        return (nodes_empty and loops_reset and self.count == 0
                and not self._registry.ready_names)


# ---------------------------------------------------------------------------------------------
# the rank and the runtime


class MstarRankRuntime(RankRuntime):
    """Our worker-level routing (`RankRuntime`) over real mstar per-request state."""

    def __init__(self, rank: int, layout: Layout, templates: dict[str, Any]) -> None:
        super().__init__(rank, layout, Semantics())
        self._g = graph_module()
        self.templates = {wg: templates[wg] for wg in self.specs}

    def new_state(self, wg_id: str) -> GraphState:
        return MstarGraphState(self.specs[wg_id], self.templates[wg_id], self._g)  # type: ignore[return-value]


@dataclass
class _Built:
    layout: Layout
    templates: dict[str, Any]


class MstarRuntime:
    """The real mstar graph code (mstar-ai) in our drivers.

    Options (``runtime: {name: mstar, options: {...}}``): ``batching`` and ``drain_barrier`` as
    for the reference profiles (`LoopPolicy`), and ``placement``: ``auto`` (mstar's own
    division when ``mstar.model.base`` imports, else ours, with a note), ``mstar`` (mstar's or
    fail) or ``simharness`` (ours, converted to mstar objects).
    """

    name = "mstar"
    description = f"the real mstar graph code (mstar-ai {PINNED}: WorkerGraphIO, loops, registries)"

    def __init__(self, batching: str = "minibatch", drain_barrier: bool = False,
                 placement: str = "auto") -> None:
        graph_module()
        if placement not in PLACEMENT_CHOICES:
            raise ValueError(f"placement must be one of {', '.join(PLACEMENT_CHOICES)}, "
                             f"got {placement!r}")
        self.policy = LoopPolicy(batching=batching, drain_barrier=drain_barrier)
        self.notes: list[str] = []
        found = installed_version()
        if found is not None and found != PINNED:
            self.notes.append(f"runtime mstar: mstar-ai {found} is installed; simharness is "
                              f"tested against {PINNED}")
        self.model_cls = None
        if placement != "simharness":
            self.model_cls, why = mstar_divider()
            if self.model_cls is None:
                if placement == "mstar":
                    raise UsageError(f"runtime mstar: placement 'mstar' needs mstar.model.base, "
                                     f"which cannot be imported ({why}); it needs torch, triton, "
                                     f"pyzmq and msgpack")
                self.notes.append(
                    f"runtime mstar: mstar.model.base cannot be imported ({why}), so the walks "
                    f"are divided by simharness's placement (which follows mstar's "
                    f"_divide_into_worker_graphs) instead of mstar's own")
        self.placement = "mstar" if self.model_cls is not None else "simharness"
        self._built: _Built | None = None

    def templates(self, layout: Layout) -> dict[str, Any]:
        """Our worker graph id -> the mstar section every request's state is copied from."""
        if self._built is None or self._built.layout is not layout:
            if self.model_cls is not None:
                templates = mstar_worker_graphs(layout, self.model_cls)
            else:
                g = graph_module()
                templates = {wg.id: to_mstar(wg.section, g) for wg in layout.worker_graphs}
            for wg in layout.worker_graphs:
                # mstar marks a walk's stream consumers while dividing it (input streams of the
                # walk's partition); do the same on whichever template we built.
                streams = layout.scenario.stream_inputs(wg.walk)
                if streams:
                    for node in templates[wg.id].get_nodes().values():
                        node._register_streaming(streams & set(node.input_names))
            self._built = _Built(layout, templates)
        return self._built.templates

    def build_rank(self, rank: int, layout: Layout) -> MstarRankRuntime:
        return MstarRankRuntime(rank, layout, self.templates(layout))
