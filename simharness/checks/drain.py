"""`drain`: at the end nothing is left behind and nothing vanished without a trace.

Reported as violations:

* a completed request that still held signals (in a node's current or next-iteration slot) or
  loop state when a rank tore it down: the outputs of an extra pass end up here;
* a signal dropped silently at a receiver (no worker graph of the current walk accepted it) and
  a message that reached a rank after the request was removed there (mstar parks those in
  ``_unprocessed_messages`` for ever);
* at the end of the run: request state left on a rank, messages parked for unknown requests,
  requests left at the conductor, or a rank still busy.

Requests that hung or timed out are left to `liveness`: what they held is part of that report.

Kinds, the most telling first: ``held-at-teardown``, ``dropped``, ``parked`` (messages parked for
removed requests at the end), ``state-left``, ``conductor-left``, ``busy``. A drop and a park
name their mechanism too: the kinds of message (``remove_request``, ``stop_loops``,
``input_signals``) and, for a rank that follows in a TP instance, ``tp-follower``
(``drain:dropped:remove_request:tp-follower`` is the TP REMOVE race;
``drain:dropped:stop_loops`` a STOP_LOOPS for a request the rank already removed).
"""

from __future__ import annotations

from collections import defaultdict

from simharness import events as ev
from simharness.checks.base import Check, RunContext, RunSetup, Violation, and_join, rid_order
from simharness.wording import plural


class DrainCheck(Check):
    name = "drain"
    priority = 70
    kinds = ("held-at-teardown", "dropped", "parked", "state-left", "conductor-left", "busy")

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        self.removed: list[ev.Removed] = []
        self.dropped: list[ev.Dropped] = []
        self.final: ev.RunEnded | None = None

    def on_Removed(self, e: ev.Removed) -> None:
        if e.held or e.leftovers:
            self.removed.append(e)

    def on_Dropped(self, e: ev.Dropped) -> None:
        self.dropped.append(e)

    def on_RunEnded(self, e: ev.RunEnded) -> None:
        self.final = e

    def finish(self, ctx: RunContext) -> list[Violation]:
        out: list[Violation] = []
        for e in self.removed:
            if ctx.outcomes.get(e.rid) != "completed":
                continue
            by_slot: dict[tuple[str, str, str], list[ev.SignalRef]] = defaultdict(list)
            for wg, node, slot, sig in e.held:
                by_slot[(wg, node, slot)].append(sig)
            parts = [
                f"{and_join([s.describe() for s in sigs])} in {node}'s {slot} slot ({wg})"
                for (wg, node, slot), sigs in by_slot.items()
            ]
            parts.extend(e.leftovers)
            first_node = e.held[0][1] if e.held else None
            out.append(Violation(
                self.name,
                f"{e.rid} was removed from rank {e.rank} while it still held: " + "; ".join(parts),
                node=first_node, rank=e.rank, request=e.rid,
                details={"held": [{"wg": wg, "node": n, "slot": slot, "signal": s.name,
                                   "from": f"{s.src}@{s.src_rank}", "counter": s.counter}
                                  for wg, n, slot, s in e.held],
                         "leftovers": list(e.leftovers)},
                kind="held-at-teardown", t=e.t,
            ))
        followers = self.setup.layout.tp_followers

        def role(rank: int) -> str:
            return ":tp-follower" if rank in followers else ""

        groups: dict[tuple[str, int, str], list[ev.SignalRef]] = defaultdict(list)
        counts: dict[tuple[str, int, str], int] = defaultdict(int)
        #: when each group's first drop happened
        first: dict[tuple[str, int, str], float] = {}
        #: the kinds of message each group dropped, in the order they were dropped
        whats: dict[tuple[str, int, str], list[str]] = defaultdict(list)
        for d in self.dropped:
            key = (d.rid, d.rank, d.reason)
            groups[key].extend(d.signals)
            counts[key] += 1
            first.setdefault(key, d.t)
            if d.what not in whats[key]:
                whats[key].append(d.what)
        for (rid, rank, reason), sigs in sorted(groups.items(),
                                                key=lambda kv: (rid_order(kv[0][0]), kv[0][1])):
            what = (and_join([s.describe() for s in sigs]) if sigs
                    else plural(counts[(rid, rank, reason)], "message"))
            out.append(Violation(self.name, f"rank {rank} dropped {what}: {reason}",
                                 rank=rank, request=rid,
                                 details={"signals": [s.name for s in sigs]}, kind="dropped",
                                 mechanism="+".join(sorted(whats[(rid, rank, reason)])) + role(rank),
                                 t=first[(rid, rank, reason)]))
        if self.final is not None:
            f = self.final
            for rank, rids in f.requests_left:
                out.append(Violation(self.name, f"rank {rank} still holds state for "
                                                f"{and_join(list(rids))} at the end of the run", rank=rank,
                                     kind="state-left", t=f.t))
            for rank, items in f.unprocessed:
                kinds: dict[tuple[str, str], int] = defaultdict(int)
                for rid, kind in items:
                    kinds[(rid, kind)] += 1
                text = and_join([f"{plural(n, f'{k} message')} for {r}" for (r, k), n in kinds.items()])
                out.append(Violation(self.name, f"rank {rank} ends with messages parked for removed "
                                                f"requests (never processed, never freed): {text}",
                                     rank=rank, kind="parked", t=f.t,
                                     mechanism="+".join(sorted({k for _, k in kinds})) + role(rank)))
            if f.conductor_requests or f.conductor_waiting:
                left = list(f.conductor_requests + f.conductor_waiting)
                out.append(Violation(self.name, f"the conductor ends with "
                                                f"{'request' if len(left) == 1 else 'requests'} "
                                                f"{and_join(left)} still open",
                                     kind="conductor-left", t=f.t))
            for rank in f.busy_ranks:
                out.append(Violation(self.name, f"rank {rank} is still busy at the end", rank=rank,
                                     kind="busy", t=f.t))
        return out
