"""``mstar``: mstar-ai's real stack above our engine, as the runtime under test.

Per rank a real ``mstar.worker.worker.Worker`` (`worker.StackWorker`, its main loop restated over
the driver's port), one real ``mstar.conductor.conductor.Conductor`` (`conductor.StackConductor`),
both built by mstar's own code from the scenario's model and a config written from its placement
(`build.Stack`). Ours are only the clock, the links that carry mstar's pickled messages, a fake
engine with the scenario's service times and stop rules (`engine.FakeEngine`), the tensor wire,
and the API server's two entities. What the real objects did becomes the same trace events our
model's runtimes emit, so every check reads this arm as it reads the others.

mstar-ai 0.2.1 batches by backlog (a batch is capped at ``max_batch``, the rest served next),
chooses a rank's next batch before reading what came in during the last, and tears a finished
request down only after the API server has read its outputs; this runtime's `LoopPolicy`
(`protocol.MSTAR_0_2_1`) says so, and a model run is compared with it under the same policy.

Not modelled by the fake engine (said in `notes` when a scenario uses them): scripted engine
gates (``graph.nodes.N.script``) and KV-cache readiness (``kv_label``): its ``check_ready``
admits every request at once.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from simharness.mstar.package import EXTRA_INSTALL, PINNED, PIP_INSTALL, installed_version, is_available
from simharness.placement.layout import Layout
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.protocol import MSTAR_0_2_1

if TYPE_CHECKING:  # the stack's modules import mstar and torch: only when a run builds one
    from simharness.mstar.stack.build import Stack
    from simharness.mstar.stack.conductor import StackClient, StackConductor
    from simharness.mstar.stack.worker import StackWorker


class MstarStack:
    name = "mstar"
    description = (f"the real mstar stack (mstar-ai {PINNED}: its Conductor, Workers, scheduler "
                   f"and graph code, on our clock and links)")
    #: its worker and conductor modules import torch, pyzmq and msgpack too (the extra)
    install_hint = f"{PIP_INSTALL} and {EXTRA_INSTALL}"
    #: the zmq backend refuses it: mstar's blocking loops are restated over the simulation's
    #: clock and port, not over real processes (docs/real_backends.md)
    simulation_only = True
    #: the loop a model runs when compared with this stack (`simharness.differential.aligned`)
    model_policy = MSTAR_0_2_1
    #: generated features a comparison with a model cannot line up, so a differential campaign
    #: against this runtime leaves them out (`simharness.differential.left_out`): random link
    #: and service jitter, shuffled ties and message faults are drawn or counted per message,
    #: and this stack sends messages the model has none of (acks, UNPERSIST_TENSORS, the
    #: preprocess worker's), so the two arms would draw for, or fault, different messages
    unaligned_features = ("schedule", "faults")
    #: checks this stack's runs cannot show, so a comparison leaves them out of both arms:
    #: its fake engine admits every request at once (no KV-cache readiness, no KvUsed events)
    blind_checks = ("kv_handoff",)

    @staticmethod
    def beyond_model(events: Any, scenario: Any) -> list[str]:
        """The mechanisms this run shows that the model has no part for (labels,
        `mechanisms.REAL_ONLY`): a run showing one is not compared with a model's."""
        from simharness.mstar.stack.mechanisms import real_only

        return real_only(events, scenario)

    @staticmethod
    def available() -> bool:
        """mstar-ai's worker and conductor import here (they need torch and the mstar extra)."""
        if not is_available():
            return False
        try:
            import mstar.conductor.conductor
            import mstar.worker.worker  # noqa: F401
        except Exception:  # ImportError, or anything their heavy imports raise
            return False
        return True

    def __init__(self) -> None:
        # what mstar-ai 0.2.1 does: see the module docstring
        self.policy = MSTAR_0_2_1
        self.notes: list[str] = []
        found = installed_version()
        if found is not None and found != PINNED:
            self.notes.append(f"runtime mstar: mstar-ai {found} is installed; simharness is "
                              f"tested against {PINNED}")
        self._stack: Stack | None = None
        self._conductor: StackConductor | None = None

    def _stack_for(self, layout: Layout, nodes: FakeNodes) -> Stack:
        from simharness.mstar.stack.build import Stack
        from simharness.mstar.stack.conductor import StackConductor, start_workers

        if self._stack is None or self._stack.layout is not layout:
            self._stack = Stack(layout, nodes)
            self._conductor = StackConductor(self._stack)
            start_workers(self._stack)
            self._conductor.startup()
            sc = layout.scenario
            if sys.flags.hash_randomization and os.environ.get("PYTHONHASHSEED") in (None, "random"):
                self.notes.append("runtime mstar: Python's string hashing is random in this process "
                                  "(PYTHONHASHSEED unset): mstar's code iterates sets of names, so "
                                  "the trace digest may differ from another process's; the "
                                  "simharness command sets PYTHONHASHSEED=0")
            if sc.gated_nodes:
                self.notes.append("runtime mstar: the fake engine admits every request at once "
                                  "(no scripted gate, no KV readiness): "
                                  + ", ".join(sorted(sc.gated_nodes)) + " run ungated")
        return self._stack

    def build_worker(self, rank: int, layout: Layout, nodes: FakeNodes,
                     tie_break: Any = None) -> StackWorker:
        from simharness.mstar.stack.worker import StackWorker

        stack = self._stack_for(layout, nodes)
        return StackWorker(stack, rank, stack.workers.get(rank))

    def build_conductor(self, layout: Layout, choose: Any) -> StackConductor:
        if self._stack is None or self._stack.layout is not layout:
            self._stack_for(layout, FakeNodes(layout.scenario))
        assert self._conductor is not None and self._stack is not None
        self._stack.choose_replica = choose
        return self._conductor

    def build_client(self) -> StackClient:
        from simharness.mstar.stack.conductor import StackClient

        assert self._stack is not None, "build the workers first"
        return StackClient(self._stack)


__all__ = ["MstarStack"]
