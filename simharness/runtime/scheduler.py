"""The micro-scheduler of one rank: round-robin over (node, walk), continuous batching.

Modelled on mstar's ``MicroScheduler`` (reference/mstar_semantics.md section 4.3):

* a batch is one (node, walk) pair and *every* request for which that node is ready, except
  requests with a pending removal and those the engine gate holds;
* among ready pairs, round-robin picks the pair scheduled least recently (never scheduled counts
  as 0); ties go to the pair whose worker graph comes first in the layout, then to the one seen
  first scanning requests in admission order (mstar scans worker-graph queues, then requests,
  then a set of node names; ours is fixed so runs are deterministic, and the real stack orders
  that set by insertion too);
* ``batching="minibatch"`` (the reference, mstar at 6666c623): the scheduler imposes no cap;
  the engine runs an oversize batch as sequential minibatches of ``max_batch`` inside one
  execution (see `FakeNodes.duration`);
* ``batching="backlog"`` (mstar 0.2.1): ``max_batch`` caps a batch; the rest is kept in a
  backlog that is served before any new scan, so a split set drains first.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from simharness.runtime.protocol import RankRuntimeProtocol, WorkerGraphState


@dataclass
class Batch:
    node: str
    walk: str
    rids: list[str]
    number: int
    #: when it began executing (set by the worker loop's `start`)
    start: float = 0.0
    #: the next iteration scheduled before the previous batch was postprocessed
    speculative: bool = False
    #: a speculative batch that begins its loop's next iteration (a stop found in the previous
    #: batch's postprocess makes it an overshoot); a successor in the same iteration does not
    new_iter: bool = True
    #: for a lockstep (TP) batch: the instance's ranks and the leader's batch number (what a
    #: report calls it)
    instance: tuple[int, ...] = ()
    tp_number: int = 0
    #: ... and which of this rank's batches of the node it is: with the instance, the collective
    #: every rank of the instance joins (`Lockstep.join`)
    collective: int = 0


class MicroScheduler:
    def __init__(
        self,
        max_batch: Callable[[str, str], int | None],
        gate: Callable[[str, str, str, WorkerGraphState], str],
        batching: str = "minibatch",
        held: Callable[[str, str, str, WorkerGraphState], None] | None = None,
        gated: Collection[str] | None = None,
    ) -> None:
        #: the cap of a (node, walk) batch; None: no cap (minibatch: the engine splits it)
        self._max_batch = max_batch if batching == "backlog" else None
        #: why the engine holds a node for a request now ("" when it does not); pure
        self._gate = gate
        #: the nodes the gate may hold (None: any); the gate is not asked about the others
        self._gated = gated
        #: told of every (node, walk, rid, state) the gate held, in the order it held them (the
        #: worker loop starts the KV pull a held node waits for)
        self._held = held or (lambda node, walk, rid, st: None)
        self.batch_number = 0
        self.last_scheduled: dict[tuple[str, str], int] = {}
        #: (node, walk) -> request ids already taken off the ready sets, waiting their turn
        self.backlog: dict[tuple[str, str], list[str]] = {}
        #: the driver's pick among pairs tied in the round-robin (mstar's order is a set's, so
        #: any pick is one mstar could make): n -> index in range(n). None: the first seen.
        self.tie_break: Callable[[int], int] | None = None

    def drop(self, rid: str) -> None:
        """A removed request leaves every backlogged batch (mstar ``_drop_backlogged_rid``)."""
        for key in list(self.backlog):
            rids = [r for r in self.backlog[key] if r != rid]
            if rids:
                self.backlog[key] = rids
            else:
                del self.backlog[key]

    def next_batch(
        self,
        runtime: RankRuntimeProtocol,
        blocked: set[str],
        skip: Callable[[str, str, str], bool] | None = None,
        exclude: tuple[str, str] | None = None,
    ) -> Batch | None:
        """The next batch; `skip(node, walk, rid)` hides work this rank must not initiate (a TP
        follower's), `exclude` hides one (node, walk) pair this time (a speculation yield)."""
        if self.backlog:
            batch = self._from_backlog(runtime, blocked)
            if batch is not None:
                return batch
        gate, gated = self._gate, self._gated
        # Most scheduling passes hold nothing back: no removal pending, nothing excluded or
        # skipped, no gated node (None means the gate may hold any node).
        if not (blocked or exclude or skip) and gated is not None and not gated:
            ready = runtime.ready_groups()
        else:
            ready = {}
            for node, walk, rid, st in runtime.ready_work():
                key = (node, walk)
                if rid in blocked or key == exclude or (skip is not None and skip(node, walk, rid)):
                    continue
                if (gated is None or node in gated) and gate(node, walk, rid, st):
                    self._held(node, walk, rid, st)
                    continue
                group = ready.get(key)
                if group is None:
                    ready[key] = [(rid, st)]
                else:
                    group.append((rid, st))
        if not ready:
            return None
        last = self.last_scheduled
        if len(ready) > 1:
            # mstar scans a rank's worker-graph queues in order, then requests, then nodes, and
            # keeps the first least recent (micro_scheduler.py:344-386, 154-170): among pairs
            # tied in the round-robin, the one whose worker graph comes first
            # (a runtime without the order, an adapter's own, keeps the first least recent)
            order = getattr(runtime, "wg_order", None)
            best = (min(ready, key=lambda k: (last.get(k, 0), order[k])) if order is not None
                    else min(ready, key=lambda k: last.get(k, 0)))
        else:
            best = next(iter(ready))
        if self.tie_break is not None and len(ready) > 1:
            low = last.get(best, 0)
            tied = [k for k in ready if last.get(k, 0) == low]
            if len(tied) > 1:
                best = tied[self.tie_break(len(tied))]
        rids = []
        for rid, st in ready[best]:
            st.pop_ready(best[0])
            rids.append(rid)
        return self._cap(best, rids)

    def room_for_continuing(self, key: tuple[str, str]) -> int | None:
        """How many of a speculation's own requests fit in a batch of `key` once its backlog is
        served first (mstar ``room_for_continuing``): the cap less the backlog; None uncapped."""
        cap = self._cap_of(key)
        if cap is None:
            return None
        return max(0, cap - len(self.backlog.get(key, ())))

    def fresh_for(self, key: tuple[str, str], runtime: RankRuntimeProtocol, blocked: set[str],
                  pre_existing: int) -> list[str]:
        """Other requests for a speculation of `key` (mstar's ``get_next_batch`` with a target
        and ``pre_existing_batch_size``): its backlog first, else its ready requests (the gate
        asked), up to the cap less `pre_existing`; the rest of a ready set waits in the backlog."""
        node, walk = key
        cap = self._cap_of(key)
        room = None if cap is None else max(0, cap - pre_existing)
        gate, gated = self._gate, self._gated
        taken: list[str] = []
        waiting = self.backlog.get(key)
        if waiting:
            runnable = self._runnable(key, waiting, runtime, blocked)
            if runnable:
                taken = runnable if room is None else runnable[:room]
                rest = [r for r in waiting if r not in taken]
                if rest:
                    self.backlog[key] = rest
                else:
                    del self.backlog[key]
                return taken
        for n, w, rid, st in list(runtime.ready_work()):
            if n != node or w != walk or rid in blocked:
                continue
            if (gated is None or node in gated) and gate(node, walk, rid, st):
                self._held(node, walk, rid, st)
                continue
            st.pop_ready(node)
            taken.append(rid)
        if room is not None and len(taken) > room:
            rest, taken = taken[room:], taken[:room]
            self.backlog.setdefault(key, []).extend(r for r in rest if r not in self.backlog.get(key, ()))
        return taken

    def _cap_of(self, key: tuple[str, str]) -> int | None:
        """The most requests a batch of `key` takes (None: no cap; minibatch never caps)."""
        return None if self._max_batch is None else self._max_batch(key[0], key[1])

    def _runnable(self, key: tuple[str, str], rids: list[str], runtime: RankRuntimeProtocol,
                  blocked: set[str]) -> list[str]:
        """The backlogged `rids` of `key` that can run now: still here, not being removed, not
        held by the gate (whose holds are reported, `held`)."""
        node, walk = key
        gate, gated = self._gate, self._gated
        out = []
        for rid in rids:
            st = runtime.state_of(rid, walk, node)
            if st is None or rid in blocked:
                continue
            if (gated is None or node in gated) and gate(node, walk, rid, st):
                self._held(node, walk, rid, st)
                continue
            out.append(rid)
        return out

    def _from_backlog(self, runtime: RankRuntimeProtocol, blocked: set[str]) -> Batch | None:
        for key, rids in list(self.backlog.items()):
            runnable = self._runnable(key, rids, runtime, blocked)
            if not runnable:
                continue
            waiting = [r for r in rids if r not in runnable]
            if waiting:
                self.backlog[key] = waiting
            else:
                del self.backlog[key]
            return self._cap(key, runnable)
        return None

    def speculative_batch(self, node: str, walk: str, rids: list[str]) -> Batch:
        return self._numbered(node, walk, rids, speculative=True)

    def follower_batch(self, node: str, walk: str, rids: list[str]) -> Batch:
        return self._numbered(node, walk, rids)

    def _numbered(self, node: str, walk: str, rids: list[str], speculative: bool = False) -> Batch:
        self.batch_number += 1
        self.last_scheduled[(node, walk)] = self.batch_number
        return Batch(node, walk, rids, self.batch_number, speculative=speculative)

    def _cap(self, key: tuple[str, str], rids: list[str]) -> Batch:
        cap = self._cap_of(key)
        if cap is not None and len(rids) > cap:
            rest = rids[cap:]
            rids = rids[:cap]
            self.backlog.setdefault(key, []).extend(r for r in rest if r not in self.backlog.get(key, ()))
        return self._numbered(key[0], key[1], rids)
