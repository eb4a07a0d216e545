"""`loop_exit`: no loop-back edge is routed once the loop's last iteration has begun to complete.

A loop's loop-back pairs are those of the loop as written (before placement split it into
per-worker-graph copies). Once any copy of the loop, for a request and a pass, completes an
entity on its last iteration (counter ``max_iters - 1``, or a dynamic stop), routing any of
those pairs anywhere (same worker graph, a sibling worker graph on the rank, a peer rank) is a
violation: in a correct runtime the finishing copy drops them all, wherever their destination
lives. This is the check that names the stray edges of the loop-exit drift.
"""

from __future__ import annotations

from collections import defaultdict

from simharness import events as ev
from simharness.checks.base import RunContext, Violation, and_join
from simharness.graph.derive import loop_back_pairs
from simharness.scenario.model import Scenario


class LoopExitCheck:
    name = "loop_exit"

    def __init__(self, scenario: Scenario) -> None:
        #: ((rid, walk, pass), loop) whose last iteration has begun -> (node, rank, t)
        self.last_begun: dict[tuple[tuple[str, str, int], str], tuple[str, int, float]] = {}
        #: (rid, walk, pass) -> loops whose last iteration has begun, in order
        self._ended: dict[tuple[str, str, int], list[str]] = {}
        self.routed: list[tuple[ev.Forward, str, list[tuple[ev.SignalRef, str]]]] = []
        #: walk -> loop -> the loop-back pairs of the loop as written
        self._loop_back = {
            walk: {name: loop_back_pairs(lp) for name, lp in wf.loops.items()}
            for walk, wf in scenario.walk_facts.items()
        }
        self._max_iters = {(walk, name): lp.max_iters
                           for walk, wf in scenario.walk_facts.items()
                           for name, lp in wf.loops.items()}

    def on_Forward(self, e: ev.Forward) -> None:
        key = (e.rid, e.walk, e.pass_no)
        for name, _curr, _mx, last in e.loop_context:
            if last and (key, name) not in self.last_begun:
                self.last_begun[(key, name)] = (e.node, e.rank, e.t)
                self._ended.setdefault(key, []).append(name)
        ended = self._ended.get(key)
        if not ended:
            return  # the common case: no loop of this request's pass is in its last iteration
        loops = self._loop_back.get(e.walk, {})
        for name in ended:
            pairs = loops.get(name, ())
            stray = [(sig, where) for sig, where in e.routes if (sig.name, sig.dest) in pairs]
            if stray:
                self.routed.append((e, name, stray))

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = []
        for e, loop, stray in self.routed:
            by_where: dict[str, list[str]] = defaultdict(list)
            for sig, where in stray:
                by_where[where].append(f"{sig.name}→{sig.dest}")
            parts = [f"{and_join(edges)} ({_where_text(where, e.rank)})" for where, edges in by_where.items()]
            mx = self._max_iters.get((e.walk, loop), 0)
            first = self.last_begun[((e.rid, e.walk, e.pass_no), loop)]
            out.append(Violation(
                self.name,
                f"{e.node} on rank {e.rank} routed {len(stray)} loop-back edge"
                f"{'s' if len(stray) > 1 else ''} of loop {loop!r} after its last iteration "
                f"(counter {mx - 1}) began to complete: " + "; ".join(parts),
                walk=e.walk, node=e.node, rank=e.rank, request=e.rid,
                details={"loop": loop, "pass": e.pass_no,
                         "last_iteration_begun_by": f"{first[0]}@{first[1]}",
                         "edges": [{"name": s.name, "dest": s.dest, "to": w} for s, w in stray]},
            ))
        return out


def _where_text(where: str, rank: int) -> str:
    if where.startswith("local:"):
        return f"ingested on rank {rank}, worker graph {where[6:]}"
    if where.startswith("rank:"):
        r = int(where[5:])
        return f"sent to rank {r}" if r != rank else f"sent to itself on rank {rank}"
    return f"to {where}"
