"""Runtimes broken on purpose. Each one breaks one thing a check exists to catch.

They are loaded the way any plugin runtime is, by ``module:Name``.
"""

from __future__ import annotations

import os
import random

from simharness.runtime.graph_state import GraphState
from simharness.runtime.profiles import MstarPython
from simharness.runtime.rank import RankRuntime


class _Rank(RankRuntime):
    pass


class OffByOneLoop(MstarPython):
    """Every loop stops one iteration early (a wrong ``max_iters`` in the compiled graph)."""

    def build_rank(self, rank, layout):
        rt = super().build_rank(rank, layout)
        for spec in rt.specs.values():
            for lp in spec.loops.values():
                lp.max_iters = max(1, lp.max_iters - 1)
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
    def admit(self, rid, walk, pass_no, assignment, stops=None, partitions=None):
        super().admit(rid, walk, pass_no, assignment, stops, partitions)
        req = self.requests[rid]
        for wg in list(req.states):
            req.states[wg] = _StickyCounterState(self.specs[wg])
        req.walk_states = {part: [(wg, req.states[wg]) for wg, _ in sts]
                           for part, sts in req.walk_states.items()}


class LeavesLoopState(MstarPython):
    """Resetting a worker graph forgets to rewind its loops: state is left behind at teardown."""

    def build_rank(self, rank, layout):
        return _StickyRank(rank, layout, self.semantics)


class _LossyRank(RankRuntime):
    def complete(self, rid, node, walk):
        done = super().complete(rid, node, walk)
        # Lose every loop-back edge sent to another rank once the loop is past its first step.
        if done.loop_context and done.loop_context[0][1] == 1:
            for r in list(done.to_ranks):
                if r != self.rank:
                    del done.to_ranks[r]
        return done


class LosesCrossRankEdges(MstarPython):
    """Edges to other ranks vanish at loop counter 1: the peer waits for ever."""

    def build_rank(self, rank, layout):
        return _LossyRank(rank, layout, self.semantics)


class _ShuffledRank(RankRuntime):
    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self._rng = random.Random(os.urandom(16))

    def ready_work(self):
        work = list(super().ready_work())
        self._rng.shuffle(work)
        return iter(work)


class UnseededOrder(MstarPython):
    """Serves ready work in an order drawn from an unseeded random source."""

    def build_rank(self, rank, layout):
        return _ShuffledRank(rank, layout, self.semantics)
