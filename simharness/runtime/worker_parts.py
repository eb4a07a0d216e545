"""The worker loop's collaborators, one concern each, and its one per-request record.

`WorkerLoop` (worker_loop.py) orchestrates; these hold the state of one concern each:

* `RequestRecord`: what the loop keeps about one request on this rank beside the runtime's own
  state (its kind, the report it is buffering, its KV pages);
* `Teardown`: deferred removal, messages that came early (replayed at NEW_REQUEST) and those
  that came after removal (parked for ever, mstar's ``_unprocessed_messages``);
* `Lockstep`: TP instances: the leader's SCHEDULE_TP, the follower's queue of leader batches;
* `Speculation`: mstar's async scheduling of a self-loop's next step, and the stops it outruns;
* `KvPulls`: where each KV label's pages are, and the pulls in flight. Its `wait` is a pure
  predicate; a pull starts only when the loop asks (`start`), for work the scheduler held;
* `Reports`: the sends of one completion and the report buffering until the request's next
  worker-graphs-done report.

Each is a plain class a runtime may subclass and plug in through its `runtime.parts.WorkerParts`
(``WorkerParts(lockstep=...)``). Each keeps the loop it serves as a
`runtime.worker_context.LoopContext`, which says what a part may read of it. Pure: no clock,
no I/O.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from simharness import events as ev
from simharness.ridmap import RidSet
from simharness.runtime.messages import (
    CLIENT_ID,
    CONDUCTOR_ID,
    InputSignals,
    KvPullDone,
    ResultTensors,
    ScheduleTp,
    Send,
    WorkerGraphsDoneMsg,
)
from simharness.runtime.scheduler import Batch
from simharness.runtime.worker_context import LoopContext
from simharness.signals import Signal

if TYPE_CHECKING:
    from simharness.runtime.rank import Completion


@dataclass(slots=True)
class RequestRecord:
    """One request on this rank, as the worker loop sees it (created at NEW_REQUEST, dropped at
    removal)."""

    #: the request kind (its dynamic-loop stop counts)
    kind: str
    #: persist signals buffered until the next worker-graphs-done report
    persist: list[Signal] = field(default_factory=list)
    #: client emits and new tokens made since the last report
    emits: int = 0
    tokens: int = 0
    #: partitions whose pass consumed a final chunk since the last report
    partitions_done: set[str] = field(default_factory=set)
    #: KV label -> tokens held here
    kv_local: dict[str, int] = field(default_factory=dict)
    #: KV label -> (rank, tokens) the conductor last reported
    kv_known: dict[str, tuple[int, int]] = field(default_factory=dict)


class Teardown:
    """Removal of requests, and the messages that arrive around it."""

    def __init__(self, loop: LoopContext) -> None:
        self.loop = loop
        #: rids whose REMOVE arrived while a batch of theirs ran (removed after it finishes)
        self.pending: set[str] = set()
        #: rids whose DRAIN_REQUEST arrived while a batch of theirs ran (drained after it)
        self.drains: set[str] = set()
        #: rids drained here (aborted): no work of theirs runs again; REMOVE follows
        self.drained: set[str] = set()
        #: rids removed on this rank (a byte each: it grows with every request the rank served)
        self.removed: RidSet = RidSet()
        #: rid -> messages that arrived before the request's NEW_REQUEST
        self.early: dict[str, list[Any]] = {}
        #: rid -> kinds of messages that arrived after the request was removed here
        self.unprocessed: dict[str, list[str]] = {}

    def hold(self, msg: Any, now: float) -> None:
        """A message for a request this rank does not know (now)."""
        rid = msg.rid
        if rid in self.removed:
            self.unprocessed.setdefault(rid, []).append(msg.kind_name)
            self.loop.emit(ev.Dropped(
                now, self.loop.rank, rid, msg.kind_name,
                "arrived after the request was removed on this rank; parked in unprocessed "
                "messages forever", tuple(getattr(msg, "signals", ()))))
        else:
            self.early.setdefault(rid, []).append(msg)

    def unprocessed_pairs(self) -> list[tuple[str, str]]:
        """(request, message kind) of every message parked unprocessed, in arrival order."""
        return [(rid, kind) for rid, kinds in self.unprocessed.items() for kind in kinds]


class Lockstep:
    """TP instances: the instance's rank 0 schedules a TP node and tells the others
    (SCHEDULE_TP); a follower runs the leader's batches in order, each once the node is ready
    for every request in it, and after one such batch lets its own ready work go first."""

    def __init__(self, loop: LoopContext) -> None:
        self.loop = loop
        self.rank = loop.rank
        runtime = loop.runtime
        #: most layouts have no TP instance: every lockstep question is then answered at once
        self.has_tp = runtime.layout.has_tp
        #: the leader's batches this follower has still to run, in order
        self.follow: deque[ScheduleTp] = deque()
        #: the TP groups in which this rank leads an instance (mstar's configured ``_tp_rank`` 0)
        self._leads: frozenset[int] | None = None
        self.streak = 0
        #: the lockstep batch this rank chose and has not started: it waits in the batch's
        #: collective for the other ranks of the instance until they choose it too (for reports)
        self.meeting: Batch | None = None
        #: node -> `node_instance`, made at its first use
        self._node_instances: dict[str, tuple[int, ...] | None] = {}
        #: (node, instance) -> how many of its batches this rank has run (`join`)
        self._counts: dict[tuple[str, tuple[int, ...]], int] = {}

    def follows(self, rid: str) -> bool:
        """This rank ignores the conductor's REMOVE for `rid` and waits for a leader's copy.
        mstar decides it per worker, not per request (``is_tp_follower``, worker.py:294,
        480-481): a rank that follows in any TP instance of its layout ignores every
        conductor REMOVE, also for a request that did not use that instance here (another
        replica of the group, or only a plain node on this rank), whose copy then never
        comes."""
        return self.is_follower

    @property
    def is_follower(self) -> bool:
        return self.rank in self.loop.runtime.layout.tp_followers

    def followers(self, rid: str) -> list[int]:
        """Where this rank forwards a REMOVE of `rid`: mstar's ``_remove_request``
        (worker.py:497-514) sends it to ``_workers[1:]`` of every TP group in which this worker
        is TP rank 0 *in its own configured instance*, the workers being the instance the
        request uses. The leader of another replica of the group therefore forwards it too,
        and the request's followers get a second REMOVE after the first removed the request
        (parked for ever in ``_unprocessed_messages``)."""
        if not self.has_tp:
            return []
        leads = self._leads
        if leads is None:
            rank = self.rank
            leads = self._leads = frozenset(
                wg.group for wg in self.loop.runtime.layout.worker_graphs
                for inst in wg.instances if len(inst) > 1 and inst[0] == rank)
        if not leads:
            return []
        req = self.loop.runtime.requests[rid]
        by_id = self.loop.runtime.layout.by_id
        return sorted({x for wg, r in req.assignment.wg_ranks.items()
                       if len(r) > 1 and by_id[wg].group in leads for x in r[1:]})

    def node_instance(self, node: str) -> tuple[int, ...] | None:
        """The lockstep instance this rank is part of for `node`, whatever the walk (None:
        none). mstar builds a worker's TP groups per node (``parallel_groups``, worker.py:
        273-294), and the collectives inside the node's forward run on that group in every
        walk, also one where the node runs alone on this rank."""
        cache = self._node_instances
        if node not in cache:
            rank = self.rank
            cache[node] = next((inst for wg in self.loop.runtime.layout.worker_graphs
                                if node in wg.node_names
                                for inst in wg.instances if len(inst) > 1 and rank in inst), None)
        return cache[node]

    def join(self, batch: Batch) -> None:
        """Number a batch this rank is about to run in its node's collective: the k-th batch of
        a node on each rank of its instance meets the k-th on the others, as NCCL pairs the
        collectives of one group in the order they are issued. A lone batch of the node (a walk
        where it is not tensor-parallel here) joins it too, and so meets whatever batch of the
        node a peer runs next, or nothing."""
        inst = self.node_instance(batch.node)
        if inst is None:
            return
        if not batch.instance:
            batch.instance = inst
            self.meeting = batch
        key = (batch.node, batch.instance)
        n = self._counts.get(key, 0)
        self._counts[key] = n + 1
        batch.collective = n

    def follower_here(self, node: str, walk: str, rid: str) -> bool:
        """This rank runs `node` for `rid` in `walk` only in a leader's batch. Also where the
        node runs alone here in that walk: mstar's follower never schedules a node it follows
        in (its TP groups are per node, worker.py:273-294), so such a batch is never run."""
        ranks = self.loop.runtime.instance_of(rid, walk, node)
        if len(ranks) > 1:
            return ranks[0] != self.rank
        inst = self.node_instance(node)
        return inst is not None and inst[0] != self.rank

    def lead(self, batch: Batch) -> list[Send]:
        """A batch this rank chose: SCHEDULE_TP to its followers, when it leads an instance."""
        ranks = self.loop.runtime.instance_of(batch.rids[0], batch.walk, batch.node)
        followers = list(ranks[1:]) if len(ranks) > 1 and ranks[0] == self.rank else []
        if not followers:
            return []
        msg = ScheduleTp(node=batch.node, walk=batch.walk, rids=list(batch.rids),
                         number=batch.number, src=self.rank)
        batch.instance = (self.rank, *followers)
        batch.tp_number = batch.number
        self.meeting = batch
        return [Send(f, 0, msg) for f in followers]

    def take(self) -> Batch | None:
        """The leader's next batch, when it can run here now (all of its requests or none)."""
        if not self.follow:
            return None
        loop = self.loop
        runtime = loop.runtime
        head = self.follow[0]
        if self.streak >= 1 and any(not self.follower_here(n, w, r)
                                    for n, w, r, _ in runtime.ready_work()):
            self.streak = 0
            return None  # after one follower batch, own ready work goes first
        states = []
        for rid in head.rids:
            st = runtime.state_of(rid, head.walk, head.node)
            if st is None or head.node not in st.ready:
                return None
            if loop.gate(head.node, head.walk, rid, st):
                loop.held(head.node, head.walk, rid, st)
                return None
            states.append(st)
        for st in states:
            st.pop_ready(head.node)
        self.follow.popleft()
        self.streak += 1
        batch: Batch = loop.scheduler.follower_batch(head.node, head.walk, list(head.rids))
        batch.instance = runtime.instance_of(head.rids[0], head.walk, head.node)
        batch.tp_number = head.number
        self.meeting = batch
        return batch

    def drop(self, rid: str) -> None:
        self.follow = deque(m for m in self.follow if rid not in m.rids)

    def holdup(self, node: str, walk: str, rid: str, queued: bool) -> str:
        """For reports: how TP lockstep holds `node` for `rid` on this rank, whose inputs are
        all here ("" when it does not). `queued`: the node is ready, not yet taken for a batch.

        A rank that chose a lockstep batch waits in its collective until every rank of the
        instance has chosen it too. A follower runs only its leader's batches, in the order
        they came, so its ready node waits either for a schedule that has not come, or behind
        a batch at the head of the queue that cannot run here; the second is how a leader
        stuck in the collective of a batch its follower will never run leaves the follower's
        own requests hanging."""
        m = self.meeting
        if m is not None and m.node == node and m.walk == walk and rid in m.rids:
            others = [r for r in m.instance if r != self.rank]
            return (f"{ev.LOCKSTEP_HOLD}rank {self.rank} took {node} for "
                    f"{', '.join(m.rids)} into batch {m.tp_number} of its TP instance and waits "
                    f"in that batch's collective for rank{'s' if len(others) > 1 else ''} "
                    f"{', '.join(map(str, others))}")
        if not queued or not self.has_tp or not self.follower_here(node, walk, rid):
            return ""
        ranks = self.loop.runtime.instance_of(rid, walk, node)
        inst = ranks if len(ranks) > 1 else self.node_instance(node)  # alone here in this walk
        leader = (inst or ranks)[0]
        if not self.follow:
            return (f"{ev.LOCKSTEP_HOLD}rank {self.rank} runs {node} only in a batch of rank "
                    f"{leader}, and no batch of {node} for {rid} came")
        head = self.follow[0]
        mine = head.node == node and head.walk == walk and rid in head.rids
        which = "" if mine else f", {head.node} for {', '.join(head.rids)}"
        # A leader meets its followers in a batch's collective before it runs the batch: one
        # that this follower cannot run holds the leader there, and it handles nothing more.
        why = "; ".join(self._not_runnable(head))
        return (f"{ev.LOCKSTEP_HOLD}rank {self.rank} runs rank {leader}'s batches in order, and "
                f"the next one{which} (rank {leader}'s batch {head.number}){',' if which else ''} "
                f"cannot run here ({why}), so rank {leader} waits in its collective")

    def _not_runnable(self, head: ScheduleTp) -> list[str]:
        """Why the leader's batch `head` cannot run on this rank now: one phrase per request
        that holds it back."""
        loop = self.loop
        out = []
        for rid in head.rids:
            st = loop.runtime.state_of(rid, head.walk, head.node)
            if st is None:
                out.append(f"{rid} has no state for walk {head.walk} on rank {self.rank}")
            elif head.node not in st.ready:
                out.append(f"{head.node} is not ready for {rid} on rank {self.rank}")
            else:
                why = loop.gate(head.node, head.walk, rid, st)
                if why:
                    out.append(f"{head.node} for {rid} is gated: {why}")
        # Every request of it ready and open: the batch waits for own work to go first.
        return out or [f"rank {self.rank}'s own ready work goes first"]


class Speculation:
    """mstar's async scheduling (4.5): after a batch of an async node, the next batch is
    scheduled before the batch is postprocessed (unless other work is waiting after one such
    step). The reference speculates only an async single-node self-loop's next iteration; under
    `LoopPolicy.successors` (mstar 0.2.1, ``_try_speculate_next``) also the first node of the
    same worker graph that the batch's outputs make ready, which then runs right after it. A
    dynamic stop found in that postprocess comes too late for a next iteration: it runs (the
    overshoot) and its result is discarded."""

    def __init__(self, loop: LoopContext) -> None:
        self.loop = loop
        self.batch: Batch | None = None
        self.steps = 0
        #: a (node, walk) pair the next scheduling pass skips (the speculation yielded to it)
        self.exclude: tuple[str, str] | None = None
        #: (rid, loop) of every dynamic loop stopped in the last postprocess (mstar
        #: ``_pending_loop_stops``)
        self.pending_stops: set[tuple[str, str]] = set()
        #: every node that speculates in some worker graph of this rank: after a batch of any
        #: other node there is nothing to plan (`plan` asks the batch's own worker graph next)
        self._may_speculate = frozenset().union(*(s.spec_nodes for s in loop.runtime.specs.values()))
        self._successors = loop.policy.successors

    def take(self) -> Batch | None:
        batch, self.batch = self.batch, None
        return batch

    def stopped(self, stops: set[tuple[str, str]], rid: str, loop: str) -> bool:
        """Whether `stops` (pending loop stops) cut `rid`'s `loop` short: mstar 0.2.1 matches the
        loop (worker.py:2165-2176); the reference, any loop of the request."""
        if self._successors:
            return (rid, loop) in stops
        return any(r == rid for r, _ in stops)

    def plan(self, batch: Batch, now: float) -> None:
        """Build the next batch before postprocessing this one."""
        node, walk = batch.node, batch.walk
        if node not in self._may_speculate and not self._successors:
            return
        loop = self.loop
        runtime = loop.runtime
        first = runtime.state_of(batch.rids[0], walk, node) if batch.rids else None
        if first is None:
            return
        same = node in first.spec.spec_nodes
        if not same and not (self._successors and first.spec.nodes[node].async_scheduling):
            return
        if loop.lockstep.has_tp and (len(runtime.instance_of(batch.rids[0], walk, node)) > 1
                                     or loop.lockstep.node_instance(node) is not None):
            return  # TP nodes never speculate
        others = any(not (n == node and w == walk) for n, w, _, _ in runtime.ready_work())
        if self.steps >= 1 and others:
            self.steps = 0
            self.exclude = (node, walk)  # yield away: another batch runs first
            if self._successors:
                self._choose_now()
            return
        if same:
            target, new_iter, rids = node, True, self._next_iteration(batch)
        else:
            found = self._successor(first, node)
            target, new_iter = found if found is not None else (node, False)
            rids = self._continuing(batch, target, new_iter) if found is not None else []
            if not rids:
                if self._successors:
                    self._choose_now()
                return
        pending = loop.teardown.pending
        if self._successors:
            # mstar 0.2.1: the continuing requests that fit once the target's backlog is served,
            # then the target's backlog or ready requests up to the cap (``room_for_continuing``,
            # ``get_next_batch(target=...)``, worker.py:1806-1870)
            room = loop.scheduler.room_for_continuing((target, walk))
            if room is not None and len(rids) > room:
                rids = rids[:room]
            if not rids:
                return
            self._take_from_ready(target, walk, rids)
            rids.extend(r for r in loop.scheduler.fresh_for((target, walk), runtime, pending, len(rids))
                        if r not in rids)
        else:
            for n, w, rid, st in list(runtime.ready_work()):
                if n == target and w == walk and rid not in rids and rid not in pending:
                    if loop.gate(n, w, rid, st):
                        loop.held(n, w, rid, st)
                        continue
                    st.pop_ready(n)
                    rids.append(rid)
        if not rids:
            return
        for rid in rids:
            st = runtime.state_of(rid, walk, target)
            if st is not None:
                st.mark_speculative(target)
        self.batch = loop.scheduler.speculative_batch(target, walk, rids)
        self.batch.new_iter = new_iter
        self.steps += 1

    def _choose_now(self) -> None:
        """mstar 0.2.1 with nothing to speculate after an async batch: the next batch is chosen
        while it runs, from the queues as they stand before its outputs are postprocessed (the
        "yield away" path of the main loop, worker.py:2852-2885), and runs next."""
        self.batch = self.loop.schedule()

    def _next_iteration(self, batch: Batch) -> list[str]:
        """The rids of a self-loop batch whose loop goes on to a next iteration."""
        runtime = self.loop.runtime
        pending = self.loop.teardown.pending
        node, walk = batch.node, batch.walk
        rids = []
        for rid in batch.rids:
            st = runtime.state_of(rid, walk, node)
            if st is None or rid in pending:
                continue
            lp = st.loops[st.spec.nodes[node].loop.name]
            if self.stopped(self.pending_stops, rid, lp.spec.name):
                continue
            if lp.finish or lp.curr_iter + 1 >= lp.spec.max_iters:
                continue
            rids.append(rid)
        return rids

    def _successor(self, st: Any, node: str) -> tuple[str, bool] | None:
        """(target, whether it starts its loop's next iteration): the first node of `st`'s worker
        graph, other than `node`, that `node`'s outputs would make ready, as mstar's
        ``ingest_for_speculation`` finds it for the batch's first request (graph_io.py:96-150;
        mstar takes the first of a set, the model the first in output order), filtered as
        ``_try_speculate_next`` filters it: async, and not tensor-parallel here."""
        spec = st.spec
        ns = spec.nodes[node]
        lockstep = self.loop.lockstep
        backs = spec.drop_on_exit.get(ns.loop.name, frozenset()) if ns.loop is not None else frozenset()
        fed: dict[str, set[str]] = {}
        for e in ns.outputs:
            if e.to != node and e.to in spec.nodes:
                fed.setdefault(e.to, set()).add(e.name)
        for dest, names in fed.items():
            ds = spec.nodes[dest]
            if not ds.async_scheduling or (lockstep.has_tp and lockstep.node_instance(dest) is not None):
                continue
            if (ds.input_set - ds.stream_inputs) <= (names | set(st.inputs(dest))):
                return dest, any((n, dest) in backs for n in names)
        return None

    def _continuing(self, batch: Batch, target: str, new_iter: bool) -> list[str]:
        """The batch's rids that go on to `target` (``_prep_continuing_rid_for_spec``): not being
        removed, their loop not stopping at a new iteration, and the target ready for each with
        the batch's outputs, its streamed inputs included."""
        runtime = self.loop.runtime
        pending = self.loop.teardown.pending
        node, walk = batch.node, batch.walk
        names = {e.name for e in runtime.state_of(batch.rids[0], walk, node).spec.nodes[node].outputs
                 if e.to == target}
        rids = []
        for rid in batch.rids:
            st = runtime.state_of(rid, walk, target)
            if st is None or rid in pending:
                continue
            ts = st.spec.nodes[target]
            if new_iter and ts.loop is not None:
                lp = st.loops[ts.loop.name]
                if (self.stopped(self.pending_stops, rid, lp.spec.name) or lp.finish
                        or lp.curr_iter + 1 >= lp.spec.max_iters):
                    continue
            if not ts.input_set <= (names | set(st.inputs(target))):
                continue
            rids.append(rid)
        return rids

    def _take_from_ready(self, target: str, walk: str, rids: list[str]) -> None:
        """The continuing requests' target leaves the ready sets (the speculation runs it)."""
        runtime = self.loop.runtime
        for rid in rids:
            st = runtime.state_of(rid, walk, target)
            if st is not None and target in st.ready:
                st.pop_ready(target)


class KvPulls:
    """KV pages: where each label's pages are (as the conductor last reported), what this rank
    holds, and the pulls in flight. A KV-cache node on a rank that lacks the request's pages
    waits for its pull (mstar's ``check_ready`` reports not ready until the pull completes)."""

    def __init__(self, loop: LoopContext) -> None:
        self.loop = loop
        self.rank = loop.rank
        #: (rid, label) of every pull started and not yet done
        self.pulling: set[tuple[str, str]] = set()
        #: pulls started since the loop last collected them
        self.outbox: list[Send] = []

    def learn(self, record: RequestRecord, kv: dict[str, tuple[int, int]]) -> None:
        if kv:
            record.kv_known.update(kv)

    def missing(self, node: str, rid: str) -> tuple[str, int, int, int] | None:
        """(label, source rank, tokens wanted, tokens held) when `node` must wait for a pull of
        `rid`'s pages; None when it need not. Pure."""
        label = self.loop.nodes.kv_label(node)
        if label is None:
            return None
        rec = self.loop.records.get(rid)
        if rec is None:
            return None
        known = rec.kv_known.get(label)
        if known is None:
            return None
        src, tokens = known
        have = rec.kv_local.get(label, 0)
        if src == self.rank or have >= tokens:
            return None
        return label, src, tokens, have

    def wait(self, node: str, rid: str) -> str:
        """Why `node` waits for `rid`'s KV pages ("" when it does not). Pure."""
        m = self.missing(node, rid)
        if m is None:
            return ""
        label, src, tokens, have = m
        return f"waits for its KV pull of {tokens - have} tokens ({label}) from rank {src}"

    def start(self, node: str, rid: str) -> None:
        """Start the pull `node` waits for, unless it is under way already."""
        m = self.missing(node, rid)
        if m is None:
            return
        label, src, tokens, have = m
        if (rid, label) in self.pulling:
            return
        self.pulling.add((rid, label))
        nbytes = (tokens - have) * self.loop.scenario.kv.bytes_per_token
        self.outbox.append(Send(self.rank, nbytes, KvPullDone(rid=rid, label=label, tokens=tokens,
                                                              src=src), src=src))

    def done(self, record: RequestRecord, msg: KvPullDone) -> None:
        record.kv_local[msg.label] = max(record.kv_local.get(msg.label, 0), msg.tokens)
        self.pulling.discard((msg.rid, msg.label))

    def drop(self, rid: str) -> None:
        self.pulling = {k for k in self.pulling if k[0] != rid}


class Reports:
    """What one completion sends (mstar sends per request: INPUT_SIGNALS to peers, emits,
    streams, then the report), and the report buffering: client emits, new tokens, persisted
    signals and consumed final chunks wait in the request's `RequestRecord` until its next
    worker-graphs-done report."""

    def __init__(self, loop: LoopContext) -> None:
        self.loop = loop
        self.rank = loop.rank

    def route(self, c: Completion, label: str | None, now: float, sends: list[Send]) -> None:
        """Append the sends of one completion to `sends`, and its report when it completed
        worker graphs."""
        rank = self.rank
        to_ranks = c.to_ranks
        if to_ranks:
            rid, walk, pass_no = c.rid, c.walk, c.pass_no
            # the stop times this rank knows travel with its data (mstar's fwd_info)
            times = self.loop.runtime.stop_times_of(rid, walk)
            for r in sorted(to_ranks) if len(to_ranks) > 1 else to_ranks:
                sigs = to_ranks[r]
                nbytes = 0
                for s in sigs:
                    nbytes += s.nbytes
                sends.append(Send(r, nbytes, InputSignals(rid=rid, walk=walk, pass_no=pass_no,
                                                          signals=sigs, src=rank,
                                                          stop_times=times)))
        if not (c.to_conductor or c.to_client or c.new_tokens or c.stream_local or c.partition_done
                or c.completed_wgs):
            return  # most completions: nothing to buffer for a report, nothing to report
        loop = self.loop
        rec = loop.records[c.rid]
        if c.to_conductor:
            rec.persist.extend(c.to_conductor)
        if c.to_client:
            for s in c.to_client:
                sends.append(Send(CLIENT_ID, s.nbytes, ResultTensors(rid=c.rid, rank=rank, signal=s)))
            rec.emits += len(c.to_client)
        if c.new_tokens and c.tp_rank == 0:
            rec.tokens += c.new_tokens
        if c.stream_local:
            loop.runtime.deliver(c.rid, c.walk, c.pass_no, c.stream_local)
        if c.partition_done:
            rec.partitions_done.add(c.partition)
        if c.completed_wgs:
            persist, rec.persist = rec.persist, []
            emits, rec.emits = rec.emits, 0
            tokens, rec.tokens = rec.tokens, 0
            done_parts = rec.partitions_done
            kv = {}
            if label is not None and c.tp_rank == 0:
                kv = {label: rec.kv_local.get(label, 0)}
            loop.emit(ev.WorkerGraphsDone(now, rank, c.rid, tuple(c.completed_wgs), c.pass_no))
            sends.append(Send(CONDUCTOR_ID, 0, WorkerGraphsDoneMsg(
                rid=c.rid, rank=rank, wgs=list(c.completed_wgs), persist=persist,
                pass_no=c.pass_no, emits=emits, partition_done=c.partition in done_parts,
                new_tokens=tokens, kv=kv, tp_rank=c.tp_rank)))
            rec.partitions_done = done_parts - {c.partition}
