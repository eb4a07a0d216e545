"""`liveness`: every request completes; a hang is reported with its wait-for chain.

The driver reports a `Stalled` request when no event is left (quiescence) or when the request
passes its timeout in simulated time. This check turns each report into one violation naming the
request, the walk and pass, the worker graphs that never reported done, and for each node that
holds something: on which rank, which inputs it holds, which it misses and who would send them,
or what its engine gate is waiting for. The node named first is the one the chain points at:
a gated node whose inputs are all there, else a node that holds some inputs but not all.

A *runaway* (work that never stops growing) is cut short by the driver's runaway guard
(`simharness.drive.runaway`), which hands what it found to the checks at the end
(`RunContext.runaways`); this check reports each one: the request, the node and rank, how far
past the explained count it ran, and the cycle: the forwards of that request between the node's
last two forwards.

Each violation's kind names what kind of trouble it is: ``runaway``; ``never-admitted``; or
``hang``/``timeout``, followed, when a blocked node says so, by what the hang waits for
(`wait_kind`): ``hang-gate``, ``hang-lockstep``, ... ``timeout-edge``.
"""

from __future__ import annotations

from typing import Any

from simharness import events as ev
from simharness.checks.base import Check, RunContext, RunSetup, Violation, and_join
from simharness.graph.analysis import WalkFacts
from simharness.graph.derive import loop_back_pairs, loop_external_inputs
from simharness.graph.ir import Loop, Sequential
from simharness.wording import plural

#: what a hang waits for, the most telling first (`wait_kind`)
WAITS = ("gate", "lockstep", "reinjection", "seed", "loop-back", "input", "edge")


class LivenessCheck(Check):
    name = "liveness"
    priority = 30
    kinds = ("runaway", *(f"hang-{w}" for w in WAITS), "hang", *(f"timeout-{w}" for w in WAITS),
             "timeout", "never-admitted")

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        self.stalls: list[ev.Stalled] = []

    def on_Stalled(self, e: ev.Stalled) -> None:
        self.stalls.append(e)

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = self._runaway_violations(ctx)
        # A blocked node may sit in another partition's walk than the one that stalled: its
        # producers are those of its own worker graph's walk.
        walk_of = {wg.id: wg.walk for wg in ctx.layout.worker_graphs}
        for s in self.stalls:
            if s.reason == "runaway":
                continue  # reported above, from what the count saw
            if not s.walk:
                out.append(Violation(self.name, f"{s.rid} was never admitted ({s.reason} at "
                                                f"t={s.t:.3f} s): it waited for a concurrency slot",
                                     request=s.rid, kind="never-admitted", t=s.t))
                continue
            lines = []
            chain: list[dict[str, Any]] = []
            for b in _ordered(s.blocked):
                held = [h.describe() for h in b.held]
                entry: dict[str, Any] = {"node": b.node, "rank": b.rank, "wg": b.wg, "counter": b.counter,
                         "held": [h.name for h in b.held], "missing": list(b.missing)}
                if b.gate.startswith(ev.LOCKSTEP_HOLD):
                    text = (f"{b.node}@{b.rank} holds every input but TP lockstep holds it: "
                            f"{b.gate[len(ev.LOCKSTEP_HOLD):]}")
                    entry["gate"] = b.gate
                elif b.gate:
                    text = f"{b.node}@{b.rank} holds every input but its engine gate holds it: {b.gate}"
                    entry["gate"] = b.gate
                    entry["missing"] = [f"{n} (walk start)" for n in b.gate_waits]
                elif b.missing:
                    wants = []
                    walk = walk_of.get(b.wg, s.walk)
                    facts = ctx.scenario.walk_facts[walk]
                    streamed = ctx.scenario.stream_inputs(walk)
                    for name in b.missing:
                        prod = facts.producers(name, b.node)
                        if not prod and name in streamed:
                            # A stream input comes from another partition, not from a node of
                            # this walk: name the partition whose chunks it waits for.
                            srcs = sorted({c.src for c in ctx.scenario.connections if c.edge == name})
                            prod = [f"the stream from partition {src}" for src in srcs]
                        wants.append(f"{name} (from {' or '.join(prod) if prod else 'nobody'})")
                    have = f"holds {and_join(held)} and " if held else ""
                    text = f"{b.node}@{b.rank} {have}waits for {and_join(wants)}"
                else:
                    text = f"{b.node}@{b.rank} is ready but was never run"
                if b.held_next:
                    text += f"; its next-iteration slot holds {and_join([h.describe() for h in b.held_next])}"
                    entry["held_next"] = [h.name for h in b.held_next]
                lines.append(text)
                chain.append(entry)
            pending = and_join([f"{wg} on rank{'s' if len(r) > 1 else ''} {','.join(map(str, r))}"
                                for wg, r in s.pending])
            when = ("no event was left" if s.reason == "quiescence"
                    else f"it passed its {ctx.scenario.limits.request_timeout_s:g} s timeout")
            first: dict[str, Any] = chain[0] if chain else {}
            # A request admitted just before its deadline, or one whose work is all in flight,
            # has no node that holds or waits for anything yet.
            sentences = [f"{s.rid} hung in walk {s.walk} (pass {s.pass_no}) at t={s.t:.3f} s ({when})",
                         *(lines or ["No node of the walk holds an input or waits on a gate"])]
            if pending:
                sentences.append(f"Worker graphs not done: {pending}")
            msg = ". ".join(sentences)
            headline = ""
            if first:
                where = f"{first['node']}@{first['rank']}"
                gate = str(first.get("gate", "")).split(" (")[0].replace(" it waits ", " waits ")
                what = (f"{gate} (its engine gate)" if gate else
                        f"waits for {and_join(first['missing'])}" if first.get("missing") else
                        "is ready but was never run")
                others = f" (and {plural(len(chain) - 1, 'other node')})" if len(chain) > 1 else ""
                headline = (f"hung in walk {s.walk} (pass {s.pass_no}) at t={s.t:.3f} s: "
                            f"{where} {what}{others}")
            head = "timeout" if s.reason == "timeout" else "hang"
            facts = ctx.scenario.walk_facts[s.walk]
            wait = wait_kind(chain, facts) if chain else ""
            out.append(Violation(
                self.name, msg, walk=s.walk, node=first.get("node"), rank=first.get("rank"),
                request=s.rid,
                details={"reason": s.reason, "pass": s.pass_no,
                         "missing": first.get("missing", []), "held": first.get("held", []),
                         "gate": first.get("gate", ""), "chain": chain,
                         "pending": [{"wg": wg, "ranks": list(r)} for wg, r in s.pending]},
                kind=f"{head}-{wait}" if wait else head, t=s.t, headline=headline,
                mechanism=reinjection_mechanism(chain, facts) if wait == "reinjection" else "",
            ))
        return out

    def _runaway_violations(self, ctx: RunContext) -> list[Violation]:
        out = []
        seen: set[tuple[str, str, str, int]] = set()
        # the request's stall: the driver tears a runaway down as it trips
        stalled: dict[str, float] = {}
        for s in self.stalls:
            stalled.setdefault(s.rid, s.t)
        for r in ctx.runaways:
            key = (r.rid, r.walk, r.node, r.rank)
            if key in seen:
                continue  # the second trip of the same work: the run ended there
            seen.add(key)
            passes = r.passes
            per_pass = r.explained // passes
            cycle = " -> ".join(r.cycle)
            msg = (f"{r.rid} ran away in walk {r.walk} (pass {r.pass_no}) at t={r.t:.3f} s: "
                   f"{r.node}@{r.rank} ran {r.forwards} forwards where the graph explains "
                   f"{r.explained} ({plural(passes, 'pass', 'passes')} of {per_pass}); "
                   f"it keeps cycling {cycle}. The request was cut short instead of running to its "
                   f"{ctx.scenario.limits.request_timeout_s:g} s timeout")
            out.append(Violation(
                self.name, msg, walk=r.walk, node=r.node, rank=r.rank, request=r.rid,
                details={"reason": "runaway", "pass": r.pass_no, "forwards": r.forwards,
                         "explained": r.explained, "limit": r.limit, "cycle": list(r.cycle)},
                kind="runaway", t=stalled.get(r.rid, r.t)))
        return out


def _ordered(blocked: tuple[ev.BlockedNode, ...]) -> list[ev.BlockedNode]:
    """Gated nodes first (a root cause), then partly filled nodes, then the rest."""
    def rank(b: ev.BlockedNode) -> int:
        if b.gate:
            return 0
        if b.held and b.missing:
            return 1
        if not b.missing:
            return 2
        return 3
    return sorted(blocked, key=lambda b: (rank(b), b.rank))


def wait_kind(chain: list[dict[str, Any]], wf: WalkFacts) -> str:
    """What a hang waits for, the most telling kind among its blocked nodes (`chain`, as the
    violation's details hold it; `wf` the facts of the walk that hung), "" if none says.

    ``gate``: an engine gate; ``lockstep``: a TP follower's ready node, held because the
    follower runs only its leader's batches; ``reinjection``: a loop's external input that the
    loop re-routes at each advance; ``seed``: the first copy of a loop-back input (from the
    conductor or a node before the loop); ``loop-back``: a later copy, from inside the loop;
    ``input``: a walk-start input; ``edge``: a signal from another node.
    """
    kinds = [k for k in (_entry_kind(entry, wf) for entry in chain) if k]
    return min(kinds, key=WAITS.index) if kinds else ""


def reinjection_mechanism(chain: list[dict[str, Any]], wf: WalkFacts) -> str:
    """Why a loop did not route an external input again at its advance, where the walk says:
    ``shared-name``: another node of the loop takes an input of the same name (the loop saves
    one copy per name, mstar graph/base.py:510-517); ``inner-loop-last``: the loop's body ends
    with an inner loop, whose end completes the outer iteration and drops what the outer loop
    re-routes (graph/base.py:535, ``mark_entity_complete``'s answer is not returned); "" when
    neither holds."""
    for entry in chain:
        missing = entry.get("missing") or []
        if not missing or not entry.get("counter"):
            continue
        node, name = entry["node"], missing[0]
        for lp in wf.loops_of.get(node, ()):
            ext = loop_external_inputs(lp)
            if (name, node) not in ext:
                continue
            if any(n == name and other != node for n, other in ext):
                return "shared-name"
            if _ends_with_loop(lp.body):
                return "inner-loop-last"
    return ""


def _ends_with_loop(section: Any) -> bool:
    """Whether a section's last entity to complete is a loop: a loop itself, the last part of a
    sequence that ends with one."""
    if isinstance(section, Loop):
        return True
    if isinstance(section, Sequential) and section.sections:
        return _ends_with_loop(section.sections[-1])
    return False


def _entry_kind(entry: dict[str, Any], wf: WalkFacts) -> str:
    gate = entry.get("gate")
    if gate:
        return "lockstep" if gate.startswith(ev.LOCKSTEP_HOLD) else "gate"
    missing = entry.get("missing") or []
    if not missing:
        return ""
    node, name, counter = entry["node"], missing[0], entry.get("counter")
    pair = (name, node)
    loops = wf.loops_of.get(node, ())
    if loops:
        if pair in loop_back_pairs(loops[-1]):
            return "seed" if not counter else "loop-back"
        if counter and any(pair in loop_external_inputs(lp) for lp in loops):
            return "reinjection"
    if pair in wf.start_inputs:
        return "input"
    return "edge"
