"""The API server's side of a request: it reads the outputs, then lets teardown proceed.

Every emit is recorded as an `Emitted` event. With the drain barrier (mstar 0.2.1), mstar's
conductor tears a finished request down only after the API server (its preprocess
worker) has read every output and sent READS_DONE (the drain barrier of mstar 0.2.x). Until
then the request still holds its concurrency slot and its state on every rank. The client here
counts the emits it has received against the number the conductor says to expect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simharness.engine import events as ev
from simharness.engine.messages import ReadsDone, RequestComplete, ResultTensors
from simharness.engine.network import CLIENT_ID, CONDUCTOR_ID

if TYPE_CHECKING:
    from simharness.engine.simulation import Simulation


class ApiClient:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.received: dict[str, int] = {}
        self.expected: dict[str, int] = {}

    def deliver(self, msg: Any) -> None:
        rid = msg.rid
        if isinstance(msg, ResultTensors):
            self.sim.recorder.emit(ev.Emitted(self.sim.env.now, msg.rank, rid, msg.signal))
        if not self.sim.policy.drain_barrier:
            return
        if isinstance(msg, ResultTensors):
            self.received[rid] = self.received.get(rid, 0) + 1
        elif isinstance(msg, RequestComplete):
            self.expected[rid] = msg.emits
        self._maybe_done(rid)

    def _maybe_done(self, rid: str) -> None:
        want = self.expected.get(rid)
        if want is not None and self.received.get(rid, 0) >= want:
            del self.expected[rid]
            self.received.pop(rid, None)
            self.sim.network.send(CLIENT_ID, CONDUCTOR_ID, 0, self.sim.conductor.deliver,
                                  ReadsDone(rid))

    def forget(self, rid: str) -> None:
        self.expected.pop(rid, None)
        self.received.pop(rid, None)
