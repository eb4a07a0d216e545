"""Faults on real processes: the zmq backend's own fault vocabulary, in the kinds of
`simharness.faults`.

The backend's options name two faults. ``--kill-rank RANK:SECONDS`` (`RealOptions.kill`) is a
``crash`` of that rank that many seconds after the start (the launcher kills it with SIGKILL);
`RealOptions.slow_ranks` are ``slow_rank`` faults, each a factor on the budget of every batch the
rank runs. `option_faults` writes them as records of those kinds, and `RealFaults` is where a
kind acts on real processes: the zmq backend's `FaultHooks`, through which a kind installs
itself as it does in the simulation. A kind whose `FaultKind.real_refusal` says why real
processes cannot carry it out (a message delayed, copied or lost in a real socket) is refused
with that reason.

A scenario's own ``faults:`` are refused as a whole, before this (`launcher.refuse_perturbations`):
their moments are simulated time, and the backend's faults are its options.
"""

from __future__ import annotations

from collections.abc import Iterable

from simharness.faults import FaultSpec, SendRule
from simharness.faults import kind as fault_kind
from simharness.faults.crash import CrashFault
from simharness.faults.slow_rank import SlowRankFault
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID

_ENDPOINTS = {"conductor": CONDUCTOR_ID, "client": CLIENT_ID}


class FaultRefused(ValueError):
    """A fault the zmq backend cannot inject."""


def option_faults(kill: tuple[int, float] | None, slow_ranks: dict[int, float]) -> tuple[FaultSpec, ...]:
    """The faults the backend's options ask for: a ``slow_rank`` per slow rank, in their order,
    and the ``--kill-rank`` as a ``crash``."""
    out: list[FaultSpec] = [SlowRankFault(rank=rank, factor=factor) for rank, factor in slow_ranks.items()]
    if kill is not None:
        out.append(CrashFault(rank=kill[0], at_ms=kill[1] * 1000.0))
    return tuple(out)


class RealFaults:
    """What a run's faults do on real processes: the factors on the ranks' batch budgets, and the
    rank to kill and when. The zmq backend's `FaultHooks`."""

    def __init__(self) -> None:
        #: rank -> the factor on the budget of every batch it runs
        self.slow_ranks: dict[int, float] = {}
        #: (rank, seconds after the start) of the rank the launcher kills, or None
        self.kill: tuple[int, float] | None = None

    @classmethod
    def of(cls, faults: Iterable[FaultSpec]) -> RealFaults:
        """The plan of `faults`, each installed by its kind; `FaultRefused` for a kind real
        processes cannot carry out, with its reason."""
        plan = cls()
        for fault in faults:
            kind = fault_kind(fault.kind)
            if kind.real_refusal is not None:
                raise FaultRefused(f"the zmq backend does not inject {kind.name} faults: "
                                   f"{kind.real_refusal}")
            kind.install(fault, plan)
        return plan

    # -- FaultHooks ---------------------------------------------------------------------------

    def endpoint(self, name: int | str) -> int:
        return _ENDPOINTS[name] if isinstance(name, str) else name

    def scale_service(self, rank: int, factor: float) -> None:
        self.slow_ranks[rank] = self.slow_ranks.get(rank, 1.0) * factor

    def intercept_sends(self, rule: SendRule) -> None:
        raise FaultRefused("the zmq backend cannot act on a message in flight: real sockets carry "
                           "each one as it is sent")

    def stop_rank(self, rank: int, at_s: float) -> None:
        if self.kill is not None:
            raise FaultRefused(f"the zmq backend kills one rank per run: rank {self.kill[0]} "
                               f"already, and rank {rank} too")
        self.kill = (rank, at_s)
