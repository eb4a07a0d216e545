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

from collections.abc import Sequence
from typing import Any

import msgspec

from simharness.runtime.messages import Send


class _Stimulus(msgspec.Struct, frozen=True, kw_only=True, eq=False):
    """Base of every stimulus. msgspec applies ``kw_only`` per class, so each stimulus says
    ``kw_only=True`` itself, as each `Message` does."""


class Arrived(_Stimulus, frozen=True, kw_only=True):
    """A message arrived (any endpoint)."""

    msg: Any


class Received(_Stimulus, frozen=True, kw_only=True):
    """Worker loop: messages that arrived, in arrival order, handled one after the other (a
    driver hands over everything that came while the rank was busy at once: one `Effects` for
    all of them, the events and sends of each message in its turn)."""

    msgs: list[Any]


class Choose(_Stimulus, frozen=True, kw_only=True):
    """Worker loop: pick the next batch (and send what choosing it needs: KV pulls, SCHEDULE_TP).
    `poll`: poll the StreamBuffers first (the top of mstar's loop does; the choice mstar 0.2.1
    makes right after a batch, `LoopPolicy.choose_first`, does not)."""

    poll: bool = True


class Poll(_Stimulus, frozen=True, kw_only=True):
    """Worker loop: poll the StreamBuffers (the top of mstar 0.2.1's loop, while the batch it
    chose at the end of the last one runs)."""


class Started(_Stimulus, frozen=True, kw_only=True):
    """Worker loop: the chosen batch begins; it will take `duration`."""

    batch: Any
    duration: float


class Finished(_Stimulus, frozen=True, kw_only=True):
    """Worker loop: the batch has executed; postprocess it."""

    batch: Any


class Submit(_Stimulus, frozen=True, kw_only=True):
    """Conductor: a client submits request `rid` of kind `kind`."""

    rid: str
    kind: str


class Abort(_Stimulus, frozen=True, kw_only=True):
    """Conductor: the API server gives up on `rid` (hung, timeout, runaway)."""

    rid: str
    outcome: str


class Alarm(_Stimulus, frozen=True, kw_only=True):
    """API server: a timer it set (`Effects.alarms`) went off."""

    rid: str


#: The `Choose` a driver needs at the top of the loop, and the one right after a batch.
CHOOSE = Choose()
CHOOSE_AFTER_BATCH = Choose(poll=False)
POLL = Poll()


class Effects(msgspec.Struct, eq=False):
    """What one stimulus caused. A door builds one per stimulus, several per forward, so its
    fields are positional and those a door may leave out default to empty tuples: read only."""

    sends: list[Send]
    #: the trace events, in the order they happened (a list; an empty tuple when there are none)
    events: Sequence[Any]
    #: (rid, outcome) of every request that ended (conductor)
    ended: Sequence[tuple[str, str]] = ()
    #: the batch chosen (worker loop, `Choose`); None when nothing can run
    batch: Any = None
    #: every `Completion` of a finished batch, in order (worker loop, `Finished`)
    completions: Sequence[Any] = ()
    #: (when, rid): timers to set, each answered by an `Alarm` at that time (API server)
    alarms: Sequence[tuple[float, str]] = ()
