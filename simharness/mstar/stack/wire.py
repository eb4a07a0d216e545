"""mstar's messages on our links, and its tensors on an in-memory wire.

* `StackMessage`: one mstar control message as our network carries it: its pickled bytes (mstar's
  ZMQ communicator sends with ``send_pyobj``, communicator.py:134-172, so a receiver never shares
  an object with its sender), the mstar entity it is addressed to, and its kind and request for
  the schedule faults, which select messages by kind (``faults[].message``).
* `Mailbox`: what mstar's ``make_communicator`` returns here (the ``BaseCommunicator`` methods the
  worker and the conductor call). Sends go to the stack's outbox, which the entity's door hands
  to the driver as `Send`s; what arrives is unpickled into the inbox the entity drains.
* `TensorWire` and `WireTensorManager`: the tensor transport. `WireTensorManager` subclasses
  mstar's ``TensorCommunicationManager`` (communication/tensors.py:344), so the tensor store, the
  reference counts, ``get_ready_tensors`` (acks, fan-in) and cleanup are mstar's; only the three
  transport hooks it leaves abstract are ours, with the semantics of its SHM transport
  (tensors.py:1093-1208: publish at ``register_for_send``, a synchronous read, +2 references on a
  remote read and +1 on a local one) over a dict instead of /dev/shm files.
"""

from __future__ import annotations

import pickle
from typing import Any

import msgspec
import torch
from mstar.communication.communicator import BaseCommunicator
from mstar.communication.tensors import FutureAndPointers, TensorCommunicationManager


class StackMessage(msgspec.Struct, frozen=True, kw_only=True, eq=False, gc=False):
    #: the mstar entity it goes to (``worker_0``, ``conductor``, ``api_server``, ...)
    entity: str
    #: mstar's message type (``input_signals``, ``stop_loops``, ...), for faults and reports
    kind_name: str
    rid: str
    #: the message, pickled
    data: bytes

    def open(self) -> Any:
        """The message itself: a new object on every call, as a socket receive makes one."""
        return pickle.loads(self.data)


def kind_of(msg: Any) -> str:
    """mstar's name for a message's type (its ``message_type`` value)."""
    kind = getattr(msg, "message_type", None)
    return str(getattr(kind, "value", kind) or type(msg).__name__)


def rid_of(msg: Any) -> str:
    return str(getattr(getattr(msg, "body", None), "request_id", "") or "")


class Mailbox(BaseCommunicator):
    """One mstar entity's communicator: `send` queues a `StackMessage` on the stack's outbox
    (``outbox(sender, message, the message object)``); `deliver` puts what arrived in the
    inbox."""

    def __init__(self, my_id: str, outbox: Any) -> None:
        self.my_id = my_id
        self._outbox = outbox
        self.inbox: list[Any] = []
        self.event: Any = None

    def send(self, entity_id: str, msg: Any) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        self._outbox(self.my_id, StackMessage(entity=entity_id, kind_name=kind_of(msg),
                                              rid=rid_of(msg), data=data), msg)

    def deliver(self, message: StackMessage) -> None:
        self.inbox.append(message.open())

    def get_all_new_messages(self, blocking: bool = False, timeout_s: float | None = None) -> list[Any]:
        msgs, self.inbox = self.inbox, []
        return msgs

    def register_event_for_poll(self, event: Any) -> None:
        self.event = event

    def wait_for_work(self, timeout_ms: int = 50) -> None:
        # The stack's main loops wait in virtual time themselves (a rank idles until a message
        # arrives); only TP async scheduling, which the stack does not run, calls this.
        pass

    def poll_for_messages(self, timeout_ms: int = 20) -> bool:
        return bool(self.inbox)


class TensorWire:
    """The shared medium tensors are published on (what /dev/shm is to the SHM transport)."""

    def __init__(self) -> None:
        self.published: dict[str, tuple[str, torch.Tensor]] = {}
        #: (reader, owner, uuid) of every read of a tensor that was not published (freed early)
        self.missing: list[tuple[str, str, str]] = []

    def publish(self, entity: str, uuid: str, tensor: torch.Tensor) -> None:
        self.published[uuid] = (entity, tensor.detach().clone())

    def read(self, reader: str, entity: str, uuid: str) -> torch.Tensor | None:
        got = self.published.get(uuid)
        if got is None or got[0] != entity:
            self.missing.append((reader, entity, uuid))
            return None
        return got[1].clone()

    def unpublish(self, entity: str, uuid: str) -> None:
        got = self.published.get(uuid)
        if got is not None and got[0] == entity:
            del self.published[uuid]


class WireTensorManager(TensorCommunicationManager):
    """mstar's TensorCommunicationManager over a `TensorWire` (see the module docstring)."""

    def __init__(self, my_entity_id: str, wire: TensorWire, communicator: BaseCommunicator,
                 device: Any = "cpu") -> None:
        super().__init__(my_entity_id=my_entity_id, my_session_id=f"sim:{my_entity_id}",
                         device=str(device), communicator=communicator, transfer_engine=None,
                         enable_prof=False)
        self.wire = wire
        self._published: set[str] = set()

    def register_for_send(self, request_id: str, tensor_infos: list[Any],
                          skip_cuda_sync: bool = False) -> None:
        store = self.tensor_store
        for info in tensor_infos:
            if store.is_registered(request_id, info.uuid) or not store.check_uuid_presence(
                    request_id, info.uuid):
                continue
            self.wire.publish(self.my_entity_id, info.uuid, store.get_tensor(request_id, info.uuid))
            self._published.add(info.uuid)
            store.set_metadata(request_id, info.uuid, mem_registered=True)

    def start_read_tensors(self, request_id: str, graph_edges: list[Any],
                           graph_walk: str | None = None) -> list[Any]:
        store = self.tensor_store
        for edge in graph_edges:
            if not edge.tensor_info:
                continue
            for info in edge.tensor_info:
                if info.source_entity == self.my_entity_id:
                    # One of our own tensors coming back (a persisted output handed out again):
                    # the base class's TP slicing hook, then a reference for the consuming node.
                    self._slice_existing_tensor(request_id=request_id, name=edge.name,
                                                next_node=edge.next_node, graph_walk=graph_walk,
                                                info=info)
                    store.increment_ref(request_id, info.uuid, 1)
                elif store.check_uuid_presence(request_id, info.uuid):
                    store.increment_ref(request_id, info.uuid, 1)
                else:
                    tensor = self.wire.read(self.my_entity_id, info.source_entity, info.uuid)
                    if tensor is None:
                        raise RuntimeError(f"{self.my_entity_id}: tensor {info.uuid} of "
                                           f"{info.source_entity} is not on the wire (freed "
                                           f"before it was read)")
                    store.put_tensor(request_id, info.uuid, tensor)
                    # one reference for the transit (get_ready_tensors drops it), one for the node
                    store.increment_ref(request_id, info.uuid, 2)
            # a synchronous read: ready at the next get_ready_tensors
            self.pending.append(FutureAndPointers(future=None, graph_edges=[edge],
                                                  request_id=request_id))
        return []

    def _cleanup_by_uuid(self, request_id: str, uuid: str) -> None:
        super()._cleanup_by_uuid(request_id, uuid)
        if uuid in self._published:
            self._published.discard(uuid)
            self.wire.unpublish(self.my_entity_id, uuid)
        self.tensor_store.remove_tensor(request_id, uuid)

    def live_tensors(self) -> dict[str, int]:
        """rid -> tensors still held for it (the drain check's question at the end)."""
        return {rid: len(t) for rid, t in self.tensor_store.per_req_tensors.items() if t}


__all__ = ["Mailbox", "StackMessage", "TensorWire", "WireTensorManager", "kind_of", "rid_of"]
