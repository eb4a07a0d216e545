"""Controlled deliveries: a schedule, not the clock's jitter, decides when a message arrives.

Without control every message arrives at its link's nominal time (`Network`). Under a
`DeliveryControl` each message is still computed that way (its *due* time), and then a policy
(`DeliveryPolicy`) may *hold* it: a held message waits, with every later message of its link
behind it (FIFO per sender-receiver pair, mstar's one ordering guarantee), until the policy lets
it go, its time is up (a delay the policy drew, or the bound ``max_delay_s`` past its due time),
or nothing else can happen (the run is at rest: the simulation asks `release_one` before it calls
anything a hang, so a delay is never mistaken for one). Messages on different links overtake
each other freely; that is what a search explores.

A released message is queued at ``(max(now, due), LATE + k)``: after every ordinary event of its
instant (simpy's NORMAL priority is 1), the k-th release of the run ordered before the (k+1)-th.
That makes every controlled run replayable bit for bit from a list of the moved deliveries alone
(`MovedDelivery`, written as a scenario's ``schedule.deliveries``): `RecordedControl` queues each
listed message at its recorded time and order as it is sent, and everything else at its nominal
time, which is exactly where the controlled run put them.

The control also records every delivery in order (`Delivery`), each with the vector clock of its
send and the receiver's count at its arrival (vector clocks over the endpoints, merged at each
delivery and each collective): what a search reads a run by (`explore.search.races`).

Used only when a scenario lists deliveries or a search runs: a run without one builds none, and
its events, times and digests are what they always were.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from simharness.engine.clock import Clock, Tick
from simharness.scenario.model import MovedDelivery

#: The priority class of a moved delivery: after simpy's NORMAL (1) events at the same instant.
LATE = 2

#: A message's identity in a run: (sender, receiver, its number on that link, from 1).
MessageId = tuple[int, int, int]


@dataclass
class Delivery:
    """A message as it arrived: who sent it, its number on its link, its kind, when, whether the
    schedule moved it, and the sender's vector clock when it was sent."""

    src: int
    dst: int
    nth: int
    kind: str
    at: float
    moved: bool
    sent_clock: dict[int, int]
    #: the receiver's own count of events (sends and deliveries) with this one
    index: int = 0
    #: its nominal arrival time
    due: float = 0.0

    @property
    def id(self) -> MessageId:
        return (self.src, self.dst, self.nth)


class DeliveryPolicy(Protocol):
    """What decides the holds of a controlled run (`simharness.explore.search` has the search
    policies)."""

    def decide(self, msg: MessageId, kind: str) -> bool | float:
        """What happens to a message as it is sent: False, it arrives when due; True, it is
        held until the policy lets it go (`delivered`), its bound runs out or the run is at
        rest; a number, it is held that many seconds past its due time."""
        ...

    def delivered(self, d: Delivery) -> Iterable[MessageId]:
        """A message arrived: held messages to ask about again (`still_held`)."""
        ...

    def still_held(self, msg: MessageId) -> bool:
        """Whether a message held by the policy's own decision must still wait."""
        ...

    def pick(self, heads: Sequence[tuple[MessageId, float]]) -> int:
        """The run is at rest with these link heads held (each with its due time): the index of
        the one to release."""
        ...


class _Pending:
    """A message under control: sent, not yet handed to the clock (held), or handed over."""

    __slots__ = ("id", "kind", "msg", "due", "deliver", "clock", "released", "moved", "own", "timer")

    def __init__(self, mid: MessageId, kind: str, msg: Any, due: float,
                 deliver: Callable[[Tick], None], clock: dict[int, int]) -> None:
        self.id = mid
        self.kind = kind
        self.msg = msg
        self.due = due
        self.deliver = deliver
        self.clock = clock
        self.released = False
        self.moved = False
        #: held by the policy's decision, until the policy, its timer or the run at rest lets it go
        self.own = False
        #: the queued event that lets it go (at the end of a drawn delay, or at the bound)
        self.timer: Tick | None = None


class DeliveryControl:
    """The held messages of one run, and the record of its deliveries."""

    def __init__(self, clock: Clock, policy: DeliveryPolicy | None = None,
                 max_delay_s: float | None = None) -> None:
        self.clock = clock
        self.policy = policy
        self.max_delay_s = max_delay_s
        #: (src, dst) -> messages sent on it so far
        self._sent: dict[tuple[int, int], int] = {}
        #: (src, dst) -> held messages, oldest first (a held head holds the rest of its link)
        self._held: dict[tuple[int, int], deque[_Pending]] = {}
        #: endpoint -> its vector clock (endpoint -> count)
        self._vc: dict[int, dict[int, int]] = {}
        #: the order of the last moved delivery
        self._moves = 0
        #: every delivery, in the order they happened
        self.deliveries: list[Delivery] = []
        #: what the policy moved, as a scenario's ``schedule.deliveries`` replays it
        self.moved: list[MovedDelivery] = []

    # -- the network's side ------------------------------------------------------------------

    def send(self, actor: int, key: tuple[int, int], msg: Any, due: float, now: float,
             deliver: Callable[[Tick], None]) -> None:
        """One message leaves `actor` on link `key`, due at `due`: queue it there, or hold it."""
        p = self._pending(actor, key, msg, due, deliver)
        decision = False if self.policy is None else self.policy.decide(p.id, p.kind)
        bound = self.max_delay_s
        release_at = None
        if decision is True:
            p.own = True
            if bound is not None:
                release_at = due + bound
        elif decision:  # a delay, within the bound
            p.own = True
            wait = float(decision)
            release_at = due + (wait if bound is None or wait < bound else bound)
        held = self._held.get(key)
        if not held and not p.own:
            self._enqueue(p, due, None)
            return
        if held is None:
            held = self._held[key] = deque()
        held.append(p)
        if release_at is not None:
            p.timer = Tick((partial(self._expire, p),))
            self.clock.at(release_at, p.timer)

    def _pending(self, actor: int, key: tuple[int, int], msg: Any, due: float,
                 deliver: Callable[[Tick], None]) -> _Pending:
        nth = self._sent[key] = self._sent.get(key, 0) + 1
        vc = self._tick(actor)
        return _Pending((key[0], key[1], nth), getattr(msg, "kind_name", type(msg).__name__), msg,
                        due, deliver, dict(vc))

    def joined(self, ranks: Sequence[int]) -> None:
        """The ranks met in a collective: each now knows what every other knew."""
        merged: dict[int, int] = {}
        for r in ranks:
            for k, v in self._vc.get(r, {}).items():
                if v > merged.get(k, 0):
                    merged[k] = v
        for r in ranks:
            self._vc[r] = dict(merged)

    # -- releasing ---------------------------------------------------------------------------

    def release_one(self) -> bool:
        """The run is at rest: release one held link head (the policy picks; the earliest due
        without one), whatever holds it. False when nothing is held."""
        heads = [(key, q[0]) for key, q in sorted(self._held.items()) if q]
        if not heads:
            return False
        if self.policy is not None:
            i = self.policy.pick([(p.id, p.due) for _, p in heads])
        else:
            i = min(range(len(heads)), key=lambda j: (heads[j][1].due, heads[j][0]))
        key, p = heads[i]
        p.own = False
        self._drain(key)
        return True

    def _expire(self, p: _Pending, _tick: Any = None) -> None:
        """`p`'s time is up: it goes once what is ahead of it on its link has gone."""
        p.timer = None  # it fired
        if p.released:
            return
        p.own = False
        self._drain((p.id[0], p.id[1]))

    def _drain(self, key: tuple[int, int]) -> None:
        """Release the messages at the head of `key` that nothing holds any more."""
        q = self._held[key]
        while q and not q[0].own:
            self._move(q.popleft())

    def _move(self, p: _Pending) -> None:
        now = self.clock.now()
        if p.timer is not None:
            # let go before its time: its timer would still move the clock on at its end
            self.clock.cancel(p.timer)
            p.timer = None
        at = p.due if p.due > now else now
        self._moves += 1
        p.moved = True
        self.moved.append(MovedDelivery(p.id[0], p.id[1], p.id[2], p.kind, at, self._moves))
        self._enqueue(p, at, LATE + self._moves)

    def _enqueue(self, p: _Pending, at: float, priority: int | None) -> None:
        p.released = True
        tick = Tick((partial(self._arrive, p),), p.msg)
        if priority is None:
            self.clock.at(at, tick)
        else:
            self.clock.at_priority(at, priority, tick)

    def _reconsider(self, ids: Iterable[MessageId]) -> None:
        assert self.policy is not None
        for mid in ids:
            key = (mid[0], mid[1])
            for p in self._held.get(key, ()):
                if p.id == mid and p.own and not self.policy.still_held(mid):
                    p.own = False
                    self._drain(key)
                    break

    # -- arrivals ----------------------------------------------------------------------------

    def _arrive(self, p: _Pending, tick: Tick) -> None:
        src, dst, nth = p.id
        vc = self._vc.setdefault(dst, {})
        for k, v in p.clock.items():
            if v > vc.get(k, 0):
                vc[k] = v
        vc[dst] = vc.get(dst, 0) + 1
        d = Delivery(src, dst, nth, p.kind, self.clock.now(), p.moved, p.clock, vc[dst], p.due)
        self.deliveries.append(d)
        p.deliver(tick)
        if self.policy is not None:
            self._reconsider(self.policy.delivered(d))

    def _tick(self, endpoint: int) -> dict[int, int]:
        vc = self._vc.setdefault(endpoint, {})
        vc[endpoint] = vc.get(endpoint, 0) + 1
        return vc


class RecordedControl(DeliveryControl):
    """Replays a list of `MovedDelivery` deliveries: a listed message is queued as it is sent, at its
    recorded time (or its nominal one, if later) and order, never ahead of an earlier message of
    its link."""

    def __init__(self, clock: Clock, moved: Sequence[MovedDelivery]) -> None:
        super().__init__(clock)
        self._by_id = {m.id: m for m in moved}
        #: (src, dst) -> (time, priority) of the last message queued on it
        self._last: dict[tuple[int, int], tuple[float, int]] = {}

    def send(self, actor: int, key: tuple[int, int], msg: Any, due: float, now: float,
             deliver: Callable[[Tick], None]) -> None:
        p = self._pending(actor, key, msg, due, deliver)
        m = self._by_id.get(p.id)
        slot = (due, 1) if m is None else ((m.at_s if m.at_s > due else due), LATE + m.order)
        last = self._last.get(key)
        if last is not None and slot < last:
            slot = last  # FIFO per link: never ahead of an earlier message
        self._last[key] = slot
        if slot[1] == 1:
            self._enqueue(p, slot[0], None)
        else:
            p.moved = True
            self.moved.append(MovedDelivery(p.id[0], p.id[1], p.id[2], p.kind, slot[0], slot[1] - LATE))
            self._enqueue(p, slot[0], slot[1])
