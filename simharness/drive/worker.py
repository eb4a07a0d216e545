"""A rank's main loop, written once for both drivers.

mstar's worker loop, as both drivers run it: handle every message that arrived, take a batch,
send what choosing it produced (KV pulls, SCHEDULE_TP), then with nothing to run wait for a
message; else run the batch (after the collective of a lockstep instance) and finish it. Under
`LoopPolicy.choose_first` (mstar 0.2.1) the next batch is chosen as soon as one finishes, and
the messages that came in meanwhile are read once it has started.

`worker_main` is a generator over a `WorkerPort`: each ``yield`` hands the driver something to
wait for. The simpy driver yields simpy events from a process; the real process blocks inside
the port's methods and ignores what is yielded. The port is the clock and the transport; the
`WorkerLoop` is the runtime under test.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Protocol, runtime_checkable

from simharness.runtime.effects import (
    CHOOSE,
    CHOOSE_AFTER_BATCH,
    POLL,
    Effects,
    Finished,
    Received,
    Started,
)
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

    def idle(self, timeout: float | None = None) -> Any:
        """Nothing to run: what to wait for until a message arrives (or `timeout` seconds have
        passed, when given)."""
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


class IdleWait:
    """How an idle rank waits under mstar 0.2.1's ``wait_for_work(10)`` (worker.py:3089), for
    both worker mains (`worker_main`, the real stack's restated loop).

    It waits for a message, but at most `poll_s` where a poll of its StreamBuffers would find a
    chunk (a stream item routed on the rank itself wakes nothing); a bounded wait that ended
    with no message is not repeated until `heard` (a message read, a batch started): the poll
    after it started nothing, and mstar's next polls, every 10 ms, change nothing until then (a
    run whose request hangs with a chunk held would otherwise never fall quiet). Woken, it waits
    `wake_s` more for the rest of the burst. `poll_s` 0: always for a message."""

    def __init__(self, poll_s: float, wake_s: float) -> None:
        self.poll_s = poll_s
        self.wake_s = wake_s
        self._in_vain = False

    def heard(self) -> None:
        """Something changed the rank's state: a bounded wait may be worth it again."""
        self._in_vain = False

    def wait(self, port: WorkerPort, stream_ready: Callable[[], bool]) -> Generator[Any, Any, None]:
        bounded = bool(self.poll_s) and not self._in_vain and stream_ready()
        yield port.idle(self.poll_s) if bounded else port.idle()
        self._in_vain = bounded  # until `heard`
        if self.wake_s:
            yield port.wait(self.wake_s)


def worker_main(loop: Any, port: WorkerPort) -> Generator[Any, Any, None]:
    """Rank `loop.rank`'s main loop over `port`, until the port stops. `loop` is anything with
    `WorkerLoop`'s door (``handle_stimulus``)."""
    door = loop.handle_stimulus
    apply = port.apply
    policy = getattr(loop, "policy", None)
    choose_first = policy is not None and policy.choose_first
    idle = IdleWait(policy.idle_poll_ms * 1e-3 if policy is not None else 0.0,
                    policy.wake_us * 1e-6 if policy is not None else 0.0)
    arrived = [False]

    def handle(msgs: list[Any]) -> None:
        arrived[0] = True
        idle.heard()
        apply(door(Received(msgs=msgs), port.now()))

    def choose(stimulus: Any = CHOOSE) -> Batch | None:
        chose = door(stimulus, port.now())
        apply(chose)
        batch: Batch | None = chose.batch
        port.chosen(batch)
        return batch

    batch: Batch | None = None
    while not port.stopped:
        if batch is None:
            port.receive(handle)
            if port.stopped:
                return
            batch = choose()
            if batch is None:
                yield from idle.wait(port, loop.stream_ready)
                continue
        # Under mstar 0.2.1's loop (`LoopPolicy.choose_first`) a launched batch sends the loop
        # back to its top while it runs: what came in is read and the StreamBuffers polled once
        # it has started, whichever way it was chosen (worker.py:2776-2810). A TP batch is in
        # flight from its submit: its collective runs inside the forward, on the GPU, so that
        # read comes before the other ranks of its instance have joined. The reference starts
        # a TP batch, and reads nothing, only once the instance has met.
        duration = port.duration(batch)
        met_first = batch.instance and not choose_first
        if met_first:
            yield port.collective(batch)
        apply(door(Started(batch=batch, duration=duration), port.now()))
        idle.heard()
        if choose_first:
            port.receive(handle)
            apply(door(POLL, port.now()))
        if batch.instance and not met_first:
            yield port.collective(batch)
        yield port.execute(batch, duration)
        if port.stopped:
            return
        port.finished(door(Finished(batch=batch), port.now()))
        if not choose_first:
            batch = None
            continue
        # mstar 0.2.1 (worker.py:3070-3091): the next batch is chosen at once, without a poll;
        # with none, the rank waits for work unless messages are already waiting
        batch = choose(CHOOSE_AFTER_BATCH)
        if batch is None:
            arrived[0] = False
            port.receive(handle)
            if not arrived[0] and not port.stopped:
                yield from idle.wait(port, loop.stream_ready)


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
