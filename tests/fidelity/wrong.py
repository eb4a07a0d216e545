"""Adapters for the real mstar code, and models of it, that are wrong on purpose: the fidelity
comparison must catch each one. Loaded by ``module:Name`` like any plugin runtime."""

from __future__ import annotations

from simharness.mstar.runtime import MstarRuntime
from simharness.mstar.state import MstarGraphState, MstarRankRuntime
from simharness.runtime.conductor import Conductor
from simharness.runtime.graph_spec import Semantics
from simharness.runtime.profiles import MstarPython
from simharness.runtime.rank import RankRuntime
from simharness.runtime.streams import StreamBuffer


class _KeepsLoopBacks(MstarGraphState):
    def complete(self, node):
        items, filtered, finished = super().complete(node)
        if filtered:
            # Route the loop-back edges mstar filtered out, as if the filter were never applied.
            items = items + [e for e in self.spec.nodes[node].outputs
                             if (e.name, e.to) in filtered and e not in items]
        return items, frozenset(), finished


class _KeepsLoopBacksRank(MstarRankRuntime):
    def new_state(self, wg_id):
        return _KeepsLoopBacks(self.specs[wg_id], self.templates[wg_id], self._g)


class KeepsLoopBacks(MstarRuntime):
    """Ignores mstar's ``filtered_signals``: a finishing loop routes its loop-back edges."""

    def build_rank(self, rank, layout):
        return _KeepsLoopBacksRank(rank, layout, self.templates(layout))


class ShortLoops(MstarRuntime):
    """Builds every loop copy with one iteration fewer (a wrong conversion to mstar objects)."""

    def templates(self, layout):
        fresh = self._built is None or self._built.layout is not layout
        out = super().templates(layout)
        if fresh:
            for section in out.values():
                for lp in section.get_loops().values():
                    lp.max_iters = max(1, lp.max_iters - 1)
        return out


class ModelWithDistinctEntities(MstarPython):
    """Our model before the fidelity suite's first finding: a loop and a node with the same name
    are two registry entities (mstar keys them by name, so they collide)."""

    semantics = Semantics(entities_by_name=False)


class ModelStreamingReadyEveryIteration(MstarPython):
    """Our model before it followed mstar-ai 0.2.1's ``ready_for_streaming``: a loop member whose
    only inputs are streams takes a chunk at every iteration."""

    semantics = Semantics(stream_ready_once=False)


class ModelStopsOncePerPass(MstarPython):
    """Our model before it kept mstar-ai 0.2.1's loop stop times: a peer's STOP_LOOPS stops a
    loop once per pass, whatever a data message said before it."""

    semantics = Semantics(stop_times=False)


class _StreamsFromLeaderRank(RankRuntime):
    def _route_stream(self, done, req, sig, part, routes):
        # rank 0 of the producing instance streams to every consumer rank; the others nothing
        if routes.tp != 0:
            return
        conn, _consumer, wgs = self._streams[(part, sig.name)]
        if conn.dst not in req.partitions:
            return
        for r in sorted({r for w in wgs for r in req.assignment.wg_ranks[w]}):
            if r == self.rank:
                done.add("stream_local", sig)
            else:
                done.to_ranks.setdefault(r, []).append(sig)
            done.routes.append((sig, self._stream_label[r]))


class ModelStreamsFromTheLeaderOnly(MstarPython):
    """Our model before it followed mstar's replicated fan-out of a stream: only rank 0 of a
    TP instance streams, to every consumer rank, its own follower's too."""

    def build_rank(self, rank, layout):
        return _StreamsFromLeaderRank(rank, layout, self.semantics,
                                      stream_buffer=self.parts.stream_buffer or StreamBuffer)


class _EndsOnAnyFinalChunk(Conductor):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._final_reported: set[tuple[str, str]] = set()

    def _on_done(self, msg, now):
        # remember any report of a final chunk, not only the one that completes the pass
        if msg.partition_done and msg.rid in self.requests:
            for wg in msg.wgs:
                self._final_reported.add((msg.rid, self.layout.by_id[wg].partition))
        return super()._on_done(msg, now)

    def _pass_done(self, req, ps, now):
        if (req.rid, ps.name) in self._final_reported:
            self._final_reported.discard((req.rid, ps.name))
            ps.final_seen = True
        return super()._pass_done(req, ps, now)


class ModelEndsOnAnyFinalChunk(MstarPython):
    """Our model before it kept only the ``partition_done`` of the report that completes a pass:
    any rank's report of a final chunk ended its partition."""

    parts = MstarPython.parts.but(conductor=_EndsOnAnyFinalChunk)
