"""`streams`: per stream, chunks in FIFO order, none lost or duplicated, exactly one final chunk.

For every (request, stream edge, consumer rank), the items its producer sent are compared with
the chunks the consumer's StreamBuffer released:

* chunk indices run 0, 1, 2, ...; each chunk's items are the items sent from its start offset
  on, in order (a sliding window repeats items on purpose, but never reorders or skips one);
  when each producer rank's items are in order and only the ranks interleave differently, the
  message says so: mstar orders a stream's items per link, not across producers;
* without ``continue_after_done`` exactly one chunk is final, and it is the last; with it, none;
* when the request completed, every item sent was consumed (the final chunk reaches the end);
* the consumer ran exactly one pass per chunk (mstar: consumer passes = chunks popped); a
  ``continue_after_done`` stream may end with one empty chunk its consumer never took.
"""

from __future__ import annotations

from collections import defaultdict

from simharness import events as ev
from simharness.checks.base import RunContext, Violation, rid_order
from simharness.scenario.model import Scenario


class StreamsCheck:
    name = "streams"

    def __init__(self, scenario: Scenario | None = None) -> None:
        if scenario is not None and not scenario.connections:
            # No stream in this layout: nothing to observe.
            self.on_Forward = self.on_ChunkPopped = None  # type: ignore[assignment]
        #: (rid, edge, rank) -> producer sequence numbers sent there, in order
        self.sent: dict[tuple[str, str, int], list[int]] = defaultdict(list)
        self.chunks: dict[tuple[str, str, int], list[ev.ChunkPopped]] = defaultdict(list)
        #: (rid, node, rank) -> forwards of a stream consumer
        self.consumer_runs: dict[tuple[str, str, int], int] = defaultdict(int)
        #: producer sequence number -> the rank that sent it
        self.sent_from: dict[int, int] = {}

    def on_Forward(self, e: ev.Forward) -> None:
        for sig, where in e.routes:
            if where.startswith("stream:"):
                self.sent[(e.rid, sig.name, int(where[7:]))].append(sig.seq)
                self.sent_from[sig.seq] = e.rank
        self.consumer_runs[(e.rid, e.node, e.rank)] += 1

    def on_ChunkPopped(self, e: ev.ChunkPopped) -> None:
        self.chunks[(e.rid, e.edge, e.rank)].append(e)

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = []
        consumers = {(c.src, c.edge): c for c in ctx.scenario.connections}
        consumer_node = {edge: node for (src, edge), (_c, node, _w) in _routes(ctx).items()}
        keys = sorted(set(self.sent) | set(self.chunks), key=lambda k: (rid_order(k[0]), k[1], k[2]))
        for key in keys:
            rid, edge, rank = key
            completed = ctx.outcomes.get(rid) == "completed"
            sent = self.sent.get(key, [])
            chunks = self.chunks.get(key, [])
            conn = next((c for (src, e), c in consumers.items() if e == edge), None)
            cont = conn is not None and conn.policy.kind == "fixed" and conn.policy.continue_after_done

            def flag(msg: str, _key: tuple = key, **details: object) -> None:
                r_id, e_name, r_rank = _key
                out.append(Violation(self.name, f"stream {e_name!r} to rank {r_rank}: {msg}",
                                     node=consumer_node.get(e_name), rank=r_rank, request=r_id,
                                     details={"edge": e_name, **details}))

            for i, ch in enumerate(chunks):
                if ch.index != i:
                    flag(f"chunk {ch.index} released where chunk {i} was due")
                    break
                want = tuple(sent[ch.start: ch.start + len(ch.items)])
                if ch.items != want:
                    ranks = sorted({self.sent_from.get(i, -1) for i in (*ch.items, *want)})
                    if len(ranks) > 1 and self._each_link_in_order(sent, chunks):
                        # mstar appends items in the order their messages are handled (and a
                        # rank's own items at once): FIFO per link, nothing across producers.
                        flag(f"chunk {ch.index} holds items {list(ch.items)} where the producers "
                             f"sent {list(want)} from offset {ch.start}: items from ranks "
                             f"{ranks} arrived in another order than sent", chunk=ch.index,
                             ranks=ranks)
                    else:
                        flag(f"chunk {ch.index} holds items {list(ch.items)} where the producer "
                             f"sent {list(want)} from offset {ch.start}: out of order, lost or "
                             f"duplicated", chunk=ch.index)
                    break
            finals = [ch for ch in chunks if ch.final]
            if cont and finals:
                flag(f"{len(finals)} final chunk(s) on a stream that continues after its producer is done")
            elif not cont and completed and len(finals) != 1:
                flag(f"{len(finals)} final chunks, expected exactly one", finals=len(finals))
            elif finals and finals[-1] is not chunks[-1]:
                flag(f"chunk {chunks[-1].index} was released after the final chunk {finals[-1].index}")
            if completed and not cont and chunks:
                last = chunks[-1]
                if last.start + len(last.items) != len(sent):
                    flag(f"{len(sent) - (last.start + len(last.items))} of {len(sent)} items sent were "
                         f"never consumed", sent=len(sent))
            node = consumer_node.get(edge)
            if completed and node is not None:
                runs = self.consumer_runs.get((rid, node, rank), 0)
                spare = 1 if cont else 0
                if not (len(chunks) - spare <= runs <= len(chunks)):
                    flag(f"{node} ran {runs} passes for {len(chunks)} chunks released: each chunk is one "
                         f"pass", runs=runs, chunks=len(chunks))
        return out

    def _each_link_in_order(self, sent: list[int], chunks: list[ev.ChunkPopped]) -> bool:
        """Every producer rank's items first appear in the chunks in the order that rank sent
        them, none missing before the last one seen: only the interleaving of ranks differs."""
        # each item once, where it first appears (a sliding window repeats items); a dict keeps
        # that order and answers "seen already?" at once, where a list would rescan itself
        seen = list(dict.fromkeys(i for ch in chunks for i in ch.items))
        if set(seen) - set(sent):
            return False
        for rank in {self.sent_from.get(i) for i in sent}:
            got = [i for i in seen if self.sent_from.get(i) == rank]
            if got != [i for i in sent if self.sent_from.get(i) == rank][:len(got)]:
                return False
        return True


def _routes(ctx: RunContext):
    return ctx.layout.stream_routes
