"""Fake nodes: what a node's engine would do, minus the tensor math.

A fake node has a cost (``service_ms`` per batch plus ``per_request_ms`` per extra request), a
batch cap (``max_batch``), and optionally a script keyed by loop counter. The script acts as the
engine's readiness gate (mstar ``engine.check_ready``): a node whose inputs are all present can
still be held. ``wait_for_walk_start`` holds the node at that counter until the named inputs in
its current slot are the copies the conductor sent when the walk started, which is how a node
that reads its loop counter and (re)initialises from the walk's start inputs behaves.
"""

from __future__ import annotations

from simharness.runtime.protocol import WorkerGraphState
from simharness.scenario.model import Scenario, ScriptStep
from simharness.signals import ORIGIN_WALK_START


class FakeNodes:
    def __init__(self, scenario: Scenario) -> None:
        self._facts = scenario.nodes
        self._default = scenario.node_facts("")
        self._cost: dict[tuple[str, str], tuple[float, float, int | None]] = {}
        self._script: dict[str, dict[int, ScriptStep]] = {
            node: {s.at_counter: s for s in facts.script}
            for node, facts in scenario.nodes.items() if facts.script
        }

    def _lookup(self, node: str, walk: str) -> tuple[float, float, int | None]:
        key = (node, walk)
        got = self._cost.get(key)
        if got is None:
            c = self._facts.get(node, self._default).cost(walk)
            got = self._cost[key] = (c.service_ms / 1000.0, c.per_request_ms / 1000.0, c.max_batch)
        return got

    def duration(self, node: str, walk: str, batch_size: int) -> float:
        """One execution of a batch: ``max_batch`` caps a minibatch, and an engine runs the
        minibatches of an oversize batch one after another inside the same execution."""
        base, per, cap = self._lookup(node, walk)
        minibatches = 1 if cap is None else -(-batch_size // cap)
        return minibatches * base + per * (batch_size - minibatches)

    def max_batch(self, node: str, walk: str) -> int | None:
        return self._lookup(node, walk)[2]

    def kv_label(self, node: str) -> str | None:
        facts = self._facts.get(node)
        return None if facts is None else facts.kv_label

    def tokens(self, node: str, walk: str) -> int:
        """Tokens one forward adds to the node's KV cache in this walk."""
        return self._facts.get(node, self._default).cost(walk).tokens

    def gate(self, node: str, state: WorkerGraphState) -> str:
        """Why the engine holds `node` now ("" when it does not)."""
        return self.gate_detail(node, state)[0] if node in self._script else ""

    def gate_detail(self, node: str, state: WorkerGraphState) -> tuple[str, tuple[str, ...]]:
        """(why the engine holds `node`, the inputs it waits for); ("", ()) when it does not."""
        steps = self._script.get(node)
        if not steps:
            return "", ()
        counter = state.counter(node)
        step = steps.get(counter) if counter is not None else None
        if step is None:
            return "", ()
        cur = state.inputs(node)
        waits = tuple(n for n in step.wait_for_walk_start
                      if cur.get(n) is None or cur[n].origin != ORIGIN_WALK_START)
        if not waits:
            return "", ()
        name = waits[0]
        sig = cur.get(name)
        have = "nothing" if sig is None else sig.describe()
        return (f"at loop counter {counter} it waits for the walk-start {name} "
                f"(its current slot holds {have})", waits)
