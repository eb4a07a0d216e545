"""One rank's runtime: its requests, their worker-graph states, and output routing.

The model of mstar's ``WorkerGraphsManager`` and ``process_node_outputs``
(reference/mstar_semantics.md sections 3.4, 5.3, 6.2), as a pure state machine. The driver (the
worker loop) calls it; it never sends anything itself. It answers:

* `admit`: a request arrives (mstar NEW_REQUEST): state for each of its worker graphs here, and a
  StreamBuffer for each stream whose consumer runs here;
* `deliver`: signals arrive in a message: the message's walk becomes its partition's current walk
  (mstar overwrites the partition's ``fwd_info`` with the sender's), then each signal is offered
  to that walk's worker graphs in order; a signal none of them accepts is dropped silently, as
  mstar does; streamed items go to their StreamBuffer;
* `ready_work` (and `ready_groups`, the same grouped for the scheduler), `state_of`: what can run;
* `stop_loops` / `peer_stop`: a dynamic stop found here (mstar ``stop_loops``), or announced by a
  peer (STOP_LOOPS), registers the finish flag on the loop in every current-walk worker graph;
* `complete`: a node finished for one request: the graph state advances, and each output is
  routed: ingested here (same or sibling worker graph), sent to peer ranks (replicated TP fan-out:
  a rank keeps its own copy and only the instance's rank 0 sends outside the group), streamed,
  emitted to the client, or handed to the conductor; every worker graph of the walk that is now
  done is reset and reported;
* `remove`: the request is torn down; what it still held is reported for the drain check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import msgspec

from simharness.graph.ir import CLIENT, CONDUCTOR, Edge
from simharness.placement.layout import Assignment, Layout
from simharness.runtime.graph_spec import GraphSpec, Semantics
from simharness.runtime.graph_state import REJECTED, GraphState, loop_at_rest
from simharness.runtime.protocol import WorkerGraphState
from simharness.runtime.streams import ChunkSignal, StreamBuffer
from simharness.signals import ORIGIN_LOOP_OUTPUT, ORIGIN_NODE, Signal

#: The route label of a signal ingested on the completing rank: ``local:<worker graph>``.
LOCAL_PREFIX = "local:"


class Completion(msgspec.Struct, eq=False, gc=False):
    """Everything one node completion for one request caused on this rank (a Struct: one is
    built per forward, in C). Untracked by the cyclic collector: it holds names, numbers,
    signals and lists of them, nothing that refers back to it."""

    rid: str
    node: str
    walk: str
    partition: str
    wg: str
    pass_no: int
    #: the node's innermost loop counter for this forward (None outside loops)
    counter: int | None
    #: innermost-first (loop, curr_iter, max_iters, last) before the completion
    loop_context: tuple[tuple[str, int, int, bool], ...]
    #: loop-back pairs dropped by a loop that finished on this completion
    filtered: frozenset[tuple[str, str]]
    finished_loops: list[str]
    #: this rank's index in the completing worker graph's instance (0: leader or no TP)
    tp_rank: int
    #: every routed signal with where it went: ``local:<wg>``, ``rank:<r>``,
    #: ``stream:<r>``, client, conductor
    routes: list[tuple[Signal, str]] = msgspec.field(default_factory=list)
    #: peer rank -> signals to send there (a refused local signal is sent to this rank itself)
    to_ranks: dict[int, list[Signal]] = msgspec.field(default_factory=dict)
    # The four below are rarely filled: each is an empty tuple until its first item (a list
    # then, made by `add`), so that a completion does not allocate four lists it never uses.
    to_client: list[Signal] | tuple[()] = ()
    to_conductor: list[Signal] | tuple[()] = ()
    #: streamed items for a StreamBuffer on this rank
    stream_local: list[Signal] | tuple[()] = ()
    #: worker graphs of this walk that are done (and were reset) after this completion
    completed_wgs: list[str] | tuple[()] = ()
    #: this pass consumed its stream's final chunk: its partition is done
    partition_done: bool = False
    #: output tokens this completion produced (edges marked new_token)
    new_tokens: int = 0

    def add(self, field: str, item: Any) -> None:
        """Append `item` to one of the four rarely filled lists (``to_client``,
        ``to_conductor``, ``stream_local``, ``completed_wgs``), making the list at its first
        item."""
        items = getattr(self, field)
        if not items:
            items = []
            setattr(self, field, items)
        items.append(item)

    def local(self) -> list[Signal]:
        """The routed signals this rank ingested itself (same or sibling worker graph)."""
        return [sig for sig, where in self.routes if where.startswith(LOCAL_PREFIX)]


@dataclass
class Held:
    """A signal still held in a slot, reported at removal or in a hang."""

    wg: str
    node: str
    slot: str
    signal: Signal


@dataclass
class RequestState:
    rid: str
    assignment: Assignment
    states: dict[str, WorkerGraphState]
    #: the request's placement, numbered per rank (`RankRuntime.admit`): requests placed alike
    #: share a number, so a node's routing (`_Routes`) is worked out once per placement, not
    #: per request. No default: a state given a number another placement has would be routed
    #: as that placement is
    placement: int
    #: partition -> (current walk, pass number), as the last message for it said
    current: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: partition -> this rank's worker graphs of the partition's current walk, in layout order
    walk_states: dict[str, list[tuple[str, WorkerGraphState]]] = field(default_factory=dict)
    #: the states of `walk_states`, partition after partition: what the scheduler scans for
    #: ready nodes (rebuilt with `walk_states`, by `show_walk`)
    scan: list[WorkerGraphState] = field(default_factory=list)
    #: partition -> node -> the worker graphs of `walk_states` that hold it (one, as placement
    #: divides a walk): where a delivered signal is offered, without asking the others, which
    #: would refuse it
    by_dest: dict[str, dict[str, list[tuple[str, WorkerGraphState]]]] = field(default_factory=dict)
    #: partition -> loops stopped in its current pass
    stopped: dict[str, set[str]] = field(default_factory=dict)
    #: partition -> loop -> when it was last stopped, as this rank knows (mstar's
    #: ``loop_stop_times``; `RankRuntime.stop_time`), under ``Semantics.stop_times``
    stop_times: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    #: stream edge name -> the StreamBuffer of its consumer on this rank
    buffers: dict[str, StreamBuffer] = field(default_factory=dict)
    #: the partitions the request runs (the others are done from the start)
    partitions: frozenset[str] = frozenset()

    def show_walk(self, part: str, walk: str) -> None:
        """`walk` becomes partition `part`'s current walk here: `walk_states` and what is
        derived from it (`scan`, `by_dest`) are rebuilt together."""
        self.walk_states[part] = states = _states_of_walk(self, walk)
        self.scan = [st for of_part in self.walk_states.values() for _, st in of_part]
        by_dest: dict[str, list[tuple[str, WorkerGraphState]]] = {}
        for wg_st in states:
            for node in wg_st[1].spec.nodes:
                by_dest.setdefault(node, []).append(wg_st)
        self.by_dest[part] = by_dest


class _NodePlan:
    """What a completion of one node in one walk reads that is fixed for the rank: its worker
    graph and partition, whether it is in a loop, whether it takes stream chunks, and per
    placement of the request (`routes`) where each of its edges goes."""

    __slots__ = ("wg", "partition", "in_loop", "streamed", "dest_wg", "own", "outputs", "routes")

    def __init__(self, wg: str, partition: str, in_loop: bool, streamed: bool,
                 dest_wg: dict[str, str], own: frozenset[int], outputs: tuple[Edge, ...]) -> None:
        self.wg = wg
        self.partition = partition
        self.in_loop = in_loop
        self.streamed = streamed
        self.dest_wg = dest_wg
        self.own = own
        #: the node's ``registry_outputs``: what its graph state's `complete` returns, as this
        #: very tuple, when a completion routes the node's own outputs and nothing else
        self.outputs = outputs
        #: the request's placement (`RequestState.placement`) -> its `_Routes`
        self.routes: dict[int, _Routes] = {}

    def to_wg(self, dest: str, stream: bool) -> str | None:
        """The worker graph a signal to `dest` is ingested by; None for a stream (it goes to a
        StreamBuffer), the client and the conductor."""
        return None if stream or dest in (CLIENT, CONDUCTOR) else self.dest_wg[dest]


#: what a `_Target` leads to: a node's slots (here, on peer ranks or both), a StreamBuffer, or an
#: endpoint (the client or the conductor)
_SLOT, _STREAM, _ENDPOINT = 0, 1, 2


class _Target(NamedTuple):
    """Where a signal to one destination goes from one completing node under one placement:
    ingested here (`local`, with its route label) and sent to `outs`, (rank, route label) each:
    the destination's ranks outside the source instance, when this rank is the instance's
    rank 0 (replicated TP fan-out: a rank inside it takes its own copy)."""

    kind: int
    local: str | None
    local_label: str
    outs: tuple[tuple[int, str], ...]


class _Routes:
    """The routing of one node's completions on this rank under one placement of the request:
    this rank's index in the source instance (`tp`), and per declared edge (by identity: the
    scenario's own `Edge` objects, alive as long as the rank) the fields of the signal it makes
    and its `_Target`, each made at its first use and kept."""

    __slots__ = ("rank", "plan", "wg_ranks", "labels", "src_group", "tp", "edges", "targets", "plain")

    def __init__(self, rank: int, plan: _NodePlan, wg_ranks: dict[str, tuple[int, ...]],
                 labels: tuple[Labels, Labels]) -> None:
        self.rank = rank
        self.plan = plan
        #: the rank's (local, rank) route labels, shared by every table
        self.labels = labels
        self.wg_ranks = wg_ranks
        self.src_group = src_group = wg_ranks[plan.wg]
        self.tp = src_group.index(rank) if len(src_group) > 1 else 0
        self.edges: dict[int, tuple[str, str, bool, bool, int, str, bool, _Target]] = {}
        self.targets: dict[tuple[str, bool], _Target] = {}
        #: `plain_outputs` of the node's own outputs, made at the first completion
        self.plain: tuple[PlainEdge, ...] | None = None

    def target(self, dest: str, stream: bool) -> _Target:
        """Where a signal to `dest` goes (a saved signal asks this at each re-routing)."""
        got = self.targets.get((dest, stream))
        if got is None:
            got = self.targets[(dest, stream)] = self._target(dest, stream)
        return got

    def _target(self, dest: str, stream: bool) -> _Target:
        dest_wg = self.plan.to_wg(dest, stream)
        if dest_wg is None:
            return _Target(_STREAM if stream else _ENDPOINT, None, "", ())
        ranks = self.wg_ranks[dest_wg]
        src_group, rank = self.src_group, self.rank
        local = dest_wg if rank in ranks else None
        local_labels, rank_labels = self.labels
        outs: tuple[tuple[int, str], ...] = ()
        if self.tp == 0 and (len(ranks) > 1 or ranks[0] not in src_group):
            outs = tuple((r, rank_labels[r]) for r in ranks if r not in src_group)
        return _Target(_SLOT, local, local_labels[dest_wg], outs)

    def edge(self, e: Edge, payloads: Mapping[str, int], default_payload: int
             ) -> tuple[str, str, bool, bool, int, str, bool, _Target]:
        """The plan of declared edge `e`, made at its first routing and kept."""
        ep = self.edges[id(e)] = (
            e.name, e.to, e.persist, e.new_token, payloads.get(e.name, default_payload),
            ORIGIN_NODE if id(e) in self.plan.own else ORIGIN_LOOP_OUTPUT, e.stream,
            self.target(e.to, e.stream))
        return ep

    def plain_outputs(self, payloads: Mapping[str, int], default_payload: int) -> tuple[PlainEdge, ...]:
        """The node's own outputs as `PlainEdge`s when each is a plain edge into a node's
        slots (neither persisted nor a new token, not a stream, the client or the conductor);
        else empty: `RankRuntime.complete` then routes them edge by edge."""
        plans = [self.edge(e, payloads, default_payload) for e in self.plan.outputs]
        if not all(target.kind == _SLOT and not persist and not new_token
                   for _, _, persist, new_token, _, _, _, target in plans):
            return ()
        return tuple((name, dest, nbytes, origin, target.local, target.local_label, target.outs)
                     for name, dest, _, _, nbytes, origin, _, target in plans)


#: a plain output edge's plan, flat: (name, destination, payload bytes, origin, the worker graph
#: that ingests it here or None, its route label, (rank, route label) of each peer it goes to)
PlainEdge = tuple[str, str, int, str, str | None, str, tuple[tuple[int, str], ...]]


class Labels(dict[Any, str]):
    """key -> ``template.format(key)``, each made on first use and kept."""

    def __init__(self, template: str) -> None:
        super().__init__()
        self.template = template

    def __missing__(self, key: object) -> str:
        label = self[key] = self.template.format(key)
        return label


#: the `RequestState.by_dest` of a partition with no walk here yet (read-only: shared by all)
_NOWHERE: Mapping[str, list[tuple[str, WorkerGraphState]]] = MappingProxyType({})


def _states_of_walk(req: RequestState, walk: str) -> list[tuple[str, WorkerGraphState]]:
    """The request's worker-graph states on this rank that belong to `walk`, in layout order."""
    return [(wg, st) for wg, st in req.states.items() if st.spec.walk == walk]

class RankRuntime:
    """The runtime under test on one rank (one worker process in mstar)."""

    def __init__(self, rank: int, layout: Layout, semantics: Semantics,
                 stream_buffer: type[StreamBuffer] = StreamBuffer) -> None:
        self.rank = rank
        self.layout = layout
        self.semantics = semantics
        #: the class of a request's stream buffers (a runtime may bring its own)
        self.stream_buffer = stream_buffer
        scenario = layout.scenario
        self.partition_of = scenario.partition_of
        self.specs: dict[str, GraphSpec] = {
            wg.id: GraphSpec(wg.id, wg.walk, wg.section, semantics, scenario.stream_inputs(wg.walk))
            for wg in layout.wgs_on_rank.get(rank, ())
        }
        self.wg_of = layout.wg_of
        #: walk -> destination node -> its worker graph (the routing lookup of one output edge)
        self._dest_wg: dict[str, dict[str, str]] = layout.dest_wg
        #: (source partition, stream edge) -> (connection, consumer node, its worker graphs)
        self._streams = layout.stream_routes
        # Route labels, each made once, when first used: a completion records where each signal
        # went (a rank of a wide layout talks to few of the others).
        self._local_label = Labels(LOCAL_PREFIX + "{}")
        self._rank_label = Labels("rank:{}")
        self._stream_label = Labels("stream:{}")
        self.requests: dict[str, RequestState] = {}
        self._payloads = scenario.payloads
        self._default_payload = scenario.payload_bytes("")
        self._seq = 0
        #: (walk, node) -> what routing its completion reads, made at its first completion here
        self._plans: dict[tuple[str, str], _NodePlan] = {}
        #: each distinct placement of the requests admitted here -> its number (a few per run:
        #: one per combination of replicas chosen)
        self._placements: dict[tuple[tuple[int, ...], ...], int] = {}
        #: what the scheduler scans for ready nodes: (rid, state) for each state of each
        #: request's `RequestState.scan`, requests in admission order. Built when first asked
        #: for after a request came, went or changed walk (None until then): the scheduler asks
        #: several times per request for each such change, and one flat list spares it a loop
        #: per request at every ask.
        self._scan: list[tuple[str, WorkerGraphState]] | None = None
        self._wg_order: dict[tuple[str, str], int] | None = None

    # -- requests -----------------------------------------------------------------------------

    def admit(self, rid: str, walk: str, pass_no: int, assignment: Assignment,
              partitions: frozenset[str] | None = None) -> None:
        states = {
            wg_id: self.new_state(wg_id)
            for wg_id in self.specs
            if self.rank in assignment.wg_ranks[wg_id]
        }
        parts = partitions if partitions is not None else frozenset({self.partition_of[walk]})
        # Every assignment of the layout names the same worker graphs in the same order (the
        # layout's): their ranks alone tell two placements apart, and cost little to compare.
        placement = tuple(assignment.wg_ranks.values())
        number = self._placements.get(placement)
        if number is None:
            number = self._placements[placement] = len(self._placements)
        req = RequestState(rid, assignment, states, number, partitions=parts)
        self.requests[rid] = req
        for (src, edge), (conn, consumer, wgs) in self._streams.items():
            if conn.dst in parts and any(w in states for w in wgs):
                req.buffers[edge] = self.stream_buffer(rid, edge, consumer, src, conn.policy)
        self.set_walk(rid, walk, pass_no)

    def set_walk(self, rid: str, walk: str, pass_no: int) -> None:
        req = self.requests[rid]
        part = self.partition_of[walk]
        if req.current.get(part) != (walk, pass_no):
            if part not in req.current or req.current[part][0] != walk:
                req.show_walk(part, walk)
                self._scan = None
            if part in req.current and req.current[part][1] != pass_no:
                req.stopped[part] = set()  # a new pass starts with no loop stopped
                req.stop_times.pop(part, None)
            req.current[part] = (walk, pass_no)
            req.stopped.setdefault(part, set())

    def new_state(self, wg_id: str) -> WorkerGraphState:
        """One request's fresh state in worker graph `wg_id`. An adapter for another runtime
        overrides this to wrap its own per-request object (see `simharness.mstar.state`)."""
        return GraphState(self.specs[wg_id])

    def deliver(
        self, rid: str, walk: str, pass_no: int, signals: list[Signal]
    ) -> list[tuple[Signal, str | None, str]]:
        """Signals from a message. Returns (signal, worker graph or None, outcome) each."""
        # Only a message with non-stream signals tells the receiver its sender's current walk
        # (mstar overwrites the partition's fwd_info from non-streaming INPUT_SIGNALS alone). A
        # stream chunk from an earlier pass of the producer's partition, arriving after the
        # walk-start of that partition's next walk, must not turn the partition back.
        req = self.requests[rid]
        part = self.partition_of[walk]
        if req.current.get(part) != (walk, pass_no):  # set_walk's own test, asked first: 1% of a forward
            for sig in signals:
                if not sig.stream:
                    self.set_walk(rid, walk, pass_no)
                    break
        by_dest = req.by_dest.get(part, _NOWHERE)
        out: list[tuple[Signal, str | None, str]] = []
        for sig in signals:
            if sig.stream:
                buf = req.buffers.get(sig.name)
                if buf is None:
                    out.append((sig, None, REJECTED))
                else:
                    buf.put(sig)
                    out.append((sig, "stream", "buffered"))
                continue
            for wg_id, st in by_dest.get(sig.dest, ()):
                outcome = st.ingest(sig)
                if outcome is not REJECTED:
                    out.append((sig, wg_id, outcome))
                    break
            else:
                out.append((sig, None, REJECTED))
        return out

    def offer_chunk(self, rid: str, chunk: ChunkSignal) -> tuple[str | None, str]:
        """Ingest a popped chunk into the consumer in its partition's current walk, if ready."""
        req = self.requests[rid]
        for states in req.walk_states.values():
            for wg_id, st in states:
                if chunk.dest in st.spec.nodes:
                    outcome = st.ingest_chunk(chunk)
                    if outcome is not REJECTED:
                        return wg_id, outcome
        return None, REJECTED

    def remove(self, rid: str) -> list[Held]:
        """Tear the request down; return what it still held (nothing, in a correct run)."""
        req = self.requests.pop(rid)
        self._scan = None
        return [Held(wg_id, node, slot, sig)
                for wg_id, st in req.states.items()
                for node, slot, sig in st.held()]

    def leftovers(self, rid: str) -> list[str]:
        """Plain-words description of state other than held signals (loops mid-way, queued nodes)."""
        req = self.requests[rid]
        out = []
        for wg_id, st in req.states.items():
            for name, lp in st.loops.items():
                if not loop_at_rest(lp):
                    state = "done" if lp.done else f"at counter {lp.curr_iter}"
                    out.append(f"loop {name!r} in {wg_id} left {state}")
            for node in st.ready:
                out.append(f"{node} in {wg_id} still queued as ready")
        for edge, buf in req.buffers.items():
            # A stream that continues after its producer keeps offering empty chunks by design.
            idle_tail = buf.policy.continue_after_done and buf.producer_done and not buf.items
            if (buf.items or buf.waiting is not None) and not idle_tail:
                # (trace text: the digest hashes it, so "1 items" stays until a digest move)
                out.append(f"stream {edge!r} left {len(buf.items)} items "
                           f"{'and a refused chunk ' if buf.waiting else ''}in its buffer")
        return out

    # -- lockstep (TP) instances --------------------------------------------------------------

    def instance_of(self, rid: str, walk: str, node: str) -> tuple[int, ...]:
        return self.requests[rid].assignment.wg_ranks[self.wg_of[(walk, node)]]

    # -- scheduling ---------------------------------------------------------------------------

    def _scanned(self) -> list[tuple[str, WorkerGraphState]]:
        """The scheduler's scan (`_scan`), built again if it is out of date."""
        scan = self._scan
        if scan is None:
            scan = self._scan = [(rid, st) for rid, req in self.requests.items() for st in req.scan]
        return scan

    @property
    def wg_order(self) -> dict[tuple[str, str], int]:
        """(node, walk) -> where its worker graph comes in the layout (the order of mstar's
        worker-graph queues on a worker): the scheduler's tie-break."""
        order = self._wg_order
        if order is None:
            index = {wg.id: i for i, wg in enumerate(self.layout.worker_graphs)}
            order = self._wg_order = {(node, walk): index[wg]
                                      for (walk, node), wg in self.wg_of.items()}
        return order

    def ready_work(self) -> Iterable[tuple[str, str, str, WorkerGraphState]]:
        """(node, walk, rid, state) for every ready node, requests in admission order (a list:
        built in one comprehension, cheaper than a generator resumed per item)."""
        return [(node, st.spec.walk, rid, st) for rid, st in self._scanned() if st.ready
                for node in st.ready]

    def ready_groups(self) -> dict[tuple[str, str], list[tuple[str, WorkerGraphState]]]:
        """`ready_work` grouped by (node, walk), as the scheduler picks among them: each group's
        (rid, state) in `ready_work`'s order, groups in the order of their first ready node.
        Built here in one pass, without a 4-tuple per ready node."""
        groups: dict[tuple[str, str], list[tuple[str, WorkerGraphState]]] = {}
        for rid_st in self._scan or self._scanned():
            st = rid_st[1]
            if st.ready:
                walk = st.spec.walk
                for node in st.ready:
                    group = groups.get((node, walk))
                    if group is None:
                        groups[(node, walk)] = [rid_st]
                    else:
                        group.append(rid_st)
        return groups

    def state_of(self, rid: str, walk: str, node: str) -> WorkerGraphState | None:
        req = self.requests.get(rid)
        if req is None:
            return None
        return req.states.get(self.wg_of[(walk, node)])

    # -- dynamic stops ------------------------------------------------------------------------

    def stop_time(self, st: WorkerGraphState, loop: str) -> tuple[int, ...]:
        """When `loop` is stopped in `st`, as mstar's ``NestedLoopIndices`` says it: the worker
        graph's completed runs, then the iteration of each loop around `loop`, outermost first.
        A later stop is a greater tuple (``label_context_gt``)."""
        outer: list[int] = []
        lp = st.spec.loops[loop].parent
        while lp is not None:
            outer.append(st.loops[lp.name].curr_iter)
            lp = lp.parent
        return (st.times_run, *reversed(outer))

    def stop_loops(self, rid: str, walk: str, loops: list[str], node: str | None = None) -> list[int]:
        """A ``check_stop`` of `node` here said stop: register the finish on every current-walk
        worker graph that has the loop; return the peer ranks to tell (every other rank with a
        copy). Under ``Semantics.stop_times`` the stop's time is noted where the stopping node's
        worker graph has the loop (worker.py:2272-2277, node_manager_utils.py:567-580)."""
        req = self.requests[rid]
        part = self.partition_of[walk]
        peers: set[int] = set()
        if self.semantics.stop_times and node is not None:
            st = req.states.get(self.wg_of[(walk, node)])
            if st is not None:
                times = req.stop_times.setdefault(part, {})
                for loop in loops:
                    if loop in st.spec.loops:
                        times[loop] = self.stop_time(st, loop)
        for loop in loops:
            req.stopped[part].add(loop)
            for _, st in req.walk_states[part]:
                st.register_finish(loop)
            for wg in self.layout.by_walk[walk]:
                if loop in self.layout.loops_of_wg[wg.id]:
                    peers.update(r for r in req.assignment.wg_ranks[wg.id] if r != self.rank)
        return sorted(peers)

    def peer_stop(self, rid: str, partition: str, loops: list[str],
                  times: dict[str, tuple[int, ...]] | None = None) -> list[str]:
        """STOP_LOOPS from a peer: stop each loop not already stopped in the current pass.

        Returns the loops stopped here. As in mstar, the check is against the *current* pass
        only, so a stop that arrives after the next pass began stops that pass's loop (Q6).
        Under ``Semantics.stop_times`` the message's stop times decide instead, as
        ``Worker._stop_loops`` (worker.py:698-716) does: every loop it names a time for is
        stopped when that time is newer than the one this rank knows, and the time is kept
        either way; a stop this rank learnt from a data message first is not applied at all.
        """
        req = self.requests[rid]
        done = req.stopped.setdefault(partition, set())
        if self.semantics.stop_times and times is not None:
            known = req.stop_times.setdefault(partition, {})
            newer = []
            for loop, t in times.items():
                old = known.get(loop)
                if old is None or t > old:
                    newer.append(loop)
                known[loop] = t
            loops, done = newer, set()
        out = []
        for loop in loops:
            if loop in done:
                continue
            done.add(loop)
            for _, st in req.walk_states.get(partition, ()):
                st.register_finish(loop)
            out.append(loop)
        return out

    def learn_stop_times(self, rid: str, walk: str, signals: list[Signal],
                         times: dict[str, tuple[int, ...]] | None) -> None:
        """A peer's data message: a message with non-stream signals replaces the partition's
        forward-pass info, stop times included (``update_request_info``,
        node_manager_utils.py:272-292), without stopping anything."""
        req = self.requests[rid]
        part = self.partition_of[walk]
        if not times and not req.stop_times.get(part):
            return
        for sig in signals:
            if not sig.stream:
                req.stop_times[part] = dict(times) if times else {}
                return

    def stop_times_of(self, rid: str, walk: str) -> dict[str, tuple[int, ...]] | None:
        """The stop times a message of `walk` leaving this rank carries (a copy; None: none)."""
        times = self.requests[rid].stop_times.get(self.partition_of[walk])
        return dict(times) if times else None

    # -- completion and routing ---------------------------------------------------------------

    def complete(self, rid: str, node: str, walk: str) -> Completion:
        req = self.requests[rid]
        plan = self._plans.get((walk, node)) or self._plan_of(walk, node)
        routes = plan.routes.get(req.placement) or self._routes_of(plan, req)
        wg_id = plan.wg
        st = req.states[wg_id]
        if plan.in_loop:
            ctx = st.loop_context(node)
            counter = ctx[0][1]  # the innermost loop's curr_iter
        else:
            counter, ctx = None, ()
        consumed_final = plan.streamed and any(
            type(s) is ChunkSignal and s.final for s in st.inputs(node).values())
        st.clear_current(node)
        items, filtered, finished = st.complete(node)
        part = plan.partition
        pass_no = req.current[part][1]
        rank = self.rank
        tp = routes.tp
        done = Completion(rid, node, walk, part, wg_id, pass_no, counter, ctx, filtered, finished,
                          tp, partition_done=consumed_final)
        add_route = done.routes.append
        edge_plans = routes.edges
        #: signals for peer ranks, with where each goes: sent after the done-sweep, so each
        #: peer's message lists streamed items first (`_route_stream` files them as it goes)
        externals: list[tuple[Signal, tuple[tuple[int, str], ...]]] = []
        seq = self._seq
        plain = routes.plain
        if plain is None:
            plain = routes.plain = routes.plain_outputs(self._payloads, self._default_payload)
        # Most completions route the node's own outputs, each a plain edge into a node's
        # slots: by their flat plans, with the questions the edge-by-edge path asks of each
        # edge (its plan, persist, new token, stream or endpoint) answered once.
        flat = bool(plain) and items is plan.outputs
        item: Any  # a `PlainEdge` when flat, else an `Edge` or a re-injected `Signal`
        for item in plain if flat else items:
            if flat:
                name, dest, nbytes, origin, local, local_label, outs = item
                seq += 1
                sig = Signal(name, dest, False, False, nbytes, node, rank, walk, pass_no,
                             counter, origin, seq, False)
            else:
                if type(item) is Edge:
                    ep = edge_plans.get(id(item)) or routes.edge(item, self._payloads,
                                                                 self._default_payload)
                    name, dest, persist, new_token, nbytes, origin, stream, target = ep
                    seq += 1
                    sig = Signal(name, dest, persist, new_token, nbytes, node, rank, walk,
                                 pass_no, counter, origin, seq, stream)
                else:  # a loop's saved external input, routed again at the next iteration
                    sig = item
                    dest, persist, new_token, stream = sig.dest, sig.persist, sig.new_token, sig.stream
                    target = routes.target(dest, stream)
                if new_token:
                    done.new_tokens += 1
                if persist:
                    # Every rank of a TP instance persists its own copy (the conductor keeps all).
                    done.add("to_conductor", sig)
                    add_route((sig, CONDUCTOR))
                kind, local, local_label, outs = target
                if kind:
                    if kind == _STREAM:  # each rank of an instance: `_route_stream`
                        self._route_stream(done, req, sig, part, routes)
                    elif tp == 0 and dest == CLIENT:  # only the instance's rank 0 emits
                        done.add("to_client", sig)
                        add_route((sig, CLIENT))
                    continue
            if local is not None:
                if req.states[local].ingest(sig) is REJECTED:
                    # mstar sends a refused local edge to itself over the message path.
                    done.to_ranks.setdefault(rank, []).append(sig)
                    add_route((sig, self._rank_label[rank]))
                else:
                    add_route((sig, local_label))
            if outs:
                externals.append((sig, outs))
        self._seq = seq
        # The done-sweep runs after local ingest and before anything leaves this rank. Only a
        # completion makes a worker graph done (an ingest never does), and each completion
        # sweeps, so a sweep finds nothing unless this completion's own graph is done.
        if st.done:
            current = req.walk_states[part] if req.current[part][0] == walk else _states_of_walk(req, walk)
            for wid, wst in current:
                if wst.done:
                    done.add("completed_wgs", wid)
                    wst.reset()
        to_ranks = done.to_ranks
        for sig, outs in externals:
            for r, label in outs:
                bucket = to_ranks.get(r)
                if bucket is None:
                    bucket = to_ranks[r] = []
                bucket.append(sig)
                add_route((sig, label))
        return done

    def _routes_of(self, plan: _NodePlan, req: RequestState) -> _Routes:
        routes = plan.routes[req.placement] = _Routes(
            self.rank, plan, req.assignment.wg_ranks, (self._local_label, self._rank_label))
        return routes

    def _plan_of(self, walk: str, node: str) -> _NodePlan:
        wg_id = self.wg_of[(walk, node)]
        ns = self.specs[wg_id].nodes[node]
        plan = self._plans[(walk, node)] = _NodePlan(
            wg_id, self.partition_of[walk], ns.loop is not None, bool(ns.stream_inputs),
            self._dest_wg[walk], ns.output_ids, ns.registry_outputs)
        return plan

    def _route_stream(self, done: Completion, req: RequestState, sig: Signal, part: str,
                      routes: _Routes) -> None:
        """A streamed item to its consumer's ranks, as mstar fans a replicated edge out
        (``ShardingConfig.compute_fanout``, distributed/base.py): a rank of the producing
        instance that also consumes keeps its own copy (a TP follower too), and the instance's
        rank 0 sends it to the consumer ranks outside the instance."""
        conn, _consumer, wgs = self._streams[(part, sig.name)]
        if conn.dst not in req.partitions:
            # The consuming partition is done from the start (a text-only request has no
            # Talker): the producer emits an empty streaming edge, a no-op at the receiver.
            return
        ranks = sorted({r for w in wgs for r in req.assignment.wg_ranks[w]})
        src_group = routes.src_group
        for r in ranks:
            if r == self.rank:
                done.add("stream_local", sig)
            elif routes.tp == 0 and r not in src_group:
                done.to_ranks.setdefault(r, []).append(sig)
            else:
                continue
            done.routes.append((sig, self._stream_label[r]))


__all__ = ["Completion", "Held", "RankRuntime", "RequestState"]
