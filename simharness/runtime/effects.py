"""The one door of the runtime model's state machines: a stimulus and `now` in, `Effects` out.

As dask's ``WorkerState.handle_stimulus``: a driver hands `WorkerLoop`, `Conductor` and
`ApiClient` one stimulus at a time through ``handle_stimulus(stimulus, now)`` and carries out
what comes back: the `Send`s, the trace events (in the order they happened), the requests that
ended, and for the worker loop the batch it chose and the completions a finished batch made.
Nothing here reads a clock or does I/O.

Stimuli are frozen keyword-built dataclasses; a message that arrived is `Arrived`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simharness.runtime.messages import Send

_stimulus = dataclass(frozen=True, kw_only=True, slots=True)


@_stimulus
class Arrived:
    """A message arrived (any endpoint)."""

    msg: Any


@_stimulus
class Choose:
    """Worker loop: pick the next batch (and send what choosing it needs: KV pulls, SCHEDULE_TP)."""


@_stimulus
class Started:
    """Worker loop: the chosen batch begins; it will take `duration`."""

    batch: Any
    duration: float


@_stimulus
class Finished:
    """Worker loop: the batch has executed; postprocess it."""

    batch: Any


@_stimulus
class Submit:
    """Conductor: a client submits request `rid` of kind `kind`."""

    rid: str
    kind: str


@_stimulus
class Abort:
    """Conductor: the API server gives up on `rid` (hung, timeout, runaway)."""

    rid: str
    outcome: str


#: The one `Choose` a driver needs (it carries nothing).
CHOOSE = Choose()


@dataclass(slots=True, kw_only=True)
class Effects:
    """What one stimulus caused."""

    sends: list[Send] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    #: (rid, outcome) of every request that ended (conductor)
    ended: list[tuple[str, str]] = field(default_factory=list)
    #: the batch chosen (worker loop, `Choose`); None when nothing can run
    batch: Any = None
    #: every `Completion` of a finished batch, in order (worker loop, `Finished`)
    completions: list[Any] = field(default_factory=list)
