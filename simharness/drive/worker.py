"""A rank's main loop, written once for both drivers.

mstar's worker loop, as both drivers run it: handle every message that arrived, take a batch,
send what choosing it produced (KV pulls, SCHEDULE_TP), then with nothing to run wait for a
message; else run the batch (after the collective of a lockstep instance) and finish it.

`worker_main` is a generator over a `WorkerPort`: each ``yield`` hands the driver something to
wait for. The simpy driver yields simpy events from a process; the real process blocks inside
the port's methods and ignores what is yielded. The port is the clock and the transport; the
`WorkerLoop` is the runtime under test.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Protocol, runtime_checkable

from simharness.runtime.effects import CHOOSE, Effects, Finished, Received, Started
from simharness.runtime.scheduler import Batch


class WorkerPort(Protocol):
    """What a driver supplies to one rank's main loop."""

    @property
    def stopped(self) -> bool:
        """The rank does nothing more (a crash fault, a shutdown)."""
        ...

    def now(self) -> float: ...

    def receive(self, handle: Callable[[list[Any]], None]) -> None:
        """Call `handle` with the runtime messages that arrived, in the order to handle them: in
        one list, or in several one after the other (one per message, as they come)."""
        ...

    def apply(self, effects: Effects) -> None:
        """Carry out what the loop answered: record its events, then send its sends."""
        ...

    def chosen(self, batch: Batch | None) -> None:
        """The next batch was chosen (None: nothing to run); what choosing sent has left."""
        ...

    def idle(self) -> Any:
        """Nothing to run: what to wait for until a message arrives."""
        ...

    def wait(self, seconds: float) -> Any:
        """What to wait for until `seconds` have passed (a worker that times its own loop)."""
        ...

    def duration(self, batch: Batch) -> float:
        """How long the batch takes (the budget its `Started` records)."""
        ...

    def collective(self, batch: Batch) -> Any:
        """What a lockstep batch waits for before it runs (every rank of its instance)."""
        ...

    def execute(self, batch: Batch, duration: float) -> Any:
        """Run the started batch; what to wait for until it has run."""
        ...

    def finished(self, effects: Effects) -> None:
        """The batch finished: `effects` holds its events, sends and completions."""
        ...


def worker_main(loop: Any, port: WorkerPort) -> Generator[Any, Any, None]:
    """Rank `loop.rank`'s main loop over `port`, until the port stops. `loop` is anything with
    `WorkerLoop`'s door (``handle_stimulus``)."""
    door = loop.handle_stimulus
    apply = port.apply

    def handle(msgs: list[Any]) -> None:
        apply(door(Received(msgs=msgs), port.now()))

    while not port.stopped:
        port.receive(handle)
        if port.stopped:
            return
        chose = door(CHOOSE, port.now())
        apply(chose)
        batch = chose.batch
        port.chosen(batch)
        if batch is None:
            yield port.idle()
            continue
        duration = port.duration(batch)
        if batch.instance:
            yield port.collective(batch)
        apply(door(Started(batch=batch, duration=duration), port.now()))
        yield port.execute(batch, duration)
        if port.stopped:
            return
        port.finished(door(Finished(batch=batch), port.now()))


@runtime_checkable
class OwnMainLoop(Protocol):
    """A worker that brings its own main loop instead of `worker_main` over its door: the real
    mstar stack, which restates ``Worker.run()`` over the same port."""

    def main(self, port: WorkerPort) -> Generator[Any, Any, None]: ...


def rank_main(worker: Any, port: WorkerPort) -> Generator[Any, Any, None]:
    """The process a driver runs for one rank: the worker's own main loop when it brings one,
    else `worker_main` over its door."""
    if isinstance(worker, OwnMainLoop):
        return worker.main(port)
    return worker_main(worker, port)
