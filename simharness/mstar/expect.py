"""What a correct graph runtime routes when a node completes, judged on a recording.

An exported test (`simharness.mstar.export`) asserts, at each ``mark_node_complete`` it replays,
the set of (name, destination) pairs a correct runtime routes. That set follows from the graph
alone, edge by edge, with no reference to mstar's own bookkeeping:

* the node's declared outputs, except an edge that closes a cycle of a loop that ended at this
  completion (its loop-back: it must not escape the loop's last iteration; the ``loop_exit``
  check's rule);
* the declared outputs of each loop that ended;
* for each loop that advanced, every external input its copy ingested since it started, each to
  the node it went to (the next iteration needs them again; a node waiting for one for ever is
  what the ``liveness`` check reports).

mstar-ai 0.2.1 keeps the same facts as sets of (name, destination) pairs per loop, and one saved
edge per external input *name*; where two edges share a pair or a name, its answer and this one
part, and that is the point an exported test fails at. Which loops advanced or finished is
mstar's own answer (the recording's), not judged here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from simharness.graph.ir import Loop, Node, Section, Sequential, iter_loops, iter_nodes
from simharness.mstar.record import Call, Pair, Recording


class Why(NamedTuple):
    """Why a pair is routed or held: its `kind` (``output``, ``loop-output``, ``reinject``,
    ``loop-back``), the loop concerned (None for a node's plain output), and the words."""

    kind: str
    loop: str | None
    text: str


@dataclass
class Expected:
    """One completion, judged: the pairs a correct runtime routes, and why each is or is not."""

    call: Call
    #: the pairs to route, each with why, in the order they were found
    route: dict[Pair, Why]
    #: the node's own outputs it must not route, each with why (a loop-back after the end)
    hold: dict[Pair, Why]

    @property
    def routed(self) -> list[Pair]:
        return [(name, dest) for name, dest in self.call.answer["routed"]]

    @property
    def missing(self) -> list[Pair]:
        """Pairs a correct runtime routes and mstar did not."""
        got = set(self.routed)
        return [p for p in self.route if p not in got]

    @property
    def extra(self) -> list[Pair]:
        """Pairs mstar routed and a correct runtime does not."""
        return sorted({p for p in self.routed if p not in self.route})

    @property
    def agrees(self) -> bool:
        return not self.missing and not self.extra


def _holds(section: Section, name: str) -> bool:
    return any(n.name == name for n in iter_nodes(section))


def closes_cycle(section: Section, src: str, dest: str) -> bool:
    """Whether an edge from node `src` to node `dest`, both in `section`, goes back: to `src`
    itself, or to a part of a sequence that comes before the part holding `src`."""
    if isinstance(section, Node):
        return section.name == src == dest
    if isinstance(section, Loop):
        return closes_cycle(section.body, src, dest)
    parts = section.sections
    i = next(k for k, p in enumerate(parts) if _holds(p, src))
    j = next((k for k, p in enumerate(parts) if _holds(p, dest)), None)
    if j is None:
        return False
    if j == i:
        return closes_cycle(parts[i], src, dest)
    # members of a Parallel are not ordered: an edge between two of them closes no cycle
    return isinstance(section, Sequential) and j < i


def loop_back_edges(loop: Loop) -> frozenset[tuple[str, str, str]]:
    """(source node, name, destination node) of every edge that closes a cycle of `loop`."""
    names = {n.name for n in iter_nodes(loop.body)}
    return frozenset((n.name, e.name, e.to) for n in iter_nodes(loop.body) for e in n.outputs
                     if e.to in names and closes_cycle(loop.body, n.name, e.to))


class Judge:
    """Judges each completion of a recording (`judge`)."""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        self._walk_of = {wg.id: wg.walk for wg in rec.layout.worker_graphs}
        #: walk -> loop -> its loop-back edges, from the walk as written (whole loops: a copy
        #: on one rank does not hold the other end of an edge to a peer)
        self._back: dict[str, dict[str, frozenset[tuple[str, str, str]]]] = {
            walk: {lp.name: loop_back_edges(lp) for lp in iter_loops(root)}
            for walk, root in rec.scenario.walks.items()}

    def completion(self, call: Call) -> Expected:
        _rank, _rid, wg = call.key
        node = call.args["node"]
        template = self.rec.templates[wg]
        back = self._back[self._walk_of[wg]]
        ended = [loop for loop, what in call.answer["loops"] if what == "finish"]
        advanced = [loop for loop, what in call.answer["loops"] if what == "advance"]
        route: dict[Pair, Why] = {}
        hold: dict[Pair, Why] = {}
        for e in template.get_nodes()[node].outputs:
            pair = (e.name, e.next_node)
            closing = [loop for loop in ended if (node, e.name, e.next_node) in back.get(loop, ())]
            if closing:
                hold.setdefault(pair, Why("loop-back", closing[0], f"{_show(pair)} (a loop-back "
                                          f"of loop {closing[0]}, which ended here)"))
            elif ended and e.next_node in self._body_nodes(wg, ended):
                route.setdefault(pair, Why("output", None, f"{_show(pair)} ({node}'s output: it "
                                                           f"goes forward, not back, so the end "
                                                           f"of loop {ended[0]} does not hold it)"))
            else:
                route.setdefault(pair, Why("output", None, f"{_show(pair)} ({node}'s output)"))
        loops = template.get_loops()
        for loop in ended:
            lp = loops[loop]
            for e in list(lp.outputs) + list(lp.accumulated_outputs):
                pair = (e.name, e.next_node)
                route.setdefault(pair, Why("loop-output", loop, f"{_show(pair)} (loop {loop}'s "
                                                                f"output, at its end)"))
        for loop in advanced:
            for name, dest in call.answer["ingested"].get(loop, ()):
                pair = (name, dest)
                route.setdefault(pair, Why("reinject", loop, f"{_show(pair)} (an external input "
                                                             f"loop {loop} took: its next "
                                                             f"iteration needs it again)"))
        # a pair both routed for one reason and held for another is routed (it is declared)
        for pair in route:
            hold.pop(pair, None)
        return Expected(call, route, hold)

    def _body_nodes(self, wg: str, loops: list[str]) -> set[str]:
        """The nodes of the walk's loops named `loops` (whole loops, on every rank)."""
        root = self.rec.scenario.walks[self._walk_of[wg]]
        return {n.name for lp in iter_loops(root) if lp.name in loops for n in iter_nodes(lp.body)}

    def judge(self) -> list[Expected]:
        """Every completion of the recording, judged, in order."""
        return [self.completion(c) for c in self.rec.calls if c.op == "complete"]


def _show(pair: Any) -> str:
    name, dest = pair
    return f"{name} -> {dest or '(conductor)'}"


def first_disagreement(judged: list[Expected]) -> Expected | None:
    return next((j for j in judged if not j.agrees), None)
