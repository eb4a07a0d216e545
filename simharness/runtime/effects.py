"""The one door of the runtime model's state machines: a stimulus and `now` in, `Effects` out.

As dask's ``WorkerState.handle_stimulus``: a driver hands `WorkerLoop`, `Conductor` and
`ApiClient` one stimulus at a time through ``handle_stimulus(stimulus, now)`` and carries out
what comes back: the `Send`s, the trace events (in the order they happened), the requests that
ended, and for the worker loop the batch it chose and the completions a finished batch made.
Nothing here reads a clock or does I/O.

Stimuli are frozen keyword-built msgspec Structs (built in C: a driver makes several per forward);
a message that arrived is `Arrived`.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import field

from simharness.runtime.messages import Send


class _Stimulus(msgspec.Struct, frozen=True, kw_only=True, eq=False):
    """Base of every stimulus."""


class Arrived(_Stimulus):
    """A message arrived (any endpoint)."""

    msg: Any


class Choose(_Stimulus):
    """Worker loop: pick the next batch (and send what choosing it needs: KV pulls, SCHEDULE_TP)."""


class Started(_Stimulus):
    """Worker loop: the chosen batch begins; it will take `duration`."""

    batch: Any
    duration: float


class Finished(_Stimulus):
    """Worker loop: the batch has executed; postprocess it."""

    batch: Any


class Submit(_Stimulus):
    """Conductor: a client submits request `rid` of kind `kind`."""

    rid: str
    kind: str


class Abort(_Stimulus):
    """Conductor: the API server gives up on `rid` (hung, timeout, runaway)."""

    rid: str
    outcome: str


#: The one `Choose` a driver needs (it carries nothing).
CHOOSE = Choose()


class Effects(msgspec.Struct, kw_only=True, eq=False):
    """What one stimulus caused."""

    sends: list[Send] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    #: (rid, outcome) of every request that ended (conductor)
    ended: list[tuple[str, str]] = field(default_factory=list)
    #: the batch chosen (worker loop, `Choose`); None when nothing can run
    batch: Any = None
    #: every `Completion` of a finished batch, in order (worker loop, `Finished`)
    completions: list[Any] = field(default_factory=list)
