"""One rank's runtime: its requests, their worker-graph states, and output routing.

The model of mstar's ``WorkerGraphsManager`` and ``process_node_outputs``
(reference/mstar_semantics.md section 3.4), as a pure state machine. The driver (simpy or real
processes) calls it; it never sends anything itself. It answers:

* `admit`: a request arrives (mstar NEW_REQUEST): state for each of its worker graphs here;
* `deliver`: signals arrive in a message: the message's walk becomes the request's current walk
  (mstar overwrites ``fwd_info`` with the sender's), then each signal is offered to the current
  walk's worker graphs in order; a signal none of them accepts is dropped silently, as mstar does;
* `ready_work` / `take`: what can run, and taking a node for a batch;
* `complete`: a node finished for one request: the graph state advances, and each output is
  routed: ingested here (same or sibling worker graph), sent to peer ranks, emitted to the
  client, or handed to the conductor; every worker graph of the walk that is now done is reset
  and reported;
* `remove`: the request is torn down; what it still held is reported for the drain check.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from simharness.graph.ir import CLIENT, CONDUCTOR, Edge
from simharness.placement.layout import Assignment, Layout
from simharness.runtime.graph_state import (
    CURRENT,
    PARKED,
    REJECTED,
    GraphSpec,
    GraphState,
    Semantics,
)
from simharness.runtime.signals import ORIGIN_LOOP_OUTPUT, ORIGIN_NODE, Signal


class Completion:
    """Everything one node completion for one request caused on this rank."""

    __slots__ = ("rid", "node", "walk", "wg", "pass_no", "counter", "loop_context", "filtered",
                 "finished_loops", "routes", "local", "to_ranks", "to_client", "to_conductor",
                 "completed_wgs")

    def __init__(self, rid: str, node: str, walk: str, wg: str, pass_no: int, counter: int | None,
                 loop_context: tuple[tuple[str, int, int, bool], ...],
                 filtered: frozenset[tuple[str, str]], finished_loops: list[str]) -> None:
        self.rid = rid
        self.node = node
        self.walk = walk
        self.wg = wg
        self.pass_no = pass_no
        #: the node's innermost loop counter for this forward (None outside loops)
        self.counter = counter
        #: innermost-first (loop, curr_iter, max_iters, last) before the completion
        self.loop_context = loop_context
        #: loop-back pairs dropped by a loop that finished on this completion
        self.filtered = filtered
        self.finished_loops = finished_loops
        #: every routed signal with where it went: ``local:<wg>``, ``rank:<r>``, client, conductor
        self.routes: list[tuple[Signal, str]] = []
        #: (signal, worker graph, outcome) for outputs ingested on this rank
        self.local: list[tuple[Signal, str, str]] = []
        #: peer rank -> signals to send there (a refused local signal is sent to this rank itself)
        self.to_ranks: dict[int, list[Signal]] = {}
        self.to_client: list[Signal] = []
        self.to_conductor: list[Signal] = []
        #: worker graphs of this walk that are done (and were reset) after this completion
        self.completed_wgs: list[str] = []


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
    walk: str
    pass_no: int
    assignment: Assignment
    states: dict[str, GraphState]
    #: this rank's worker graphs of the current walk, in layout order
    walk_states: list[tuple[str, GraphState]] = field(default_factory=list)


class RankRuntime:
    """The runtime under test on one rank (one worker process in mstar)."""

    def __init__(self, rank: int, layout: Layout, semantics: Semantics) -> None:
        self.rank = rank
        self.layout = layout
        self.semantics = semantics
        self.specs: dict[str, GraphSpec] = {
            wg.id: GraphSpec(wg.id, wg.walk, wg.section, semantics)
            for wg in layout.worker_graphs
            if rank in wg.ranks
        }
        self.wg_of = layout.wg_of
        #: walk -> destination node -> its worker graph (the routing lookup of one output edge)
        self._dest_wg: dict[str, dict[str, str]] = {}
        for (walk, node), wg in layout.wg_of.items():
            self._dest_wg.setdefault(walk, {})[node] = wg
        # Route labels, made once: a completion records where each signal went.
        self._local_label = {wg.id: "local:" + wg.id for wg in layout.worker_graphs}
        self._rank_label = {r: f"rank:{r}" for r in range(layout.num_ranks)}
        self.requests: dict[str, RequestState] = {}
        self._payloads = layout.scenario.payloads
        self._default_payload = layout.scenario.payload_bytes("")
        self._seq = 0

    # -- requests -----------------------------------------------------------------------------

    def admit(self, rid: str, walk: str, pass_no: int, assignment: Assignment) -> None:
        states = {
            wg_id: self.new_state(wg_id)
            for wg_id in self.specs
            if self.rank in assignment.wg_ranks[wg_id]
        }
        req = RequestState(rid, walk, pass_no, assignment, states)
        self.requests[rid] = req
        self._set_walk(req, walk, pass_no)

    def new_state(self, wg_id: str) -> GraphState:
        """One request's fresh state in worker graph `wg_id`. An adapter for another runtime
        overrides this to wrap its own per-request object (see `runtime.mstar_adapter`)."""
        return GraphState(self.specs[wg_id])

    def _set_walk(self, req: RequestState, walk: str, pass_no: int) -> None:
        if walk != req.walk or not req.walk_states:
            req.walk_states = [(wg, st) for wg, st in req.states.items() if st.spec.walk == walk]
        req.walk = walk
        req.pass_no = pass_no

    def deliver(
        self, rid: str, walk: str, pass_no: int, signals: list[Signal]
    ) -> list[tuple[Signal, str | None, str]]:
        """Signals from a message. Returns (signal, worker graph or None, outcome) each."""
        req = self.requests[rid]
        self._set_walk(req, walk, pass_no)
        out = []
        for sig in signals:
            for wg_id, st in req.walk_states:
                outcome = st.ingest(sig)
                if outcome is not REJECTED:
                    out.append((sig, wg_id, outcome))
                    break
            else:
                out.append((sig, None, REJECTED))
        return out

    def remove(self, rid: str) -> list[Held]:
        """Tear the request down; return what it still held (nothing, in a correct run)."""
        req = self.requests.pop(rid)
        return [Held(wg_id, node, slot, sig)
                for wg_id, st in req.states.items()
                for node, slot, sig in st.held()]

    def leftovers(self, rid: str) -> list[str]:
        """Plain-words description of state other than held signals (loops mid-way, queued nodes)."""
        req = self.requests[rid]
        out = []
        for wg_id, st in req.states.items():
            for name, lp in st.loops.items():
                if lp.curr_iter or lp.done or lp.finish:
                    state = "done" if lp.done else f"at counter {lp.curr_iter}"
                    out.append(f"loop {name!r} in {wg_id} left {state}")
            for node in st.ready:
                out.append(f"{node} in {wg_id} still queued as ready")
        return out

    # -- scheduling ---------------------------------------------------------------------------

    def ready_work(self) -> Iterator[tuple[str, str, str, GraphState]]:
        """(node, walk, rid, state) for every ready node, requests in admission order."""
        for rid, req in self.requests.items():
            for _, st in req.walk_states:
                for node in st.ready:
                    yield node, st.spec.walk, rid, st

    def state_of(self, rid: str, walk: str, node: str) -> GraphState | None:
        req = self.requests.get(rid)
        if req is None:
            return None
        return req.states.get(self.wg_of[(walk, node)])

    # -- completion and routing ---------------------------------------------------------------

    def complete(self, rid: str, node: str, walk: str) -> Completion:
        req = self.requests[rid]
        wg_id = self.wg_of[(walk, node)]
        st = req.states[wg_id]
        ns = st.spec.nodes[node]
        if ns.loop is None:
            counter, ctx = None, ()
        else:
            counter = st.loops[ns.loop.name].curr_iter
            ctx = st.loop_context(node)
        st.clear_current(node)
        items, filtered, finished = st.complete(node)
        pass_no = req.pass_no
        done = Completion(rid, node, walk, wg_id, pass_no, counter, ctx, filtered, finished)
        rank = self.rank
        wg_ranks = req.assignment.wg_ranks
        states = req.states
        dest_wg_of = self._dest_wg[walk]
        routes = done.routes
        add_route = routes.append
        local_label, rank_label = self._local_label, self._rank_label
        own = ns.output_ids
        payloads, default_payload = self._payloads, self._default_payload
        externals: list[tuple[Signal, tuple[int, ...]]] = []
        for item in items:
            if type(item) is Edge:
                self._seq += 1
                sig = Signal(item.name, item.to, item.persist, item.new_token,
                             payloads.get(item.name, default_payload), node, rank, walk, pass_no,
                             counter, ORIGIN_NODE if id(item) in own else ORIGIN_LOOP_OUTPUT,
                             self._seq)
            else:
                sig = item
            if sig.persist:
                done.to_conductor.append(sig)
                add_route((sig, CONDUCTOR))
            dest = sig.dest
            if dest == CLIENT:
                done.to_client.append(sig)
                add_route((sig, CLIENT))
                continue
            if dest == CONDUCTOR:
                continue
            dest_wg = dest_wg_of[dest]
            ranks = wg_ranks[dest_wg]
            if rank in ranks:
                outcome = states[dest_wg].ingest(sig)
                if outcome is REJECTED:
                    # mstar sends a refused local edge to itself over the message path.
                    done.to_ranks.setdefault(rank, []).append(sig)
                    add_route((sig, rank_label[rank]))
                else:
                    done.local.append((sig, dest_wg, outcome))
                    add_route((sig, local_label[dest_wg]))
                if len(ranks) == 1:
                    continue
            externals.append((sig, ranks))
        # The done-sweep runs after local ingest and before anything leaves this rank.
        for wid, wst in req.walk_states if req.walk == walk else self._states_of_walk(req, walk):
            if wst.done:
                done.completed_wgs.append(wid)
                wst.reset()
        to_ranks = done.to_ranks
        for sig, ranks in externals:
            for r in ranks:
                if r != rank:
                    bucket = to_ranks.get(r)
                    if bucket is None:
                        bucket = to_ranks[r] = []
                    bucket.append(sig)
                    add_route((sig, rank_label[r]))
        return done

    @staticmethod
    def _states_of_walk(req: RequestState, walk: str) -> list[tuple[str, GraphState]]:
        return [(wg, st) for wg, st in req.states.items() if st.spec.walk == walk]


__all__ = ["CURRENT", "PARKED", "REJECTED", "Completion", "Held", "RankRuntime", "RequestState"]
