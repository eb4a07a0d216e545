"""Streaming edges: the per-request, per-edge StreamBuffer on the consumer rank, and chunk policies.

Semantics follow mstar's ``StreamBuffer`` (reference/mstar_semantics.md section 6.2):

* items (one per producer forward) are appended in arrival order;
* before the producer is done, a chunk is ready when the policy says so;
* after the producer is done (and every item has arrived), a chunk is ready while items remain,
  or the policy continues after done, or the final chunk has not been emitted yet;
* a pop normally returns the policy's window and advances by its stride; after the producer is
  done, if the policy is not ready, it flushes everything left (possibly nothing);
* a chunk is final when the producer is done, everything arrived and the buffer is empty after
  the pop; never with ``continue_after_done``. Exactly one final chunk, and it is the last.

Chunks become `ChunkSignal`s ingested into the consumer node (one per worker-loop iteration per
stream); the pass that consumes the final chunk reports its partition done.
"""

from __future__ import annotations

from simharness.scenario.model import ChunkPolicySpec
from simharness.signals import ORIGIN_STREAM, Signal


class ChunkPolicy:
    def __init__(self, spec: ChunkPolicySpec) -> None:
        self.spec = spec
        self.first_chunk_read = False

    def is_ready(self, n: int) -> bool:
        return n >= self.window()

    def stride(self) -> int:
        s = self.spec
        if s.kind == "sliding_window":
            return s.stride
        if s.kind == "left_context":
            return s.chunk - s.context if not self.first_chunk_read else s.chunk
        return s.chunk

    def window(self) -> int:
        s = self.spec
        if s.kind == "sliding_window":
            return s.window
        if s.kind == "left_context":
            return s.chunk if not self.first_chunk_read else s.chunk + s.context
        return s.chunk

    @property
    def continue_after_done(self) -> bool:
        return self.spec.kind == "fixed" and self.spec.continue_after_done


class ChunkSignal(Signal):
    """A chunk popped from a StreamBuffer, ingested into the consumer as its stream input."""

    #: the chunk's number in its stream, from 0
    index: int = 0
    #: the stream position of its first item
    start: int = 0
    items: tuple[Signal, ...] = ()
    #: the producer is done and this is the stream's last chunk
    final: bool = False

    @classmethod
    def of(cls, base: Signal, index: int, start: int, items: tuple[Signal, ...], final: bool,
           seq: int) -> ChunkSignal:
        """The chunk of `items` that `base` (its first item, or the stream's first) stands for."""
        return cls(base.name, base.dest, False, False, sum(s.nbytes for s in items), base.src,
                   base.src_rank, base.walk, base.pass_no, base.counter, ORIGIN_STREAM, seq,
                   False, index, start, items, final)

    def describe(self) -> str:
        fin = ", final" if self.final else ""
        # (trace text: the digest hashes it, so "1 items" stays until a digest move)
        return f"{self.name} chunk {self.index} ({len(self.items)} items from {self.start}{fin})"

    def __repr__(self) -> str:
        return f"<{self.name}#chunk{self.index}@{self.start}+{len(self.items)}{'F' if self.final else ''}>"


class StreamBuffer:
    def __init__(self, rid: str, edge: str, consumer: str, src_partition: str, spec: ChunkPolicySpec) -> None:
        self.rid = rid
        self.edge = edge
        self.consumer = consumer
        self.src_partition = src_partition
        self.policy = ChunkPolicy(spec)
        self.items: list[Signal] = []
        self.consumed = 0
        self.popped = 0
        self.producer_done = False
        self.final_emitted = False
        #: a popped chunk the consumer refused; retried before anything new is popped
        self.waiting: ChunkSignal | None = None
        self._first: Signal | None = None

    def put(self, sig: Signal) -> None:
        self.items.append(sig)
        if self._first is None:
            self._first = sig

    def chunk_ready(self) -> bool:
        n = len(self.items)
        if not self.producer_done:
            return self.policy.is_ready(n)
        return n > 0 or self.policy.continue_after_done or not self.final_emitted

    def pop(self, seq: int) -> ChunkSignal:
        n = len(self.items)
        start = self.consumed
        policy = self.policy
        if self.producer_done and not policy.is_ready(n):
            items = tuple(self.items)
            self.items = []
            stride = len(items)
        else:
            stride = policy.stride()
            items = tuple(self.items[: policy.window()])
            self.items = self.items[stride:]
        self.consumed += stride
        policy.first_chunk_read = True
        final = self.producer_done and not self.items and not policy.continue_after_done
        if final:
            self.final_emitted = True
        base = items[0] if items else (self._first or Signal(self.edge, self.consumer, False, False, 0,
                                                              self.src_partition, -1, "", 0, None,
                                                              ORIGIN_STREAM, 0))
        chunk = ChunkSignal.of(base, self.popped, start, items, final, seq)
        chunk.dest = self.consumer
        self.popped += 1
        return chunk

    @property
    def open(self) -> bool:
        """Still expecting work: items to deliver or a final chunk to emit."""
        return bool(self.items) or not self.final_emitted or self.waiting is not None
