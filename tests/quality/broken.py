"""Runtimes broken on purpose. Each one breaks one thing a check exists to catch.

They are loaded the way any plugin runtime is, by ``module:Name``.
"""

from __future__ import annotations

import os
import random

from simharness.runtime.graph_state import GraphState
from simharness.runtime.parts import WorkerParts
from simharness.runtime.profiles import MstarPython
from simharness.runtime.rank import RankRuntime
from simharness.runtime.streams import StreamBuffer
from simharness.runtime.worker_loop import WorkerLoop
from simharness.signals import Signal


class _WithRank(MstarPython):
    """mstar-python whose ranks are `rank_class`: a broken runtime names its broken rank."""

    rank_class: type[RankRuntime] = RankRuntime

    def build_rank(self, rank, layout):
        return self.rank_class(rank, layout, self.semantics)


class OffByOneLoop(MstarPython):
    """Every loop stops one iteration early (a wrong ``max_iters`` in the compiled graph)."""

    def build_rank(self, rank, layout):
        rt = super().build_rank(rank, layout)
        for spec in rt.specs.values():
            for lp in spec.loops.values():
                lp.max_iters = max(1, lp.max_iters - 1)
        return rt


class EndlessLoop(MstarPython):
    """Loops never reach their last iteration (``max_iters`` lost in the compiled graph)."""

    def build_rank(self, rank, layout):
        rt = super().build_rank(rank, layout)
        for spec in rt.specs.values():
            for lp in spec.loops.values():
                lp.max_iters = 10**9
        return rt


class NeverDropsLoopBacks(MstarPython):
    """A finishing loop routes its loop-back edges like any others."""

    def build_rank(self, rank, layout):
        rt = super().build_rank(rank, layout)
        for spec in rt.specs.values():
            spec.drop_on_exit = {name: frozenset() for name in spec.drop_on_exit}
        return rt


class _StickyCounterState(GraphState):
    __slots__ = ()

    def reset(self) -> None:
        keep = {name: st.curr_iter for name, st in self.loops.items()}
        super().reset()
        for name, it in keep.items():
            self.loops[name].curr_iter = it


class _StickyRank(RankRuntime):
    def new_state(self, wg_id):
        return _StickyCounterState(self.specs[wg_id])


class LeavesLoopState(_WithRank):
    """Resetting a worker graph forgets to rewind its loops: state is left behind at teardown."""

    rank_class = _StickyRank


class _LossyRank(RankRuntime):
    def complete(self, rid, node, walk):
        done = super().complete(rid, node, walk)
        # Lose every loop-back edge sent to another rank once the loop is past its first step.
        if done.loop_context and done.loop_context[0][1] == 1:
            for r in list(done.to_ranks):
                if r != self.rank:
                    del done.to_ranks[r]
        return done


class LosesCrossRankEdges(_WithRank):
    """Edges to other ranks vanish at loop counter 1: the peer waits for ever."""

    rank_class = _LossyRank


class _ShuffledRank(RankRuntime):
    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self._rng = random.Random(os.urandom(16))

    def ready_work(self):
        work = list(super().ready_work())
        self._rng.shuffle(work)
        return iter(work)

    def ready_groups(self):
        groups = {}
        for node, walk, rid, st in self.ready_work():
            groups.setdefault((node, walk), []).append((rid, st))
        return groups

    def complete(self, rid, node, walk):
        done = super().complete(rid, node, walk)
        self._rng.shuffle(done.routes)  # the order a completion reports its routes in varies too
        return done


class UnseededOrder(_WithRank):
    """Serves ready work in an order drawn from an unseeded random source."""

    rank_class = _ShuffledRank


# -- streams, TP, dynamic stops, KV hand-off ----------------------------------------------------


class _LoseFinal(StreamBuffer):
    def pop(self, seq):
        chunk = super().pop(seq)
        if chunk.final:
            chunk.items = chunk.items[:-1] if chunk.items else chunk.items  # the last item vanishes
        return chunk


class LosesFinalItem(MstarPython):
    """The final chunk of every stream drops its last item."""

    parts = WorkerParts(stream_buffer=_LoseFinal)


class _TwiceFinal(StreamBuffer):
    def pop(self, seq):
        chunk = super().pop(seq)
        if chunk.final and not getattr(self, "_again", False):
            self._again = True
            self.final_emitted = False  # emits one more final chunk afterwards
        return chunk


class DuplicatesFinalChunk(MstarPython):
    """Every stream releases two final chunks."""

    parts = WorkerParts(stream_buffer=_TwiceFinal)


class _FollowerEmits(RankRuntime):
    def complete(self, rid, node, walk):
        done = super().complete(rid, node, walk)
        if done.tp_rank != 0:
            for e in self.layout.scenario.walk_facts[walk].nodes[node].outputs:
                if e.to == "client":
                    self._seq += 1
                    sig = Signal(e.name, e.to, False, False, 8, node, self.rank, walk, done.pass_no,
                                 done.counter, "node", self._seq)
                    done.add("to_client", sig)
                    done.routes.append((sig, "client"))
        return done


class FollowerEmits(_WithRank):
    """TP followers emit to the client too (a client sees every token twice)."""

    rank_class = _FollowerEmits


class _FollowerStreamsOut(RankRuntime):
    def _route_stream(self, done, req, sig, part, routes):
        super()._route_stream(done, req, sig, part, routes)
        if routes.tp != 0:
            # a follower sends its streamed item to its instance's rank 0 as well
            leader = routes.src_group[0]
            done.to_ranks.setdefault(leader, []).append(sig)
            done.routes.append((sig, self._stream_label[leader]))


class FollowerStreamsOut(_WithRank):
    """A TP follower streams to another rank too (the consumer gets each item twice); keeping
    its own copy, as mstar's replicated fan-out has it do, is no fault."""

    rank_class = _FollowerStreamsOut


class _ForgetsReport(RankRuntime):
    def complete(self, rid, node, walk):
        done = super().complete(rid, node, walk)
        if self.rank == 1:
            done.completed_wgs = ()  # rank 1 never reports a worker graph done
        return done


class MissingWorkerGraphsDone(_WithRank):
    """Rank 1 resets its done worker graphs but never reports them."""

    rank_class = _ForgetsReport


class _LateStopRank(RankRuntime):
    def peer_stop(self, rid, partition, loops, times=None):
        # Apply a peer's stop one iteration late: remember it, apply it at the next stop message
        # or completion instead of now.
        pending = self.__dict__.setdefault("_late", {})
        pending.setdefault(rid, []).append((partition, loops, times))
        return []

    def complete(self, rid, node, walk):
        done = super().complete(rid, node, walk)
        for partition, loops, times in self.__dict__.get("_late", {}).pop(rid, []):
            super().peer_stop(rid, partition, loops, times)
        return done


class LateStopLoops(_WithRank):
    """A peer's STOP_LOOPS takes effect one iteration late."""

    rank_class = _LateStopRank


class _EagerKvLoop(WorkerLoop):
    def gate(self, node, walk, rid, st):
        return self.nodes.gate(node, st)  # never waits for the KV pull


class SkipsKvPull(MstarPython):
    """The decode rank runs before its KV pull has arrived."""

    parts = WorkerParts(worker_loop=_EagerKvLoop)


class _StreamTurnsWalkBackRank(RankRuntime):
    def deliver(self, rid, walk, pass_no, signals):
        # The bug fixed in RankRuntime.deliver: every message, streams included, sets the walk.
        self.set_walk(rid, walk, pass_no)
        return super().deliver(rid, walk, pass_no, signals)


class StreamTurnsWalkBack(_WithRank):
    """A stream chunk tells the receiver its producer partition's current walk (mstar takes the
    walk from non-stream INPUT_SIGNALS only), so a late chunk turns the partition back."""

    rank_class = _StreamTurnsWalkBackRank
