"""What both drivers decide the same way: the workload, hangs, stall reports, the end state.

A driver supplies a clock and a transport (`StallPort`); the policy lives here:

* `Workload`: the scenario's closed-loop workload. Phases run one after the other; each has
  ``concurrency`` clients that submit a request, wait for it to end and submit the next, until
  the phase has issued ``count``. Requests are named ``r0, r1, ...`` in submission order.
  The driver decides *when* a client acts (a simpy process, or the launcher's callback when the
  conductor says a request ended); `Workload` decides *what* it submits.
* `hung`: the one rule that decides which unfinished requests have hung once nothing can happen
  any more.
* `Stalls.stall`: the stall report (`Stalled`, with what every rank's nodes hold and miss) and
  the abort the API server does for a hung or timed-out request.
* `run_ended`: the run's final state from every rank's and the conductor's `RankFinal` /
  `ConductorFinal`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from msgspec import Struct

from simharness import events as ev
from simharness.ridmap import RidMap
from simharness.runtime.effects import Abort
from simharness.runtime.protocol import ConductorDoor, StallPosition, WorkerDoor
from simharness.scenario.model import Scenario

#: Why a request is reported as stalled: nothing can happen any more, its deadline passed, or
#: its work grew beyond what the graph explains (the simulation's runaway guard).
QUIESCENCE = "quiescence"
TIMEOUT = "timeout"
RUNAWAY = "runaway"
#: the request outcome each kind of stall ends with
_OUTCOME = {QUIESCENCE: "hung", TIMEOUT: "timeout", RUNAWAY: "runaway"}


def abort_outcome(reason: str) -> str:
    """The outcome the API server gives a stalled request it aborts."""
    return _OUTCOME.get(reason, reason)


# -- the workload ------------------------------------------------------------------------------


class Submission(Struct, frozen=True, kw_only=True):
    """One request a client submits."""

    rid: str
    kind: str


class Workload:
    """The scenario's closed-loop workload, as a pure state machine (no clock)."""

    def __init__(self, scenario: Scenario) -> None:
        self.phases = scenario.workload
        self._issued = [0] * len(self.phases)
        self._next_id = 0
        #: rid -> outcome, in submission order; "" while the request is open (a slot per
        #: request, not a dict entry: a soak's outcomes stay small)
        self.outcomes: RidMap[str] = RidMap()
        #: the requests not ended yet, in submission order: `issue` inserts each rid in that
        #: order, `end` only removes, and a dict keeps insertion order (`unfinished` sorts nothing)
        self._open: dict[str, None] = {}
        #: set when the run stops taking new work (a deadline, a crashed process)
        self.stopped = False
        # The callback form (`start` / `ended`): the phase running and its open requests.
        self._phase = -1
        self._active = 0

    def clients(self, phase: int) -> int:
        """How many clients phase `phase` runs at once."""
        p = self.phases[phase]
        return min(p.concurrency, p.count)

    def issue(self, phase: int) -> Submission | None:
        """The next request a client of `phase` submits; None once the phase issued them all."""
        p = self.phases[phase]
        n = self._issued[phase]
        if n >= p.count or self.stopped:
            return None
        self._issued[phase] = n + 1
        rid = f"r{self._next_id}"
        self._next_id += 1
        self.outcomes[rid] = ""
        self._open[rid] = None
        return Submission(rid=rid, kind=p.kind_of(n))

    def end(self, rid: str, outcome: str) -> bool:
        """Record that `rid` ended; False when it had already ended (a late duplicate)."""
        if self.outcomes.get(rid):
            return False
        self.outcomes[rid] = outcome
        self._open.pop(rid, None)
        return True

    # A driver whose clients are callbacks rather than processes (the launcher) uses these two:
    # the closed loop above, unrolled. The client whose request ended submits the next one of
    # its phase; when the phase's last request ends, the next phase opens.

    def start(self) -> list[Submission]:
        """The submissions that open the workload."""
        return self._open_next_phase()

    def ended(self, rid: str, outcome: str) -> list[Submission]:
        """`rid` ended: record it and return what its client submits next."""
        if not self.end(rid, outcome):
            return []
        self._active -= 1
        if self.stopped:
            return []
        nxt = self.issue(self._phase)
        if nxt is not None:
            self._active += 1
            return [nxt]
        return self._open_next_phase() if self._active == 0 else []

    @property
    def done(self) -> bool:
        """Every phase has run (callback form)."""
        return self._phase >= len(self.phases)

    def _open_next_phase(self) -> list[Submission]:
        while not self.stopped:
            self._phase += 1
            if self._phase >= len(self.phases):
                return []
            subs = []
            for _ in range(self.clients(self._phase)):
                sub = self.issue(self._phase)
                if sub is not None:
                    subs.append(sub)
            self._active += len(subs)
            if subs:
                return subs
        return []

    def unfinished(self) -> list[str]:
        return list(self._open)

    def final_outcomes(self) -> RidMap[str]:
        """Every submitted request's outcome; one that never ended is ``failed``."""
        return RidMap((rid, o or "failed") for rid, o in self.outcomes.items())


# -- hangs and stall reports -------------------------------------------------------------------


class RequestPosition(Struct, frozen=True, kw_only=True):
    """An unfinished request and where the conductor says it stands (None: not admitted)."""

    rid: str
    position: StallPosition | None


def hung(unfinished: Sequence[RequestPosition]) -> list[RequestPosition]:
    """The requests that have hung once nothing can happen any more: every admitted one. A
    request still waiting for a concurrency slot gets the slot an abort frees, and runs; only
    when no unfinished request is admitted (a conductor that never admits the queue) are the
    waiting ones reported, as never admitted."""
    admitted = [p for p in unfinished if p.position is not None]
    return admitted or list(unfinished)


class StallPort(Protocol):
    """What a driver supplies for stall reports: its clock, the ranks' blocked nodes, and the
    abort on the wire."""

    def now(self) -> float: ...

    def blocked(self, asks: Sequence[RequestPosition]) -> dict[str, list[ev.BlockedNode]]:
        """For each admitted request: its blocked nodes on every rank of its position, in the
        order of ``position.ranks``."""
        ...

    def abort(self, rid: str, outcome: str) -> None: ...


class Stalls:
    """Reports stalled requests and aborts them as the API server would."""

    def __init__(self, port: StallPort, client: Any, emit: Callable[[Any], None]) -> None:
        self.port = port
        #: the API client (`ApiClient`): told of every abort, it stops waiting for the outputs
        self.client = client
        self.emit = emit

    def stall(self, reason: str, unfinished: Sequence[RequestPosition]) -> None:
        """Report and abort: at quiescence the requests `hung` picks, at a timeout every one
        given."""
        chosen = hung(unfinished) if reason == QUIESCENCE else list(unfinished)
        if not chosen:
            return
        blocked = self.port.blocked([p for p in chosen if p.position is not None])
        now = self.port.now()
        outcome = abort_outcome(reason)
        for p in chosen:
            self.emit(stalled(now, p, reason, blocked.get(p.rid, ())))
            self.client.handle_stimulus(Abort(rid=p.rid, outcome=outcome), now)
            self.port.abort(p.rid, outcome)


def stalled(now: float, p: RequestPosition, reason: str,
            blocked: Sequence[ev.BlockedNode]) -> ev.Stalled:
    pos = p.position
    if pos is None:
        return ev.Stalled(now, p.rid, reason, "", 0, (), ())
    return ev.Stalled(now, p.rid, reason, pos.walk, pos.step, pos.pending, tuple(blocked))


# -- the end state -----------------------------------------------------------------------------


class RankFinal(Struct, frozen=True, kw_only=True):
    """One rank's state at the end of a run."""

    rank: int
    requests_left: tuple[str, ...]
    #: (rid, message kind) parked for requests the rank no longer knows
    unprocessed: tuple[tuple[str, str], ...]
    busy: bool


class ConductorFinal(Struct, frozen=True, kw_only=True):
    """The conductor's state at the end of a run."""

    requests: tuple[str, ...]
    waiting: tuple[str, ...]


def rank_final(worker: WorkerDoor) -> RankFinal:
    """A worker's end state."""
    return RankFinal(rank=worker.rank, requests_left=worker.requests_left(),
                     unprocessed=tuple(worker.unprocessed_pairs()), busy=bool(worker.busy))


def conductor_final(conductor: ConductorDoor) -> ConductorFinal:
    return ConductorFinal(requests=conductor.open_requests(), waiting=conductor.waiting_requests())


def run_ended(t: float, ranks: Sequence[RankFinal | None],
              conductor: ConductorFinal | None) -> ev.RunEnded:
    """The `RunEnded` event; a process that reported nothing is left out."""
    got = [f for f in ranks if f is not None]
    return ev.RunEnded(
        t,
        tuple((f.rank, f.requests_left) for f in got if f.requests_left),
        tuple((f.rank, tuple((rid, kind) for rid, kind in f.unprocessed)) for f in got if f.unprocessed),
        conductor.requests if conductor else (),
        conductor.waiting if conductor else (),
        tuple(f.rank for f in got if f.busy),
    )
