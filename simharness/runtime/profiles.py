"""The shipped runtimes under test: mstar's graph runtime in three versions.

* ``mstar-python``: the reference profile, mstar's Python graph runtime as
  reference/mstar_semantics.md describes it, quirks included.
* ``mstar-rust-prefix``: the Rust graph runtime before the loop-exit fix. Its compiler resolved a
  loop's loop-back pairs against the nodes of one worker graph, so when a loop split across worker
  graphs finishes, it drops only the pairs whose destination is in the finishing copy's own graph
  and routes the rest (reference/mstar_bugs.md section 2). It also parks edges that arrive for a
  finished loop instead of re-queueing the body.
* ``mstar-rust``: the Rust runtime after the fix: every loop-back pair is dropped.
"""

from __future__ import annotations

from simharness.placement.layout import Layout
from simharness.runtime.assembly import ModelRuntime
from simharness.runtime.graph_spec import Semantics
from simharness.runtime.rank import RankRuntime
from simharness.runtime.streams import StreamBuffer


class ReferenceRuntime(ModelRuntime):
    """A runtime built from our state machines with one set of `Semantics`.

    Options (``runtime: {name: ..., options: {...}}`` in a scenario): ``batching``
    (``minibatch`` or ``backlog``) and ``drain_barrier`` (bool); see `LoopPolicy`.
    """

    name = "reference"
    semantics = Semantics()

    def build_rank(self, rank: int, layout: Layout) -> RankRuntime:
        return RankRuntime(rank, layout, self.semantics,
                           stream_buffer=self.parts.stream_buffer or StreamBuffer)


class MstarPython(ReferenceRuntime):
    name = "mstar-python"
    description = "mstar's Python graph runtime (reference semantics, quirks included)"
    semantics = Semantics(loop_back_scope="all", park_in_done_loops=False)


class MstarRustPrefix(ReferenceRuntime):
    name = "mstar-rust-prefix"
    description = "mstar's Rust graph runtime before the loop-exit fix (drops local loop-backs only)"
    semantics = Semantics(loop_back_scope="local", park_in_done_loops=True, entities_by_name=False,
                          stream_ready_once=False, stop_times=False)


class MstarRust(ReferenceRuntime):
    name = "mstar-rust"
    description = "mstar's Rust graph runtime after the loop-exit fix"
    semantics = Semantics(loop_back_scope="all", park_in_done_loops=True, entities_by_name=False,
                          stream_ready_once=False, stop_times=False)
