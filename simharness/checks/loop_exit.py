"""`loop_exit`: a loop's loop-back edges are never routed once its last iteration completes.

A loop's loop-back pairs are those of the loop as written (before placement split it into
per-worker-graph copies). The completion that finishes a copy of the loop (its last iteration,
or a dynamic stop) must drop every one of those pairs, wherever the destination lives (same
worker graph, a sibling worker graph on the rank, a peer rank); and no node of that copy may
route them again in the same pass. Routing one is a violation: this is the check that names the
stray edges of the loop-exit drift.

Earlier completions of the last iteration may route pairs of the loop's set: a nested loop's
pairs belong to every enclosing loop's set too (mstar propagates them upward), and the inner loop
keeps iterating during the outer loop's last iteration, seeded by the outer body each time.

What the check keeps of a request stays flat once it ends: its entries are frozen into one
interned tuple (requests that ran alike share it, and each holds one slot of a `RidMap`) and
thawed only if a forward for it comes later.

A violation's kind says where the stray edges went, the farthest first: ``peer`` (another
rank), ``sibling`` (another worker graph on the rank), ``self`` (the rank itself, over the
message path), ``local`` (back into the loop's own worker graph).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from simharness import events as ev
from simharness.checks.base import Check, RunContext, RunSetup, Violation, and_join
from simharness.graph.derive import loop_back_pairs
from simharness.ridmap import RidMap
from simharness.wording import plural


class LoopExitCheck(Check):
    name = "loop_exit"
    priority = 10
    kinds = ("peer", "sibling", "self", "local")
    #: a loop-back past the loop's end makes the extra forwards, the state left at teardown,
    #: the counts an expectation misses, the extra worker-graph reports, and where a node reads
    #: its loop counter, the hang
    explains = ("forwards", "drain", "expect", "worker_graphs", "liveness")

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        scenario = setup.scenario
        #: ((rid, walk, pass), loop) whose last iteration has begun -> (node, rank) that began it
        self.last_begun: dict[tuple[tuple[str, str, int], str], tuple[str, int]] = {}
        #: (rid, walk, pass) -> (loop, (worker graph, rank), enclosing iterations) per finished copy
        self._ended: dict[tuple[str, str, int], dict[tuple[str, int], list[tuple[str, tuple | None]]]] = {}
        #: rid -> its keys in `last_begun` and `_ended`, while the request runs
        self._keys: dict[str, list[tuple[bool, Any]]] = {}
        #: rid -> its entries of `last_begun` and `_ended` without the rid, once it ended
        self._frozen: RidMap[tuple[tuple[bool, Any, Any], ...]] = RidMap()
        self._interned: dict[Any, Any] = {}
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
        keys = self._keys.get(e.rid)
        if keys is None:  # the request's first forward, or one after it ended (thaw it)
            keys = self._thaw(e.rid)
        key = (e.rid, e.walk, e.pass_no)
        for name, _curr, _mx, last in e.loop_context:
            if last and (key, name) not in self.last_begun:
                self.last_begun[(key, name)] = (e.node, e.rank)
                keys.append((True, (key, name)))
        ended = self._ended.get(key)
        finished = e.finished_loops
        if not ended and not finished:
            return  # the common case: no copy of a loop has finished in this pass
        copy_key = (e.wg, e.rank)
        done = ended.get(copy_key) if ended else None
        if not done and not finished:
            return  # no loop of this copy has finished in this pass
        loops = self._loop_back.get(e.walk, {})
        check = list(finished)
        if done:
            # A node of a copy that already finished must not route its pairs again, in the same
            # pass and the same iteration of the enclosing loops (an inner loop restarts on each
            # outer iteration).
            for name, outer in done:
                if name not in check and _outer(e.loop_context, name) == outer:
                    check.append(name)
        for name in check:
            pairs = loops.get(name, ())
            stray = [(sig, where) for sig, where in e.routes if (sig.name, sig.dest) in pairs]
            if stray:
                self.routed.append((e, name, stray))
        if finished:
            ended = self._ended.get(key)
            if ended is None:
                ended = self._ended[key] = {}
                keys.append((False, key))
            mine = ended.setdefault(copy_key, [])
            mine.extend((name, _outer(e.loop_context, name)) for name in finished)

    def on_RequestEnded(self, e: ev.RequestEnded) -> None:
        keys = self._keys.pop(e.rid, None)
        if not keys:
            return
        # The rid is dropped from every key: requests that ran alike freeze to equal tuples.
        items: list[tuple[bool, tuple[Any, ...], Any]] = []
        for begun, k in keys:
            if begun:
                (_rid, walk, p), name = k
                items.append((True, (walk, p, name), self.last_begun.pop(k)))
            else:
                _rid, walk, p = k
                per_copy = self._ended.pop(k)
                items.append((False, (walk, p), tuple((c, tuple(v)) for c, v in per_copy.items())))
        frozen = tuple(items)
        self._frozen[e.rid] = self._interned.setdefault(frozen, frozen)

    def _thaw(self, rid: str) -> list[tuple[bool, Any]]:
        keys: list[tuple[bool, Any]] = []
        key: Any  # ((rid, walk, pass), node) of a begun copy, else (rid, walk, pass)
        for begun, k, value in self._frozen.pop(rid, ()):
            if begun:
                walk, p, name = k
                key = ((rid, walk, p), name)
                self.last_begun[key] = value
            else:
                walk, p = k
                key = (rid, walk, p)
                self._ended[key] = {c: list(v) for c, v in value}
            keys.append((begun, key))
        self._keys[rid] = keys
        return keys

    def _begun_by(self, rid: str, walk: str, pass_no: int, loop: str) -> tuple[str, int] | None:
        got = self.last_begun.get(((rid, walk, pass_no), loop))
        if got is not None:
            return got
        for begun, k, value in self._frozen.get(rid, ()):
            if begun and k == (walk, pass_no, loop):
                return value
        return None

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = []
        for e, loop, stray in self.routed:
            by_where: dict[str, list[str]] = defaultdict(list)
            for sig, where in stray:
                by_where[where].append(f"{sig.name}→{sig.dest}")
            parts = [f"{and_join(edges)} ({_where_text(where, e.rank)})" for where, edges in by_where.items()]
            mx = self._max_iters.get((e.walk, loop), 0)
            first = self._begun_by(e.rid, e.walk, e.pass_no, loop) or (e.node, e.rank)
            when = (f"after its last iteration (counter {mx - 1}) began to complete"
                    if loop in e.finished_loops else f"after its copy in {e.wg} had ended")
            out.append(Violation(
                self.name,
                f"{e.node} on rank {e.rank} routed {plural(len(stray), 'loop-back edge')} of loop "
                f"{loop!r} {when}: " + "; ".join(parts),
                walk=e.walk, node=e.node, rank=e.rank, request=e.rid,
                details={"loop": loop, "pass": e.pass_no, "wg": e.wg,
                         "last_iteration_begun_by": f"{first[0]}@{first[1]}",
                         "edges": [{"name": s.name, "dest": s.dest, "to": w} for s, w in stray]},
                kind=self._where_kind(stray, e), t=e.t,
            ))
        return out

    def _where_kind(self, stray: list[tuple[ev.SignalRef, str]], e: ev.Forward) -> str:
        """The farthest place the stray edges of forward `e` went (`kinds` order)."""
        kinds = set()
        for _sig, to in stray:
            if to.startswith("rank:"):
                kinds.add("self" if int(to[5:]) == e.rank else "peer")
            elif to.startswith("local:"):
                kinds.add("local" if to[6:] == e.wg else "sibling")
        return min(kinds, key=self.kinds.index) if kinds else "local"


def _outer(context: tuple[tuple[str, int, int, bool], ...], loop: str) -> tuple | None:
    """The (loop, iteration) of every loop enclosing `loop`, or None if `loop` is not in context."""
    for i, (name, *_rest) in enumerate(context):
        if name == loop:
            return tuple((n, it) for n, it, _mx, _last in context[i + 1:])
    return None


def _where_text(where: str, rank: int) -> str:
    if where.startswith("local:"):
        return f"ingested on rank {rank}, worker graph {where[6:]}"
    if where.startswith("rank:"):
        r = int(where[5:])
        return f"sent to rank {r}" if r != rank else f"sent to itself on rank {rank}"
    return f"to {where}"
