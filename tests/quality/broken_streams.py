"""Runtimes broken on purpose in their streams and forward counts: each one breaks one thing the
`streams` or `forwards` check exists to catch, for the kinds of violation the broken runtimes of
`tests.quality.broken` do not reach.

They are loaded the way any plugin runtime is, by ``tests.quality.broken_streams:Name``.
"""

from __future__ import annotations

from simharness.runtime.parts import WorkerParts
from simharness.runtime.profiles import MstarPython
from simharness.runtime.rank import RankRuntime
from simharness.runtime.streams import ChunkSignal, StreamBuffer
from simharness.runtime.worker_loop import WorkerLoop
from simharness.runtime.worker_parts import Speculation
from tests.quality.broken import _WithRank

# -- StreamBuffers that release wrong chunks ----------------------------------------------------


class _SkipsIndex(StreamBuffer):
    def pop(self, seq):
        chunk = super().pop(seq)
        if chunk.index == 0:
            self.popped += 1  # the counter jumps: chunk 1 is never released, chunk 2 comes next
        return chunk


class SkipsChunkIndex(MstarPython):
    """Every stream numbers its chunks 0, 2, 3, ...: index 1 is skipped."""

    parts = WorkerParts(stream_buffer=_SkipsIndex)


class _DropsMiddle(StreamBuffer):
    def pop(self, seq):
        chunk = super().pop(seq)
        if chunk.index == 1 and not chunk.final and len(chunk.items) > 2:
            mid = len(chunk.items) // 2
            chunk.items = chunk.items[:mid] + chunk.items[mid + 1:]  # one item in the middle vanishes
        return chunk


class DropsMiddleItem(MstarPython):
    """The second chunk of every stream (not its final one) loses an item from its middle."""

    parts = WorkerParts(stream_buffer=_DropsMiddle)


class _FinalDespiteContinue(StreamBuffer):
    def pop(self, seq):
        chunk = super().pop(seq)
        if self.policy.continue_after_done and self.producer_done and not self.items \
                and not self.final_emitted:
            # Ignores continue_after_done: the first chunk after the producer is done is final.
            chunk.final = self.final_emitted = True
        return chunk


class FinalDespiteContinue(MstarPython):
    """A stream that continues after its producer is done still marks a chunk final."""

    parts = WorkerParts(stream_buffer=_FinalDespiteContinue)


class _ChunkAfterFinal(StreamBuffer):
    _extra = False

    def chunk_ready(self):
        return super().chunk_ready() or (self.final_emitted and not self._extra)

    def pop(self, seq):
        if not self.final_emitted:
            return super().pop(seq)
        # One more, non-final, empty chunk after the final one.
        self._extra = True
        chunk = ChunkSignal.of(self._first, self.popped, self.consumed, (), False, seq)
        chunk.dest = self.consumer
        self.popped += 1
        return chunk


class ChunkAfterFinal(MstarPython):
    """Every stream releases one more (empty, non-final) chunk after its final chunk."""

    parts = WorkerParts(stream_buffer=_ChunkAfterFinal)


# -- a consumer that runs twice on one chunk ----------------------------------------------------


class _ReplaysChunkRank(RankRuntime):
    def complete(self, rid, node, walk):
        st = self.requests[rid].states[self.wg_of[(walk, node)]]
        chunks = [s for s in st.inputs(node).values() if type(s) is ChunkSignal]
        done = super().complete(rid, node, walk)
        seen = self.__dict__.setdefault("_replayed", set())
        for chunk in chunks:
            if not chunk.final and (rid, chunk.name, chunk.index) not in seen:
                seen.add((rid, chunk.name, chunk.index))
                st.ingest_chunk(chunk)  # the chunk is offered to its consumer a second time
        return done


class ReplaysChunks(_WithRank):
    """A stream consumer runs twice on every non-final chunk: the chunk is not cleared after its
    pass, so the next pass consumes it again."""

    rank_class = _ReplaysChunkRank


# -- speculation past a dynamic stop ------------------------------------------------------------


class _SpeculatesPastStop(Speculation):
    def __init__(self, loop) -> None:
        super().__init__(loop)
        self.again: set[str] = set()  # rids speculated a second time past their stop
        self._once: set[str] = set()

    def plan(self, batch, now):
        # The overshoot batch finishes with the stop still pending: speculate once more anyway.
        runtime = self.loop.runtime
        stopped = {r for r, _loop in self.pending_stops}
        again = [r for r in batch.rids if batch.speculative and r in stopped
                 and r not in self._once and runtime.state_of(r, batch.walk, batch.node)]
        if not again:
            return super().plan(batch, now)
        self.again.update(again)
        self._once.update(again)
        for rid in again:
            runtime.state_of(rid, batch.walk, batch.node).mark_speculative(batch.node)
        self.batch = self.loop.scheduler.speculative_batch(batch.node, batch.walk, again)


class _SpeculatesPastStopLoop(WorkerLoop):
    def _postprocess(self, batch, now):
        spec = self.speculation
        keep = spec.again & set(batch.rids) if batch.speculative else set()
        spec.again -= keep
        loops = {r: st.spec.nodes[batch.node].loop.name for r in keep
                 if (st := self.runtime.state_of(r, batch.walk, batch.node)) is not None}
        sends = super()._postprocess(batch, now)
        spec.pending_stops |= set(loops.items())  # the second speculative step is discarded too
        return sends


class SpeculatesPastStop(MstarPython):
    """After a dynamic stop, a self-loop speculates two steps instead of one: both are discarded."""

    parts = WorkerParts(worker_loop=_SpeculatesPastStopLoop, speculation=_SpeculatesPastStop)


# -- forwards outside any loop ------------------------------------------------------------------


class _RerunsRank(RankRuntime):
    def complete(self, rid, node, walk):
        wg = self.wg_of[(walk, node)]
        st = self.requests[rid].states[wg]
        inputs = list(st.inputs(node).values())
        done = super().complete(rid, node, walk)
        seen = self.__dict__.setdefault("_rerun", set())
        if st.spec.nodes[node].loop is None and wg in done.completed_wgs and (rid, wg) not in seen:
            seen.add((rid, wg))
            for sig in inputs:
                st.ingest(sig)  # the reset worker graph gets the inputs back: the node runs again
        return done


class RerunsLastNode(_WithRank):
    """The node (in no loop) whose run completes a worker graph finds its inputs again after the
    reset, and runs a second time, once per request and worker graph."""

    rank_class = _RerunsRank


class _EveryReplicaRank(RankRuntime):
    def admit(self, rid, walk, pass_no, assignment, partitions=None):
        hosted = {wg.id for wg in self.layout.worker_graphs if self.rank in wg.ranks}
        wg_ranks = {wg: ranks if wg not in hosted or self.rank in ranks else (*ranks, self.rank)
                    for wg, ranks in assignment.wg_ranks.items()}
        super().admit(rid, walk, pass_no, type(assignment)(wg_ranks), partitions)


class RunsEveryReplica(_WithRank):
    """A rank runs a request's worker graphs on every data-parallel replica it hosts, not only
    on the replica the conductor chose for the request: it runs nodes it was never assigned."""

    rank_class = _EveryReplicaRank
