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

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from simharness.runtime.messages import Send
from simharness.runtime.scheduler import Batch


class WorkerPort(Protocol):
    """What a driver supplies to one rank's main loop."""

    #: the rank does nothing more (a crash fault, a shutdown)
    stopped: bool

    def now(self) -> float: ...

    def receive(self, handle: Callable[[Any], None]) -> None:
        """Call `handle` with every runtime message that arrived, in the order to handle them."""
        ...

    def send(self, sends: list[Send]) -> None: ...

    def chosen(self, batch: Batch | None) -> None:
        """The next batch was chosen (None: nothing to run); its outbox has left."""
        ...

    def idle(self) -> Any:
        """Nothing to run: what to wait for until a message arrives."""
        ...

    def duration(self, batch: Batch) -> float:
        """How long the batch takes (the budget `WorkerLoop.start` records)."""
        ...

    def collective(self, batch: Batch) -> Any:
        """What a lockstep batch waits for before it runs (every rank of its instance)."""
        ...

    def execute(self, batch: Batch, duration: float) -> Any:
        """Run the started batch; what to wait for until it has run."""
        ...

    def finished(self, sends: list[Send]) -> None:
        """The batch finished; `sends` is what it produced."""
        ...


def worker_main(loop: Any, port: WorkerPort) -> Iterator[Any]:
    """Rank `loop.rank`'s main loop over `port`, until the port stops."""
    def handle(msg: Any) -> None:
        sends = loop.handle(msg, port.now())
        if sends:
            port.send(sends)

    while not port.stopped:
        port.receive(handle)
        if port.stopped:
            return
        batch = loop.take_batch(port.now())
        if loop.outbox:
            port.send(loop.pop_outbox())
        port.chosen(batch)
        if batch is None:
            yield port.idle()
            continue
        duration = port.duration(batch)
        if batch.instance:
            yield port.collective(batch)
        loop.start(batch, port.now(), duration)
        yield port.execute(batch, duration)
        if port.stopped:
            return
        port.finished(loop.finish(batch, port.now()))
