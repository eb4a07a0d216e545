"""``mstar-graph``: the real mstar graph code under our worker model, as the runtime under test.

Where the other runtimes are our model of mstar, this one runs mstar's own graph classes from the
``mstar-ai`` package (pinned, `package.PINNED`; ``mstar.graph.*`` is plain Python) inside our
drivers, so the harness tests the real thing:

* the scenario's walks become mstar graph objects (`convert.to_mstar`);
* the walks are divided into worker graphs by mstar's own ``_divide_into_worker_graphs``
  (``mstar/model/base.py``) when that module can be imported. It imports torch, triton, pyzmq
  and msgpack; without them the runtime says so (`MstarRuntime.notes`, printed on stderr by the
  CLI) and converts the worker graphs of our placement instead, with each loop copy's external
  and loop-back inputs set as mstar's placement sets them. Either way the division must agree
  with the `Layout` the drivers use, or the run stops with `PlacementMismatch` (`placement`);
* each request's state in each worker graph is a real ``mstar.graph.graph_io.WorkerGraphIO``
  over a deep copy of the worker graph's section, as mstar's ``WorkerGraphQueues.add_request``
  makes it. `MstarGraphState` implements the `WorkerGraphState` protocol
  (`simharness.runtime.protocol`) over it: every answer is read from, and every change is made
  through, the mstar objects (`state`);
* the worker-level routing around it (same or sibling worker graph, peer ranks, client,
  conductor, the done-sweep) is our `RankRuntime`, which follows mstar's
  ``process_node_outputs`` (reference/mstar_semantics.md section 3.4).

Our `Signal` objects stay the identity of every edge: an ingested signal travels inside mstar as
a ``GraphEdge`` that carries it, and a declared output edge carries the scenario `Edge` it came
from, so routing, traces and checks work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simharness.errors import UsageError
from simharness.mstar.convert import to_mstar
from simharness.mstar.package import (
    EXTRA_INSTALL,
    PINNED,
    PIP_INSTALL,
    graph_module,
    installed_version,
    is_available,
    mstar_divider,
)
from simharness.mstar.placement import mstar_worker_graphs
from simharness.mstar.state import MstarRankRuntime
from simharness.placement.layout import Layout
from simharness.runtime.assembly import ModelRuntime
from simharness.wording import hint

PLACEMENT_CHOICES = ("auto", "mstar", "simharness")


@dataclass
class _Built:
    layout: Layout
    templates: dict[str, Any]


class MstarRuntime(ModelRuntime):
    """The real mstar graph code (mstar-ai) in our drivers.

    Options (``runtime: {name: mstar-graph, options: {...}}``): ``batching``, ``drain_barrier``,
    ``choose_first``, ``wake_us``, ``idle_poll_ms``, ``acks`` and ``successors`` as for the reference profiles
    (`LoopPolicy`), and ``placement``: ``auto`` (mstar's own
    division when ``mstar.model.base`` imports, else ours, with a note), ``mstar`` (mstar's or
    fail) or ``simharness`` (ours, converted to mstar objects).
    """

    name = "mstar-graph"
    description = f"the real mstar graph code (mstar-ai {PINNED}: WorkerGraphIO, loops, registries)"
    #: what to run where mstar-ai is missing
    install_hint = PIP_INSTALL

    @staticmethod
    def available() -> bool:
        """Whether mstar-ai's graph code imports here."""
        return is_available()

    def __init__(self, batching: str = "minibatch", drain_barrier: bool = False,
                 choose_first: bool = False, wake_us: float = 0.0, idle_poll_ms: float = 0.0,
                 acks: bool = False, successors: bool = False, placement: str = "auto") -> None:
        graph_module()
        if placement not in PLACEMENT_CHOICES:
            raise ValueError(f"placement must be one of {', '.join(PLACEMENT_CHOICES)}, "
                             f"got {placement!r}{hint(str(placement), PLACEMENT_CHOICES)}")
        super().__init__(batching=batching, drain_barrier=drain_barrier,
                         choose_first=choose_first, wake_us=wake_us, idle_poll_ms=idle_poll_ms,
                         acks=acks, successors=successors)
        self.notes: list[str] = []
        found = installed_version()
        if found is not None and found != PINNED:
            self.notes.append(f"runtime mstar-graph: mstar-ai {found} is installed; simharness is "
                              f"tested against {PINNED}")
        self.model_cls = None
        if placement != "simharness":
            self.model_cls, why = mstar_divider()
            if self.model_cls is None:
                if placement == "mstar":
                    raise UsageError(f"runtime mstar-graph: placement 'mstar' needs mstar.model.base, "
                                     f"which cannot be imported ({why}); it needs torch, triton, "
                                     f"pyzmq and msgpack: {EXTRA_INSTALL}")
                self.notes.append(
                    f"runtime mstar-graph: mstar.model.base cannot be imported ({why}), so the walks "
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

    def build_rank(self, rank: int, layout: Layout) -> Any:
        return MstarRankRuntime(rank, layout, self.templates(layout))
