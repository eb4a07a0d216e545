"""The API server's side of a request, as a pure state machine: it reads the outputs, then lets
teardown proceed.

Every emit is recorded as an `Emitted` event. With the drain barrier (mstar 0.2.1), mstar's
conductor tears a finished request down only after the API server (its preprocess worker) has
read every output and sent READS_DONE. Until then the request still holds its concurrency slot
and its state on every rank. The client here counts the emits it has received against the number
the conductor says to expect.
"""

from __future__ import annotations

from typing import Any

from simharness import events as ev
from simharness.runtime.effects import Abort, Arrived, Effects
from simharness.runtime.messages import (
    CONDUCTOR_ID,
    ReadsDone,
    RequestComplete,
    ResultTensors,
    Send,
    TensorReceived,
)
from simharness.runtime.protocol import LoopPolicy


class ApiClient:
    def __init__(self, policy: LoopPolicy) -> None:
        self.policy = policy
        self._events: list[Any] = []
        self.emit = self._events.append
        self.received: dict[str, int] = {}
        self.expected: dict[str, int] = {}

    def handle_stimulus(self, stimulus: Any, now: float) -> Effects:
        """The one door: a message arrived (`Arrived`), or the API gave a request up (`Abort`:
        it stops waiting for the request's outputs)."""
        t = type(stimulus)
        if t is Arrived:
            sends = self._on_message(stimulus.msg, now)
        elif t is Abort:
            self.expected.pop(stimulus.rid, None)
            self.received.pop(stimulus.rid, None)
            sends = []
        else:
            raise TypeError(f"the API client takes Arrived or Abort, not {t.__name__}")
        events = self._events[:]
        self._events.clear()
        return Effects(sends, events)

    def _on_message(self, msg: Any, now: float) -> list[Send]:
        rid = msg.rid
        sends = []
        if isinstance(msg, ResultTensors):
            self.emit(ev.Emitted(now, msg.rank, rid, msg.signal))
            if self.policy.acks:  # read at once, acked to the rank that sent it
                sends.append(Send(msg.rank, 0, TensorReceived(rid=rid)))
        if not self.policy.drain_barrier:
            return sends
        if isinstance(msg, ResultTensors):
            self.received[rid] = self.received.get(rid, 0) + 1
        elif isinstance(msg, RequestComplete):
            self.expected[rid] = msg.emits
        want = self.expected.get(rid)
        if want is not None and self.received.get(rid, 0) >= want:
            del self.expected[rid]
            self.received.pop(rid, None)
            sends.append(Send(CONDUCTOR_ID, 0, ReadsDone(rid=rid)))
        return sends
