"""Schedule perturbations and injected faults, carried out by the simpy driver.

Built from a scenario's ``schedule:`` and ``faults:`` keys (`Scenario.schedule`,
`Scenario.faults`). Every random draw comes from a named stream of the scenario's seed
(`simharness.rng`), never from the wall clock, so a perturbed run replays bit for bit:

* ``schedule.service``: service-time jitter, one draw per batch;
* ``schedule.link``: link jitter, one draw per message;
* ``schedule.ties``: the order in which a rank handles messages that reached it together from
  different senders (each sender's own order is kept: FIFO per link), and the pick among ready
  (node, walk) pairs tied in the round-robin.

Faults: each kind (`simharness.faults`) installs itself through the hooks this plan offers
(`FaultHooks`): a scaled service time on a rank (``slow_rank``), a rule consulted for every
message that leaves (``delay``, ``duplicate``, ``drop``: the copies to deliver and the extra
latency), a rank stopped at a moment (``crash``: it finishes nothing after it and loses every
message sent to it; `Simulation` carries that out). A delayed message still holds the later
messages of its link behind it (`Network`): FIFO per sender-receiver pair is the one ordering
mstar relies on, and it is kept.

When a scenario has neither key the driver does not build this object at all, so unperturbed
runs are exactly what they were before perturbations existed (same trace digests).
"""

from __future__ import annotations

from typing import Any

from simharness.faults import SendRule
from simharness.faults import kind as fault_kind
from simharness.rng import RandomStreams
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID
from simharness.scenario.model import Scenario

_ENDPOINTS = {"conductor": CONDUCTOR_ID, "client": CLIENT_ID}


class Perturbations:
    """The perturbation plan of one run; the driver consults it at a few hooks. The faults'
    `FaultHooks` (their kinds install themselves through `scale_service`, `intercept_sends` and
    `stop_rank`)."""

    def __init__(self, scenario: Scenario, streams: RandomStreams) -> None:
        sched = scenario.schedule
        self.service_jitter = sched.service_jitter
        self.link_jitter_s = sched.link_jitter_us * 1e-6
        self.shuffle_ties = sched.shuffle_ties
        self._service = streams.stream("schedule.service")
        self._link = streams.stream("schedule.link")
        self._ties = streams.stream("schedule.ties")
        #: what each message leaving is put through, in the order of the scenario's faults
        self._send_rules: list[SendRule] = []
        #: rank -> the factor on its service times
        self.slow: dict[int, float] = {}
        #: rank -> simulated time of its crash
        self.crashes: dict[int, float] = {}
        for fault in scenario.faults:
            fault_kind(fault.kind).install(fault, self)

    @classmethod
    def build(cls, scenario: Scenario, streams: RandomStreams) -> Perturbations | None:
        if not scenario.schedule.active and not scenario.faults:
            return None
        return cls(scenario, streams)

    # -- FaultHooks: where the faults' kinds act ----------------------------------------------

    def endpoint(self, name: int | str) -> int:
        return _ENDPOINTS[name] if isinstance(name, str) else name

    def scale_service(self, rank: int, factor: float) -> None:
        self.slow[rank] = self.slow.get(rank, 1.0) * factor

    def intercept_sends(self, rule: SendRule) -> None:
        self._send_rules.append(rule)

    def stop_rank(self, rank: int, at_s: float) -> None:
        self.crashes[rank] = min(self.crashes.get(rank, at_s), at_s)

    # -- hooks the driver calls -----------------------------------------------------------------

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
        if self._send_rules:
            kind = getattr(msg, "kind_name", "")
            for rule in self._send_rules:
                copies, extra = rule(src, dst, kind, copies, extra)
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
