"""`Stack`: one run's real mstar objects, built as mstar builds them, on our clock and links.

The real ``Conductor`` is constructed from the scenario's model (`model.ScenarioModel`) and a
config written from the scenario's placement: its ``__init__`` reads the config, asks the model
for its sharding config and worker graphs (mstar's own ``_divide_into_worker_graphs``), assigns
TP ranks and derives each worker's share. Where it would spawn one process per worker
(``_launch_workers``, conductor.py:431-466) it hands the stack the arguments each process would
get; the stack builds each real ``Worker`` from a pickle round trip of exactly those (what the
spawn context does), on the CPU, with mstar's own parallel groups (only their
``torch.distributed`` set-up is skipped). The API server's two entities are ours
(`api.ApiSide`).

Then the start-up handshake runs at time zero as mstar runs it: every worker warms its engine
up and reports SETUP_DONE, the conductor's ``_wait_for_workers_ready`` (conductor.py:1314-1332,
restated in `conductor.startup`) waits for all of them and tells the API server.

The stack is also what `seams` asks while mstar's code runs: the virtual time (`now`), the
deterministic ids (`counters`), the communicators (one `wire.Mailbox` per entity), the tensor
transport and the fake engines. Messages an entity sends wait in the stack's outbox until that
entity's door hands them to the driver.
"""

from __future__ import annotations

import logging
import pickle
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from simharness.errors import RuntimeRefused
from simharness.mstar.stack import seams
from simharness.mstar.stack.engine import FakeEngine
from simharness.mstar.stack.model import ScenarioModel
from simharness.mstar.stack.wire import Mailbox, StackMessage, TensorWire, WireTensorManager
from simharness.placement.layout import Layout
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID, Send

#: mstar's entity names for the conductor and the API server's two processes
CONDUCTOR = "conductor"
API_SERVER = "api_server"
API_PREPROCESS = "api_server_preprocess_worker"
#: mstar's config asks for a sequence length cap; nothing here reads it
MAX_SEQ_LEN = 4096


def worker_id(rank: int) -> str:
    return f"worker_{rank}"


def _where_raised(exc: BaseException) -> str:
    """``IndexError: list index out of range (mstar/distributed/communication.py:421)``: an
    exception out of mstar's code, with the innermost line of mstar's that raised it."""
    tb, where = exc.__traceback__, ""
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if "/mstar/" in path:
            where = f"mstar/{path.rsplit('/mstar/', 1)[1]}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"{type(exc).__name__}: {exc}" + (f" ({where})" if where else "")


class Stack:
    def __init__(self, layout: Layout, nodes: FakeNodes) -> None:
        from mstar.conductor.conductor import Conductor
        from mstar.worker.worker import Worker

        self.layout = layout
        self.scenario = layout.scenario
        self.nodes = nodes
        #: the virtual time, set by whichever door is running mstar's code
        self.now = 0.0
        self.counters = seams.Counters()
        self.wire = TensorWire()
        self.mailboxes: dict[str, Mailbox] = {}
        self.tensor_managers: dict[str, WireTensorManager] = {}
        self.engines: dict[str, FakeEngine] = {}
        #: endpoint -> sends waiting for its door (`take_sends`)
        self._outbox: dict[int, list[Send]] = {}
        #: worker id -> the arguments its process would have been spawned with
        self._worker_kwargs: dict[str, dict[str, Any]] = {}
        #: calls of the unguarded NVTX pop (seams), for the note that reports them
        self.nvtx_pops = 0
        #: a streamed item's tensor id -> its producer's sequence number (the streams check
        #: names items by it)
        self.stream_items: dict[str, int] = {}
        seams.install()
        seams.activate(self)
        # mstar logs its errors with tracebacks; the stack reports them as trace events instead
        logging.getLogger("mstar").setLevel(logging.CRITICAL + 1)
        seed = self.scenario.seed
        # Conductor._assign_worker_graphs_to_workers draws its replicas with np.random
        # (conductor.py:511, 517), answered by `replica_draw`; mstar's other draws use random and
        # torch, seeded here.
        np.random.seed(seed % 2**32)
        random.seed(seed)
        torch.manual_seed(seed)
        self.model = ScenarioModel(layout)
        with tempfile.TemporaryDirectory(prefix="simharness-mstar-") as tmp:
            config = Path(tmp) / "config.yaml"
            config.write_text(yaml.safe_dump(self._config(), sort_keys=False), encoding="utf-8")
            try:
                self.conductor = Conductor(self.model, str(config),
                                           socket_path_prefix=str(Path(tmp) / "sock"))
            except Exception as exc:  # mstar's own start-up code: its error, said as one line
                raise RuntimeRefused(f"runtime mstar: mstar-ai's Conductor refuses this layout "
                                     f"at start-up: {_where_raised(exc)}") from None
        self.workers: dict[int, Any] = {}
        for wid, kwargs in self._worker_kwargs.items():
            kw = pickle.loads(pickle.dumps(kwargs))  # what the spawn context does to them
            groups = kw["parallel_groups"]
            groups.init_dist = _no_dist(groups)
            kw["device"] = torch.device("cpu")
            worker = self.workers[int(wid.split("_")[1])] = Worker(**kw)
            _without_eventfd(worker)
        #: mstar's worker graph id -> ours (mstar names them wg0, wg1, ... here; ours say the walk)
        self.wg_ours = self._match_worker_graphs()
        #: the run's replica pick, `choose_replica(n)` (given by the driver with the conductor)
        self.choose_replica: Any = lambda n: 0
        self._replica_answers: list[int] = []

    def _config(self) -> dict[str, Any]:
        """The scenario's placement as an mstar config file says it."""
        pl = self.scenario.placement
        groups = []
        for g in pl.node_groups:
            entry: dict[str, Any] = {"node_names": list(g.node_names), "ranks": list(g.ranks)}
            if g.graph_walks is not None:
                entry["graph_walks"] = list(g.graph_walks)
            if g.tp_size > 1:
                entry["tp_size"] = g.tp_size
            if g.sp_size > 1:
                entry["sp_size"] = g.sp_size
            groups.append(entry)
        out: dict[str, Any] = {"max_seq_len": MAX_SEQ_LEN, "node_groups": groups}
        if pl.max_concurrent_requests is not None:
            out["max_concurrent_requests"] = pl.max_concurrent_requests
        return out

    def _match_worker_graphs(self) -> dict[str, str]:
        """mstar's worker graphs are divided as ours are (the placement check of the mstar
        wing holds the rule to it): match them by walk and node set."""
        ours = {(wg.walk, frozenset(wg.node_names)): wg.id for wg in self.layout.worker_graphs}
        out = {}
        for wg_id, wg in self.conductor.worker_graphs.items():
            walk = next(iter(wg.graph_walks))
            key = (walk, frozenset(wg.section.get_nodes()))
            if key not in ours:
                raise RuntimeError(f"mstar's worker graph {wg_id} ({walk}: {sorted(key[1])}) is "
                                   f"none of simharness's layout")
            out[wg_id] = ours[key]
        return out

    # -- what `seams` asks for while mstar's code runs ------------------------------------------

    def replica_draw(self, n: int) -> int:
        """``np.random.randint(n)`` in ``Conductor._assign_worker_graphs_to_workers``
        (conductor.py:503-520), which draws once per worker graph, in its order, and keeps a
        node group's first draw. The answers are the run's own placement draws, one per node
        group as the model takes them (`Layout.assign`), so that both pick the same replicas:
        any pick is one mstar's random draw could make."""
        if not self._replica_answers:
            chosen = self.layout.assign(self.choose_replica).wg_ranks
            self._replica_answers = [self._replica_index(wg_id, chosen[ours])
                                     for wg_id, ours in self.wg_ours.items()]
        answer = self._replica_answers.pop(0)
        if not 0 <= answer < n:
            raise RuntimeError(f"replica draw: {answer} is not below {n}")
        return answer

    def _replica_index(self, wg_id: str, ranks: tuple[int, ...]) -> int:
        """Which of mstar's replicas of worker graph `wg_id` holds `ranks`."""
        wg = self.conductor.worker_graphs[wg_id]
        options = [tuple(r) for r in wg._instance_ranks] or [(r,) for r in wg.ranks]
        return options.index(tuple(ranks))


    def launch_workers(self, conductor: Any) -> None:
        """``Conductor._launch_workers``: keep each worker's spawn arguments (conductor.py:434-459)."""
        for wid in conductor.worker_ids:
            self._worker_kwargs[wid] = dict(
                worker_id=wid,
                worker_ids=conductor.worker_ids,
                my_worker_graphs=conductor._per_worker_graphs[wid],
                model_config=conductor.model_config,
                all_worker_graph_ids_to_graph_walks=conductor._all_worker_graph_ids_to_graph_walks,
                all_worker_graph_ids_to_nodes=conductor._all_worker_graph_ids_to_nodes,
                all_worker_graph_ids_to_dyn_loops=conductor._all_worker_graph_ids_to_dyn_loops,
                sharding_config=conductor.per_worker_sharding_config[wid],
                parallel_groups=conductor.parallel_config.per_worker_config[wid],
                hostname=conductor.hostname,
                socket_path_prefix=conductor.socket_path_prefix,
                dist_init_method=conductor._dist_init_method,
                model=conductor.model,
                enable_nvtx=conductor.enable_nvtx,
                enable_prof=conductor.enable_prof,
                device="cpu",
                tensor_comm_protocol=conductor.tensor_comm_protocol,
                tcp_transfer_device=conductor.tcp_transfer_device,
            )

    def make_communicator(self, *args: Any, **kwargs: Any) -> Mailbox:
        return self.mailbox(kwargs["my_id"])

    def mailbox(self, entity: str) -> Mailbox:
        box = self.mailboxes.get(entity)
        if box is None:
            box = self.mailboxes[entity] = Mailbox(entity, self._post)
        return box

    def make_tensor_manager(self, protocol: Any, my_entity_id: str, hostname: str, device: Any,
                            communicator: Any, **kwargs: Any) -> WireTensorManager:
        return self.tensor_manager(my_entity_id, communicator, device)

    def tensor_manager(self, entity: str, communicator: Any, device: Any = "cpu") -> WireTensorManager:
        tm = self.tensor_managers[entity] = WireTensorManager(entity, self.wire, communicator, device)
        return tm

    def build_engine_manager(self, node_names: Any, device: Any, model_config: Any,
                             parallel_groups: Any, transfer_engine_info: Any, model: Any,
                             enable_nvtx: bool = False, enable_prof: bool = False) -> Any:
        from mstar.worker.engine_manager import EngineManager

        engine = FakeEngine(set(node_names), self.scenario, self.nodes)
        self.engines[transfer_engine_info.my_entity_id] = engine
        return EngineManager(engine=engine, node_names=set(node_names))

    def range_pop(self, *args: Any, **kwargs: Any) -> None:
        self.nvtx_pops += 1

    def free_tcp_port(self) -> int:
        return 29500

    # -- messages --------------------------------------------------------------------------------

    def endpoint(self, entity: str) -> int:
        """Our endpoint of an mstar entity: a rank; the conductor's, which also hosts the API's
        preprocess worker (it hands the conductor each request and answers its teardown); or
        the client's, the API server that reads the outputs."""
        if entity.startswith("worker_"):
            return int(entity[len("worker_"):])
        if entity in (CONDUCTOR, API_PREPROCESS):
            return CONDUCTOR_ID
        return CLIENT_ID

    def _post(self, sender: str, message: StackMessage, msg: Any) -> None:
        self._outbox.setdefault(self.endpoint(sender), []).append(
            Send(self.endpoint(message.entity), self._payload(msg), message))

    def _payload(self, msg: Any) -> int:
        """The bytes a message's tensors would carry: the scenario's payload sizes of the edges
        it hands over with tensors (control framing is the network's)."""
        body = getattr(msg, "body", None)
        edges = getattr(body, "inputs", None) or getattr(body, "initial_inputs", None) or ()
        return sum(self.scenario.payload_bytes(e.name) for e in edges if getattr(e, "tensor_info", None))

    def take_sends(self, endpoint: int) -> list[Send]:
        """What `endpoint` sent since it was last asked, ordered by destination (each
        destination's own in the order sent: FIFO per link holds). mstar sends to several
        workers by iterating sets of worker ids (a TP leader's followers, worker.py:497-512; a
        replicated fan-out's workers, distributed/base.py), whose order is Python's string hash
        order and changes with PYTHONHASHSEED; in this order the run, its jitter draws
        included, is the same in every process."""
        return sorted(self._outbox.pop(endpoint, []), key=lambda s: s.dst)

    def deliver(self, message: StackMessage) -> None:
        """A message arrived for an mstar entity: into its communicator's inbox, unpickled."""
        self.mailbox(message.entity).deliver(message)

    def enter(self, now: float) -> None:
        """A door is about to run mstar's code at `now`."""
        self.now = now
        seams.activate(self)


def _no_dist(groups: Any) -> Any:
    """Stands in for ``WorkerParallelGroups.init_dist`` (distributed/communication.py:254-309) on
    one worker's groups: no process group; the comm groups are marked ready."""

    def init_dist(init_method: str | None = None, device: Any = None) -> None:
        groups._device = device
        for group in list(groups.node_to_tp_group.values()) + list(groups.node_to_sp_group.values()):
            group.initialized = True

    return init_dist



class _Wakeup:
    """What a worker's ``wakeup_event`` is asked here (register futures, drain), without the
    file descriptor of mstar's ``EventWakeup`` (communication/event.py)."""

    fd = -1

    def register_future(self, future: Any) -> None:
        pass

    def register_futures(self, futures: Any) -> None:
        pass

    def drain(self) -> None:
        pass


def _without_eventfd(worker: Any) -> None:
    """mstar's ``EventWakeup`` opens an eventfd per worker and never closes it: one worker lives
    for a whole process there, while a campaign here builds thousands, and ran out of file
    descriptors. It only wakes a blocking poll, which the restated loop never makes, so the
    worker gets `_Wakeup` instead and the eventfd is closed at once."""
    import os

    real = worker.wakeup_event
    worker.wakeup_event = _Wakeup()
    worker.communicator.register_event_for_poll(worker.wakeup_event)
    os.close(real.event)

__all__ = ["API_PREPROCESS", "API_SERVER", "CONDUCTOR", "Stack", "worker_id"]
