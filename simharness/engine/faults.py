"""Schedule perturbations and injected faults, carried out by the simpy driver.

Built from a scenario's ``schedule:`` and ``faults:`` keys (`Scenario.schedule`,
`Scenario.faults`). Every random draw comes from a named stream of the scenario's seed
(`simharness.rng`), never from the wall clock, so a perturbed run replays bit for bit:

* ``schedule.service``: service-time jitter, one draw per batch;
* ``schedule.link``: link jitter, one draw per message;
* ``schedule.ties``: the order in which a rank handles messages that reached it together from
  different senders (each sender's own order is kept: FIFO per link), and the pick among ready
  (node, walk) pairs tied in the round-robin.

Faults: a delayed message holds the later messages of its link behind it (FIFO per
sender-receiver pair is the one ordering mstar relies on, and it is kept); a duplicated message
arrives twice in a row; a dropped message never arrives; a slow rank's service times are scaled;
a crashed rank finishes nothing after its crash time and loses every message sent to it.

When a scenario has neither key the driver does not build this object at all, so unperturbed
runs are exactly what they were before perturbations existed (same trace digests).
"""

from __future__ import annotations

from typing import Any

from simharness.rng import RandomStreams
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID
from simharness.scenario.model import Fault, Scenario

_ENDPOINTS = {"conductor": CONDUCTOR_ID, "client": CLIENT_ID}


def _endpoint(value: int | str | None) -> int | None:
    if value is None:
        return None
    return _ENDPOINTS[value] if isinstance(value, str) else value


class _MessageFault:
    __slots__ = ("kind", "message", "src", "dst", "nth", "delay_s", "seen")

    def __init__(self, fault: Fault) -> None:
        self.kind = fault.kind
        self.message = fault.message
        self.src = _endpoint(fault.src)
        self.dst = _endpoint(fault.dst)
        self.nth = fault.nth
        self.delay_s = fault.delay_ms / 1000.0
        #: matching messages seen so far
        self.seen = 0

    def matches(self, src: int, dst: int, kind: str) -> bool:
        if kind != self.message or (self.src is not None and src != self.src):
            return False
        if self.dst is not None and dst != self.dst:
            return False
        self.seen += 1
        return self.seen == self.nth


class Perturbations:
    """The perturbation plan of one run; the driver consults it at a few hooks."""

    def __init__(self, scenario: Scenario, streams: RandomStreams) -> None:
        sched = scenario.schedule
        self.service_jitter = sched.service_jitter
        self.link_jitter_s = sched.link_jitter_us * 1e-6
        self.shuffle_ties = sched.shuffle_ties
        self._service = streams.stream("schedule.service")
        self._link = streams.stream("schedule.link")
        self._ties = streams.stream("schedule.ties")
        self._message_faults = [_MessageFault(f) for f in scenario.faults if f.message is not None]
        self.slow: dict[int, float] = {}
        #: rank -> simulated time of its crash
        self.crashes: dict[int, float] = {}
        for f in scenario.faults:
            if f.kind == "slow_rank" and f.rank is not None:
                self.slow[f.rank] = self.slow.get(f.rank, 1.0) * f.factor
            elif f.kind == "crash" and f.rank is not None:
                self.crashes[f.rank] = min(self.crashes.get(f.rank, f.at_ms / 1000.0), f.at_ms / 1000.0)

    @classmethod
    def build(cls, scenario: Scenario, streams: RandomStreams) -> Perturbations | None:
        if not scenario.schedule.active and not scenario.faults:
            return None
        return cls(scenario, streams)

    # -- hooks --------------------------------------------------------------------------------

    def service_time(self, rank: int, duration: float) -> float:
        factor = self.slow.get(rank, 1.0)
        j = self.service_jitter
        if j:
            factor *= 1.0 + float(self._service.uniform(-j, j))
        return duration * factor

    def on_send(self, src: int, dst: int, msg: Any) -> tuple[int, float]:
        """(copies to deliver, extra delay in seconds) for one message about to leave."""
        copies, extra = 1, 0.0
        if self.link_jitter_s:
            extra += float(self._link.uniform(0.0, self.link_jitter_s))
        if self._message_faults:
            kind = getattr(msg, "kind_name", "")
            for mf in self._message_faults:
                if mf.matches(src, dst, kind):
                    if mf.kind == "drop":
                        copies = 0
                    elif mf.kind == "duplicate":
                        copies = max(copies, 2) if copies else 0
                    else:
                        extra += mf.delay_s
        return copies, extra

    def interleave(self, msgs: list[Any]) -> list[Any]:
        """A seeded merge of messages from different senders, each sender's order kept."""
        if len(msgs) < 2:
            return msgs
        queues: dict[int, list[Any]] = {}
        for m in msgs:
            queues.setdefault(getattr(m, "src", CONDUCTOR_ID), []).append(m)
        if len(queues) < 2:
            return msgs
        lanes = [list(reversed(q)) for q in queues.values()]
        out = []
        while lanes:
            i = int(self._ties.integers(len(lanes)))
            out.append(lanes[i].pop())
            if not lanes[i]:
                lanes.pop(i)
        return out

    def tie_break(self, n: int) -> int:
        return int(self._ties.integers(n))
