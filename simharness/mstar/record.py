"""Recording every call the ``mstar-graph`` runtime makes into mstar's graph objects.

`MstarGraphState` (`simharness.mstar.state`) is the one place our worker model touches mstar's
per-request graph state: it creates a ``WorkerGraphIO`` for each (request, worker graph) on a
rank, ingests inputs into it, pops ready nodes, clears a batch's inputs, marks nodes complete,
registers loop stops and clears the state for the next pass. `RecordingState` subclasses it and
logs each of those calls, in the order the simulation makes them, with the answer mstar gave;
nothing in mstar is patched. `record` runs a scenario under the recording runtime and returns
the log, which `simharness.mstar.export` turns into a standalone pytest module.

The log also keeps what judging a completion needs and only the recording can see: which loops
advanced or finished inside the call (mstar says it only through its loops' counters), and which
external inputs each loop copy ingested since it last started (what a loop must route again
when it advances).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simharness.checks import Violation
from simharness.graph.ir import Edge
from simharness.mstar.convert import dest_of
from simharness.mstar.runtime import MstarRuntime
from simharness.mstar.state import MstarGraphState, MstarRankRuntime
from simharness.placement.layout import Layout
from simharness.runtime.graph_spec import GraphSpec
from simharness.runtime.graph_state import REJECTED
from simharness.runtime.protocol import WorkerGraphState
from simharness.scenario.model import Scenario
from simharness.signals import Signal

#: (rank, request, worker graph id): one WorkerGraphIO
StateKey = tuple[int, str, str]
#: mstar's ``NameAndDest``
Pair = tuple[str, str]


@dataclass
class Call:
    """One call into mstar's graph objects, and mstar's answer.

    `op` is one of ``create`` (a request's state in a worker graph), ``ingest`` (an edge
    offered to ``ingest_input``), ``pop`` (a ready node taken from ``ready_names``), ``clear``
    (a batch consumed a node's current inputs), ``speculative`` (the node's
    ``_speculatively_scheduled`` flag), ``stop`` (``register_loop_finish_signal``), ``complete``
    (``mark_node_complete``) and ``reset`` (``WorkerGraphIO.clear`` once the graph is done).
    """

    key: StateKey
    op: str
    #: the call's arguments, by name (an edge's name, destination and flags; a node; a loop)
    args: dict[str, Any]
    #: what mstar answered, by name (see `RecordingState`)
    answer: dict[str, Any] = field(default_factory=dict)


@dataclass
class Recording:
    """Every call of one run, in order, and what the run's checks found."""

    scenario: Scenario
    layout: Layout
    #: our worker graph id -> the mstar section mstar's own division made for it
    templates: dict[str, Any]
    calls: list[Call]
    violations: list[Violation]


class RecordingState(MstarGraphState):
    """`MstarGraphState` that logs each call it makes into its ``WorkerGraphIO``."""

    def __init__(self, spec: GraphSpec, template: Any, g: Any, key: StateKey,
                 log: Callable[[Call], None]) -> None:
        # set before the parent's constructor, which wraps every loop (`_watch`)
        self._events: list[tuple[str, str]] = []
        self._key = key
        self._log = log
        super().__init__(spec, template, g)
        #: loop -> the external-input pairs its copy ingested since the loop last started
        self._ingested: dict[str, set[Pair]] = {name: set() for name in self.io.loops}
        log(Call(key, "create", {"wg": spec.id}))

    def _watch(self, lp: Any) -> None:
        """The parent's hook, and ours around it: each ``complete_iter`` is an advance (the
        counter went up by one) or a finish, in the order mstar ran them."""
        super()._watch(lp)
        inner = lp.complete_iter
        events = self._events

        def complete_iter() -> Any:
            before = lp.curr_iter
            out = inner()
            events.append((lp.name, "advance" if lp.curr_iter == before + 1 else "finish"))
            return out

        lp.complete_iter = complete_iter

    def ingest(self, sig: Signal, can_buffer: bool = True) -> str:
        outcome = super().ingest(sig, can_buffer)
        args = {"name": sig.name, "dest": sig.dest, "persist": sig.persist,
                "new_token": sig.new_token, "can_buffer": can_buffer, "what": sig.describe()}
        ok = outcome != REJECTED
        self._log(Call(self._key, "ingest", args, {"ok": ok, "slot": outcome if ok else None}))
        if ok:
            pair = (sig.name, sig.dest)
            for loop in self._enclosing(sig.dest):
                if pair in (loop._external_inputs or ()):
                    self._ingested[loop.name].add(pair)
        return outcome

    def pop_ready(self, node: str) -> bool:
        before = sorted(self._registry.ready_names)
        popped = super().pop_ready(node)
        self._log(Call(self._key, "pop", {"node": node}, {"ready": before, "popped": popped}))
        return popped

    def clear_current(self, node: str) -> None:
        super().clear_current(node)
        self._log(Call(self._key, "clear", {"node": node}))

    def mark_speculative(self, node: str) -> None:
        super().mark_speculative(node)
        self._log(Call(self._key, "speculative", {"node": node, "flag": True}))

    def unmark_speculative(self, node: str) -> None:
        if node in self._nodes:
            super().unmark_speculative(node)
            self._log(Call(self._key, "speculative", {"node": node, "flag": False}))

    def register_finish(self, loop: str) -> bool:
        known = super().register_finish(loop)
        if known:  # the parent calls mstar only for a loop this graph has
            self._log(Call(self._key, "stop", {"loop": loop}))
        return known

    def complete(self, node: str) -> Any:
        """mstar ``mark_node_complete``: its routed pairs (in order) and filtered pairs, the
        loops that advanced or finished inside it, and what each advancing loop had ingested."""
        self._events.clear()
        # what each loop has ingested, as the loop stood before this call (an advance of an
        # outer loop restarts the inner ones, and their sets with them)
        saved = {name: sorted(pairs) for name, pairs in self._ingested.items()}
        done_before = self.done
        result = super().complete(node)
        items, filtered, _finished = result
        # mstar's output edges, one item each (`MstarGraphState.complete`): a declared edge
        # carries our Edge, a re-injected input our Signal; back to mstar's (name, next_node)
        routed = [(i.name, dest_of(i.to)) if isinstance(i, Edge) else (i.name, i.dest)
                  for i in items]
        events = list(self._events)
        for loop, what in events:
            if what == "advance":
                for inner in self._inside(loop):
                    self._ingested[inner].clear()
        self._log(Call(self._key, "complete", {"node": node}, {
            "routed": routed, "filtered": sorted(filtered), "loops": events,
            "ingested": {loop: saved[loop] for loop, what in events if what == "advance"},
            "done": self.done and not done_before,
        }))
        return result

    def reset(self) -> None:
        super().reset()
        for pairs in self._ingested.values():
            pairs.clear()
        self._log(Call(self._key, "reset", {}))

    # -- the loop structure of this worker graph ----------------------------------------------

    def _enclosing(self, node: str) -> list[Any]:
        """The mstar loops around `node` in this graph, innermost first."""
        out = []
        reg = self._nodes[node]._managing_registry
        while isinstance(reg, self._g.LoopStateRegistry):
            out.append(reg.loop)
            reg = reg.loop._managing_registry
        return out

    def _inside(self, loop: str) -> list[str]:
        """The loops nested in `loop` (restarted when it advances)."""
        return [name for name, lp in self.io.loops.items()
                if name != loop and loop in {outer.name for outer in self._outer(lp)}]

    def _outer(self, lp: Any) -> list[Any]:
        out = []
        reg = lp._managing_registry
        while isinstance(reg, self._g.LoopStateRegistry):
            out.append(reg.loop)
            reg = reg.loop._managing_registry
        return out


class RecordingRank(MstarRankRuntime):
    """`MstarRankRuntime` whose states record (the rank knows the request being admitted)."""

    def __init__(self, rank: int, layout: Layout, templates: dict[str, Any],
                 log: Callable[[Call], None]) -> None:
        super().__init__(rank, layout, templates)
        self._log = log
        self._admitting = ""

    def admit(self, rid: str, walk: str, pass_no: int, assignment: Any,
              partitions: frozenset[str] | None = None) -> None:
        self._admitting = rid
        super().admit(rid, walk, pass_no, assignment, partitions)

    def new_state(self, wg_id: str) -> WorkerGraphState:
        return RecordingState(self.specs[wg_id], self.templates[wg_id], self._g,
                              (self.rank, self._admitting, wg_id), self._log)


class RecordingRuntime(MstarRuntime):
    """The ``mstar-graph`` runtime, divided by mstar's own code, recording every call."""

    name = "mstar-graph"

    def __init__(self, **options: Any) -> None:
        options["placement"] = "mstar"  # the exported test divides with mstar's own code
        super().__init__(**options)
        self.calls: list[Call] = []

    def build_rank(self, rank: int, layout: Layout) -> Any:
        return RecordingRank(rank, layout, self.templates(layout), self.calls.append)


def record(scenario: Scenario, options: dict[str, Any] | None = None) -> Recording:
    """Run `scenario` under the recording ``mstar-graph`` runtime with every check."""
    from simharness.engine.simulation import Simulation
    from simharness.run import RunChecks

    # Any, as `simharness.run.build_runtime` hands its runtimes on: MstarRuntime keeps its notes
    # in a list, which the Runtime protocol declares as a read-only Sequence. It refuses in one
    # line an mstar-ai whose mstar.model.base (mstar's own division) does not import.
    runtime: Any = RecordingRuntime(**(options or {}))
    layout = Layout.build(scenario)
    watch = RunChecks(scenario, layout)
    sim = Simulation(scenario, runtime, observers=watch.observers, layout=layout,
                     keep_trace=False, guard=watch.guard, digest=False)
    result = sim.run()
    result.forward_log = watch.forward_log
    violations = watch.judge(result.outcomes)
    return Recording(scenario, layout, runtime.templates(layout), runtime.calls, violations)
