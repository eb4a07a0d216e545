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
  with the `Layout` the drivers use, or the run stops with `PlacementMismatch`
  (`mstar_placement`);
* each request's state in each worker graph is a real ``mstar.graph.graph_io.WorkerGraphIO``
  over a deep copy of the worker graph's section, as mstar's ``WorkerGraphQueues.add_request``
  makes it. `MstarGraphState` implements the `WorkerGraphState` protocol
  (`simharness.runtime.protocol`) over it: every answer is read from, and every change is made
  through, the mstar objects (`mstar_state`);
* the worker-level routing around it (same or sibling worker graph, peer ranks, client,
  conductor, the done-sweep) is our `RankRuntime`, which follows mstar's
  ``process_node_outputs`` (reference/mstar_semantics.md section 3.4).

Our `Signal` objects stay the identity of every edge: an ingested signal travels inside mstar as
a ``GraphEdge`` that carries it, and a declared output edge carries the scenario `Edge` it came
from, so routing, traces and checks work unchanged.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from simharness.errors import UsageError
from simharness.graph.ir import CLIENT, CONDUCTOR, Edge, Loop, Node, Parallel, Section, Sequential
from simharness.placement.layout import Layout
from simharness.runtime.protocol import LoopPolicy
from simharness.wording import hint

PINNED = "0.2.1"
#: how to install mstar-ai (its metadata asks for Python 3.12 and a GPU stack it does not need)
PIP_INSTALL = f"pip install --no-deps --ignore-requires-python mstar-ai=={PINNED}"
#: how to install what mstar.model.base imports (torch, triton, pyzmq, msgpack): the mstar extra
MSTAR_EXTRA_INSTALL = "pip install 'simharness[mstar]'"
#: mstar's special destinations (``mstar/graph/special_destinations.py``)
EMIT_TO_CLIENT = "emit_to_client"
EMPTY_DESTINATION = ""
#: the attribute on an mstar GraphEdge that carries our Edge (declared) or Signal (ingested)
CARRIES = "_simharness"
PLACEMENT_CHOICES = ("auto", "mstar", "simharness")


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


# ---------------------------------------------------------------------------------------------
# the rank and the runtime


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
                             f"got {placement!r}{hint(str(placement), PLACEMENT_CHOICES)}")
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
                                     f"pyzmq and msgpack: {MSTAR_EXTRA_INSTALL}")
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
                from simharness.runtime.mstar_placement import mstar_worker_graphs

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

    def build_rank(self, rank: int, layout: Layout) -> Any:
        from simharness.runtime.mstar_state import MstarRankRuntime

        return MstarRankRuntime(rank, layout, self.templates(layout))
