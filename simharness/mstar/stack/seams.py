"""Where our run meets mstar-ai's code: the names its modules read that we stand in for.

mstar's worker and conductor reach outside their own logic through a few module-level names: a
communicator factory (ZMQ sockets), a tensor transport, an engine builder (weights, CUDA), the
wall clock (``time``, ``_time``, ``sleep``), ``uuid4`` (worker-graph, loop and tensor ids), an
NVTX pop, and a TCP port picker. `install` replaces each of them, once per process, by a stand-in
that asks the stack of the run in progress (`activate`): its virtual clock, its deterministic
counters, its network and engines. With no stack active every stand-in does what the name it
replaces does, so other code that imports mstar in the same process sees no difference.

Everything is an attribute swap on mstar's modules; no file of mstar is changed. The names and
the lines that read them are listed in `CLOCK_NAMES` and `UUID_NAMES` (mstar-ai 0.2.1) and pinned by
``tests/fidelity/test_mstar_stack_pins.py``.
"""

from __future__ import annotations

import importlib
import itertools
import time as _real_time
from collections.abc import Callable, MutableSet
from typing import Any
from uuid import uuid4 as _real_uuid4

#: (module, attribute): the wall-clock reads on the paths the stack drives (worker.py 429, 1321,
#: 1326, 2097, 2134, 2206, 2227; micro_scheduler.py 174, 304, 576, 637; conductor.py 686, 865,
#: 915, 934, 997, 1041 and its sleeps 1331, 1408; the tensor transports' timings)
CLOCK_NAMES = (
    ("mstar.worker.worker", "time"),
    ("mstar.worker.worker", "_time"),
    ("mstar.worker.micro_scheduler", "time"),
    ("mstar.conductor.conductor", "time"),
    ("mstar.communication.tensors", "time"),
)
#: (module, attribute, prefix): the uuid4 draws: worker-graph ids (model/base.py:66), a loop's
#: default name (graph/base.py:464), tensor ids (tensors.py:440, 580, 729)
UUID_NAMES = (
    ("mstar.model.base", "uuid4", "wg"),
    ("mstar.graph.base", "uuid4", "loop"),
    ("mstar.communication.tensors", "uuid4", "t"),
)

#: the stack whose run is in progress (set by `activate` at every entry into mstar's code)
_ACTIVE: Any = None
_INSTALLED = False
#: a wall-clock offset, so code that treats 0.0 as "never" sees a plausible monotonic clock
EPOCH = 1000.0


def activate(stack: Any) -> None:
    """Make `stack` (anything with ``now``, ``counters``, and the factories below) the one the
    stand-ins ask. A run activates its stack whenever its doors run mstar's code."""
    global _ACTIVE
    _ACTIVE = stack


def active() -> Any:
    return _ACTIVE


class _Clock:
    """Stands in for the ``time`` module inside mstar's modules: the active stack's virtual time
    (plus `EPOCH`), or the real clock."""

    def monotonic(self) -> float:
        stack = _ACTIVE
        return EPOCH + stack.now if stack is not None else _real_time.monotonic()

    perf_counter = monotonic
    time = monotonic

    def monotonic_ns(self) -> int:
        return int(self.monotonic() * 1e9)

    perf_counter_ns = monotonic_ns
    time_ns = monotonic_ns

    def sleep(self, seconds: float) -> None:
        # mstar sleeps only in its main loops' error back-off and its poll cadence, which the
        # stack restates in virtual time; a real sleep here would only slow the run down.
        if _ACTIVE is None:
            _real_time.sleep(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(_real_time, name)


class _Label:
    """What ``uuid4()`` returns under the stand-in: a stable, readable id (``str`` and ``hex``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text

    @property
    def hex(self) -> str:
        return self.text


class Counters:
    """Deterministic ids for one run: ``wg0, wg1, ...``, ``loop0, ...``, ``t0, ...``."""

    def __init__(self) -> None:
        self._n: dict[str, itertools.count[int]] = {}

    def next(self, prefix: str) -> _Label:
        counter = self._n.setdefault(prefix, itertools.count())
        return _Label(f"{prefix}{next(counter)}")


def _uuid(prefix: str) -> Callable[[], Any]:
    def uuid4() -> Any:
        stack = _ACTIVE
        return stack.counters.next(prefix) if stack is not None else _real_uuid4()

    return uuid4


def _forward(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in that calls the active stack's factory `name`, or the original outside a run."""

    def call(*args: Any, **kwargs: Any) -> Any:
        stack = _ACTIVE
        if stack is None:
            return original(*args, **kwargs)
        return getattr(stack, name)(*args, **kwargs)

    call.__name__ = f"stack_{name}"
    return call


def install() -> None:
    """Put every stand-in in place (once per process; idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    clock = _Clock()
    for mod, attr in CLOCK_NAMES:
        setattr(importlib.import_module(mod), attr, clock)
    worker: Any = importlib.import_module("mstar.worker.worker")
    worker.sleep = clock.sleep
    for mod, attr, prefix in UUID_NAMES:
        setattr(importlib.import_module(mod), attr, _uuid(prefix))
    conductor: Any = importlib.import_module("mstar.conductor.conductor")
    for module in (worker, conductor):
        module.make_communicator = _forward("make_communicator", module.make_communicator)
    worker.create_tensor_communication_manager = _forward(
        "make_tensor_manager", worker.create_tensor_communication_manager)
    # worker.py:2179-2181 pops an NVTX range without the ``if self.enable_nvtx`` guard every other
    # pop has. A CPU build of torch raises there ("NVTX functions not installed") and the worker
    # fails the request; a CUDA build's pop of an empty stack returns -1. The stand-in does what a
    # GPU machine does, and counts the calls.
    worker.range_pop = _forward("range_pop", worker.range_pop)
    # It binds a real socket to pick a port that only names the NCCL store, never opened here.
    conductor._pick_free_tcp_port = _forward("free_tcp_port", conductor._pick_free_tcp_port)
    conductor.Conductor._launch_workers = _launch_workers(conductor.Conductor._launch_workers)
    worker.EngineManager = _engine_manager(worker.EngineManager)
    # conductor.py:511, 517 draw a request's replicas with np.random.randint: the run's own
    # placement draws answer them (`Stack.replica_draw`)
    conductor.np = _NumpyForConductor(conductor.np)
    graph = importlib.import_module("mstar.graph.base")
    graph.WorkerGraphStateRegistry.__init__ = _ordered_ready_sets(
        graph.WorkerGraphStateRegistry.__init__)
    graph_io = importlib.import_module("mstar.graph.graph_io")
    graph_io.WorkerGraphIO.ingest_for_speculation = _speculation_in_edge_order(
        graph_io.WorkerGraphIO.ingest_for_speculation)
    _INSTALLED = True


class _RandomForConductor:
    def __init__(self, real: Any) -> None:
        self._real = real

    def randint(self, *args: Any, **kwargs: Any) -> Any:
        stack = _ACTIVE
        if stack is None or kwargs or len(args) != 1:
            return self._real.randint(*args, **kwargs)
        return stack.replica_draw(int(args[0]))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _NumpyForConductor:
    """numpy as ``mstar.conductor.conductor`` sees it: itself, but for ``random.randint``."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.random = _RandomForConductor(real.random)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class NameSet(MutableSet):
    """A set of names that iterates in insertion order (a dict's keys)."""

    __slots__ = ("_d",)

    def __init__(self, items: Any = ()) -> None:
        self._d = dict.fromkeys(items)

    def __contains__(self, x: object) -> bool:
        return x in self._d

    def __iter__(self) -> Any:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def add(self, x: Any) -> None:
        self._d[x] = None

    def discard(self, x: Any) -> None:
        self._d.pop(x, None)

    def clear(self) -> None:
        self._d.clear()

    def __repr__(self) -> str:
        return "{" + ", ".join(map(repr, self._d)) + "}"


def _ordered_ready_sets(original: Callable[..., Any]) -> Callable[..., Any]:
    def init(registry: Any, *args: Any, **kwargs: Any) -> None:
        original(registry, *args, **kwargs)
        if _ACTIVE is not None:
            registry.ready_names = NameSet()
            registry.ready_next_iter = NameSet()

    return init


def _speculation_in_edge_order(original: Callable[..., Any]) -> Callable[..., Any]:
    """``WorkerGraphIO.ingest_for_speculation`` (graph_io.py:107-148) collects the destinations
    in a set and the worker speculates on the first (worker.py:1786-1788, a TODO says a tie-break
    is missing): with several ready, which one runs ahead follows the process's string hashing.
    In a run they come in the order the completion's edges name them, as ready sets keep
    insertion order (`NameSet`)."""

    def ingest(io: Any, edges: Any, source_node: str) -> Any:
        found = original(io, edges, source_node)
        if _ACTIVE is None or len(found) < 2:
            return found
        order: dict[str, int] = {}
        for edge in edges:
            order.setdefault(edge.next_node, len(order))
        return sorted(found, key=lambda info: order.get(info.node_name, len(order)))

    return ingest


def _launch_workers(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Conductor._launch_workers`` (conductor.py:431-466) spawns one process per worker; in a
    run it hands the stack, per worker, the arguments it would give that process instead."""

    def launch(conductor: Any) -> None:
        stack = _ACTIVE
        if stack is None:
            return original(conductor)
        stack.launch_workers(conductor)

    return launch


def _engine_manager(real: Any) -> type:
    """mstar's ``EngineManager`` with a ``build`` (engine_manager.py:25-99: submodules, weights,
    CUDA) that asks the active stack for its fake engine instead."""
    original_build = real.build

    class StackEngineManager(real):
        @staticmethod
        def build(*args: Any, **kwargs: Any) -> Any:
            stack = _ACTIVE
            if stack is None:
                return original_build(*args, **kwargs)
            return stack.build_engine_manager(*args, **kwargs)

    StackEngineManager.__name__ = real.__name__
    StackEngineManager.__qualname__ = real.__qualname__
    return StackEngineManager


__all__ = ["CLOCK_NAMES", "EPOCH", "UUID_NAMES", "Counters", "activate", "active", "install"]
