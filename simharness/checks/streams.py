"""`streams`: per stream, chunks in FIFO order, none lost or duplicated, exactly one final chunk.

For every (request, stream edge, consumer rank), the items its producer sent are compared with
the chunks the consumer's StreamBuffer released:

* chunk indices run 0, 1, 2, ...; each chunk's items are the items sent from its start offset
  on, in order (a sliding window repeats items on purpose, but never reorders or skips one);
  when each producer rank's items are in order and only the ranks interleave differently, the
  message says so: mstar orders a stream's items per link, not across producers;
* without ``continue_after_done`` exactly one chunk is final, and it is the last; with it, none;
* when the request completed, every item sent was consumed (the final chunk reaches the end);
* the consumer ran exactly one pass per chunk (mstar: consumer passes = chunks popped; a
  speculative pass discarded after its loop stopped counts, it took its chunk); a
  ``continue_after_done`` stream may end with one empty chunk its consumer never took.

What the check keeps stays flat in finished requests: a request's streams are judged once it is
over (it ended and its ranks removed it, `RequestsOver`), and only their violations are kept.
``finish`` judges what is left, the requests that never got that far (hangs, a run cut short).
Violations come out in request order, each request's streams by (edge, rank), as if all were
judged at the end. Which rank sent an item is looked up among the request's own items
(`_Request.sent_from`): sequence numbers count per producer rank, so two ranks reuse them, and a
table for the whole run would answer with whichever rank sent the number last.

Kinds, the most telling first: ``order`` (items out of order, lost or duplicated, or a chunk
skipped), ``order-across-ranks`` (only the interleaving of producer ranks differs), ``finals``,
``unconsumed``, ``passes``. A violation's time is the release of the chunk at fault (the last
chunk where no one chunk is).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from simharness import events as ev
from simharness.checks.base import Check, RequestsOver, RunContext, RunSetup, Violation, rid_order
from simharness.scenario.model import Connection
from simharness.wording import plural


class _Request:
    """What one request's streams left so far: enough to judge them, dropped once judged."""

    __slots__ = ("sent", "chunks", "runs", "sent_from")

    def __init__(self) -> None:
        #: (edge, rank) -> producer sequence numbers sent there, in order
        self.sent: dict[tuple[str, int], list[int]] = defaultdict(list)
        #: (edge, rank) -> chunks its StreamBuffer released, in order
        self.chunks: dict[tuple[str, int], list[ev.ChunkPopped]] = defaultdict(list)
        #: (node, rank) -> forwards (a stream consumer's passes)
        self.runs: dict[tuple[str, int], int] = defaultdict(int)
        #: producer sequence number -> the rank that sent it
        self.sent_from: dict[int, int] = {}


class StreamsCheck(Check):
    name = "streams"
    priority = 40
    kinds = ("order", "order-across-ranks", "finals", "unconsumed", "passes")

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        if not setup.scenario.connections:
            # No stream in this layout: nothing to observe.
            self.on_Forward = self.on_ChunkPopped = self.on_Overshoot = None  # type: ignore[assignment]
            self.on_Admitted = self.on_RequestEnded = self.on_Removed = None  # type: ignore[assignment]
        #: rid -> its streams, until the request is over and judged
        self.requests: dict[str, _Request] = {}
        self._over = RequestsOver()
        #: violations of the requests judged so far, request by request as each was over
        self.judged: list[Violation] = []
        #: what judging needs of the scenario: (connection per edge, consumer node per edge)
        self._routes: tuple[dict[str, Connection], dict[str, str]] | None = None

    def _request(self, rid: str) -> _Request:
        req = self.requests.get(rid)
        if req is None:  # its first event (or one after it was judged: judged again at the end)
            req = self.requests[rid] = _Request()
        return req

    def on_Admitted(self, e: ev.Admitted) -> None:
        self._over.admitted(e)

    def on_Forward(self, e: ev.Forward) -> None:
        req = self._request(e.rid)
        for sig, rank in streamed(e):
            req.sent[(sig.name, rank)].append(sig.seq)
            req.sent_from[sig.seq] = e.rank
        req.runs[(e.node, e.rank)] += 1

    def on_Overshoot(self, e: ev.Overshoot) -> None:
        # A speculative pass discarded after its loop stopped still ran, and took a chunk
        # (mstar speculates a stream consumer's next step with the next chunk in it).
        self._request(e.rid).runs[(e.node, e.rank)] += 1

    def on_ChunkPopped(self, e: ev.ChunkPopped) -> None:
        self._request(e.rid).chunks[(e.edge, e.rank)].append(e)

    def on_RequestEnded(self, e: ev.RequestEnded) -> None:
        outcome = self._over.ended(e)
        if outcome is not None:
            self._judge_over(e.rid, outcome)

    def on_Removed(self, e: ev.Removed) -> None:
        outcome = self._over.removed(e)
        if outcome is not None:
            self._judge_over(e.rid, outcome)

    def _judge_over(self, rid: str, outcome: str) -> None:
        req = self.requests.pop(rid, None)
        if req is not None:
            self.judged.extend(self._judge(rid, req, outcome == "completed", self._routes_of()))

    def _routes_of(self) -> tuple[dict[str, Connection], dict[str, str]]:
        if self._routes is None:
            scenario, layout = self.setup.scenario, self.setup.layout
            # an edge's connection: the first (source, edge) that names it, the last connection
            # given for that pair
            by_pair = {(c.src, c.edge): c for c in scenario.connections}
            conns: dict[str, Connection] = {}
            for (_src, edge), c in by_pair.items():
                conns.setdefault(edge, c)
            consumer_node = {edge: node for (_src, edge), (_c, node, _w) in layout.stream_routes.items()}
            self._routes = conns, consumer_node
        return self._routes

    def finish(self, ctx: RunContext) -> list[Violation]:
        routes = self._routes_of()
        out = list(self.judged)
        for rid, req in self.requests.items():
            out.extend(self._judge(rid, req, ctx.outcomes.get(rid) == "completed", routes))
        # Request by request, as if every request were judged now; each request's violations
        # stay in the order they were found (the sort is stable).
        out.sort(key=lambda v: rid_order(v.request or ""))
        return out

    def _judge(self, rid: str, req: _Request, completed: bool,
               routes: tuple[dict[str, Connection], dict[str, str]]) -> list[Violation]:
        out: list[Violation] = []
        conns, consumer_node = routes
        for key in sorted(set(req.sent) | set(req.chunks)):
            edge, rank = key
            sent = req.sent.get(key, [])
            chunks = req.chunks.get(key, [])
            conn = conns.get(edge)
            cont = conn is not None and conn.policy.kind == "fixed" and conn.policy.continue_after_done

            last_t = chunks[-1].t if chunks else None

            def flag(kind: str, msg: str, t: float | None, _key: tuple = key, **details: object) -> None:
                e_name, r_rank = _key
                out.append(Violation(self.name, f"stream {e_name!r} to rank {r_rank}: {msg}",
                                     node=consumer_node.get(e_name), rank=r_rank, request=rid,
                                     details={"edge": e_name, **details}, kind=kind, t=t))

            for i, ch in enumerate(chunks):
                if ch.index != i:
                    flag("order", f"chunk {ch.index} released where chunk {i} was due", ch.t)
                    break
                want = tuple(sent[ch.start: ch.start + len(ch.items)])
                if ch.items != want:
                    ranks = sorted({req.sent_from.get(i, -1) for i in (*ch.items, *want)})
                    if len(ranks) > 1 and _each_link_in_order(sent, chunks, req.sent_from):
                        # mstar appends items in the order their messages are handled (and a
                        # rank's own items at once): FIFO per link, nothing across producers.
                        flag("order-across-ranks",
                             f"chunk {ch.index} holds items {_items(ch.items)} where the producers "
                             f"sent {_items(want)} from offset {ch.start}: items from ranks "
                             f"{_items(ranks)} arrived in another order than sent", ch.t, chunk=ch.index,
                             ranks=ranks)
                    else:
                        flag("order",
                             f"chunk {ch.index} holds items {_items(ch.items)} where the producer "
                             f"sent {_items(want)} from offset {ch.start}: out of order, lost or "
                             f"duplicated", ch.t, chunk=ch.index)
                    break
            finals = [ch for ch in chunks if ch.final]
            if cont and finals:
                flag("finals", f"{plural(len(finals), 'final chunk')} on a stream that continues after its "
                     f"producer is done", finals[0].t)
            elif not cont and completed and len(finals) != 1:
                flag("finals", f"{len(finals)} final chunks, expected exactly one",
                     finals[1].t if finals else last_t, finals=len(finals))
            elif finals and finals[-1] is not chunks[-1]:
                flag("finals", f"chunk {chunks[-1].index} was released after the final chunk "
                     f"{finals[-1].index}", last_t)
            if completed and not cont and chunks:
                last = chunks[-1]
                if last.start + len(last.items) != len(sent):
                    left = len(sent) - (last.start + len(last.items))
                    flag("unconsumed", f"{left} of the {plural(len(sent), 'item')} sent "
                         f"{'was' if left == 1 else 'were'} never consumed", last_t, sent=len(sent))
            node = consumer_node.get(edge)
            if completed and node is not None:
                runs = req.runs.get((node, rank), 0)
                spare = 1 if cont else 0
                if not (len(chunks) - spare <= runs <= len(chunks)):
                    flag("passes", f"{node}'s passes for {plural(len(chunks), 'chunk')} released: {runs}, "
                         f"where each chunk is one pass", last_t, runs=runs, chunks=len(chunks))
        return out


def streamed(e: ev.Forward) -> Iterator[tuple[Any, int]]:
    """(the signal, the consumer rank) of each stream item a completion sent (its routes
    labelled ``stream:<rank>``)."""
    for sig, where in e.routes:
        if where.startswith("stream:"):
            yield sig, int(where[7:])


def _items(items: Any) -> str:
    """Stream items (or ranks) as a plain list: ``3, 4`` (``none`` for none)."""
    return ", ".join(str(i) for i in items) or "none"


def _each_link_in_order(sent: list[int], chunks: list[ev.ChunkPopped], sent_from: dict[int, Any]) -> bool:
    """Every producer rank's items first appear in the chunks in the order that rank sent
    them, none missing before the last one seen: only the interleaving of ranks differs."""
    # each item once, where it first appears (a sliding window repeats items); a dict keeps
    # that order and answers "seen already?" at once, where a list would rescan itself
    seen = list(dict.fromkeys(i for ch in chunks for i in ch.items))
    if set(seen) - set(sent):
        return False
    for rank in {sent_from.get(i) for i in sent}:
        got = [i for i in seen if sent_from.get(i) == rank]
        if got != [i for i in sent if sent_from.get(i) == rank][:len(got)]:
            return False
    return True
