"""Independent tasks run in this process, on a local Dask cluster, or on an existing one.

Fuzz campaigns (`explore.campaign`) and sweeps (`sweep`) hand their tasks to a `Pool`: with one
worker and no scheduler everything runs here, in order, and Dask is never imported; with
``--workers N`` a LocalCluster of N single-threaded worker processes runs them; with
``--scheduler ADDR`` the cluster behind that scheduler does. Results always come back in the
order the tasks were given, so what a caller builds from them does not depend on which worker
finished first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: how to install what --workers and --scheduler need: the dask extra
DASK_INSTALL = "pip install 'simharness[dask]'"
#: seconds to wait for a --scheduler to answer; None: dask's own setting
#: (distributed.comm.timeouts.connect, 30 s unless configured)
CONNECT_TIMEOUT_S: float | None = None


def _connect(scheduler: str) -> Any:
    """A client of the Dask scheduler at `scheduler`; one that cannot be reached (nothing
    listens there, an address dask cannot read) is a usage error naming the flag."""
    from dask.distributed import Client

    from simharness.errors import UsageError

    try:
        timeout = {} if CONNECT_TIMEOUT_S is None else {"timeout": CONNECT_TIMEOUT_S}
        return Client(scheduler, **timeout)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--scheduler {scheduler}: cannot connect: {exc}") from None


class Pool:
    """Where tasks run. A task is a module-level function and a picklable argument."""

    def __init__(self, workers: int = 1, scheduler: str | None = None) -> None:
        self.client: Any = None
        self.cluster: Any = None
        self.workers = max(1, workers)
        if scheduler or self.workers > 1:
            try:
                from dask.distributed import Client, LocalCluster
            except ImportError:  # pragma: no cover - depends on the environment
                from simharness.errors import UsageError
                raise UsageError(f"--workers N > 1 and --scheduler need dask[distributed] "
                                 f"({DASK_INSTALL})") from None
            if scheduler:
                self.client = _connect(scheduler)
                self.workers = max(1, len(self.client.scheduler_info().get("workers", {})))
            else:
                # ":0": the dashboard on any free port; the default 8787 may be taken by another
                # cluster on the machine, which fails the start.
                self.cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1,
                                            processes=True, dashboard_address=":0")
                self.client = Client(self.cluster)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def ordered(self, fn: Callable[[Any], Any], items: Iterable[Any],
                deadline: float | Callable[[], float | None] | None = None) -> Iterator[Any]:
        """``fn(item)`` for each item, yielded in item order. No new task starts once `deadline`
        (a `time.perf_counter` value, or a function returning one, asked before each task: a
        deadline that moves) has passed; tasks already started finish and are yielded.
        On a cluster at most two tasks per worker are in flight, so a long or endless `items`
        is read only as fast as the workers take it."""
        it = iter(items)

        def passed() -> bool:
            at = deadline() if callable(deadline) else deadline
            return at is not None and time.perf_counter() >= at

        if self.client is None:
            while not passed():
                item = next(it, _END)
                if item is _END:
                    return
                yield fn(item)
            return
        from dask.distributed import wait

        pending: dict[int, Any] = {}
        ready: dict[int, Any] = {}
        next_in = next_out = 0
        exhausted = False
        while True:
            while not exhausted and len(pending) < 2 * self.workers and not passed():
                item = next(it, _END)
                if item is _END:
                    exhausted = True
                    break
                pending[next_in] = self.client.submit(fn, item, pure=False)
                next_in += 1
            if not pending:
                return
            done, _ = wait(list(pending.values()), return_when="FIRST_COMPLETED")
            for idx in [i for i, fut in pending.items() if fut in done]:
                ready[idx] = pending.pop(idx).result()
            while next_out in ready:
                yield ready.pop(next_out)
                next_out += 1
            if passed():
                exhausted = True

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        """``[fn(item) for item in items]``, spread over the workers."""
        if self.client is None or len(items) < 2:
            return [fn(x) for x in items]
        return self.client.gather(self.client.map(fn, items, pure=False))


_END = object()
