"""Sockets of the real backend: one PULL socket bound per endpoint, PUSH sockets to peers opened
on first use (mstar's control mesh, reference/mstar_semantics.md section 7.1).

Addresses are ``ipc://<run dir>/<endpoint>.ipc`` on one host (the launcher makes the run
directory and deletes it), or ``tcp://HOST:PORT+k`` from a base address given on the command
line (``--endpoints tcp://127.0.0.1:19000``): the launcher at ``PORT``, the conductor at
``PORT+1``, rank r at ``PORT+10+r``. Order is FIFO per sender and receiver, as in mstar.

A message is one metadata frame plus one frame per payload (`real_backends.wire`). The receiver
reads the metadata, learns how many payload frames follow and takes them without copying.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import zmq

from real_backends.wire import Codec, OnPayload, PayloadOf
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID

#: Queue bound per socket; far above what a scenario keeps in flight, low enough to stop a runaway.
HWM = 200_000
LINGER_MS = 500
#: the highest TCP port
MAX_PORT = 65535


def endpoint_name(ep: int) -> str:
    """The endpoint as a file name (its socket, its log) and a JSON key: ``rank0``."""
    if ep == CLIENT_ID:
        return "launcher"
    if ep == CONDUCTOR_ID:
        return "conductor"
    return f"rank{ep}"


def process_name(ep: int) -> str:
    """The endpoint's process as messages name it, as every other message names a rank:
    ``rank 0``, ``conductor``."""
    return f"rank {ep}" if ep >= 0 else endpoint_name(ep)


class Endpoints:
    """Where each endpoint's PULL socket listens."""

    def __init__(self, spec: str, run_dir: str = "") -> None:
        self.spec = spec
        self.run_dir = run_dir
        if spec == "ipc":
            if not run_dir:
                raise ValueError("ipc endpoints need a run directory")
        elif spec.startswith("tcp://"):
            host, _, port = spec[len("tcp://"):].rpartition(":")
            # isdigit alone takes other scripts' digits ("١٩٠٠٠") and superscripts ("1²")
            if not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) <= MAX_PORT:
                raise ValueError(f"--endpoints {spec!r}: expected tcp://HOST:PORT, PORT a number "
                                 f"from 1 to {MAX_PORT}")
            if host == "*":
                # Every process connects to the others at HOST; zmq cannot connect to "*".
                raise ValueError(f"--endpoints {spec!r}: the processes connect to each other at "
                                 f"HOST, and * (every interface) cannot be connected to; give an "
                                 f"address of this machine, such as 127.0.0.1")
            self.host, self.port = host, int(port)
        else:
            raise ValueError(f"--endpoints {spec!r}: expected ipc or tcp://HOST:PORT")

    def check_ports(self, eps: list[int]) -> None:
        """Refuse a PORT whose endpoints would pass the last port (tcp only): rank r listens at
        PORT+10+r, so a large layout needs room above PORT."""
        if self.spec == "ipc" or not eps:
            return
        top = max(self.port + _offset(ep) for ep in eps)
        if top > MAX_PORT:
            raise ValueError(f"--endpoints {self.spec!r}: {len(eps)} endpoints listen at ports "
                             f"{self.port} to {top}, past {MAX_PORT}; choose a PORT of at most "
                             f"{MAX_PORT - (top - self.port)}")

    def busy(self, eps: list[int]) -> list[str]:
        """The addresses among `eps`' that something else listens on already (tcp only): a port
        conflict found here is one line at once, not a child's traceback after its start-up."""
        if self.spec == "ipc":
            return []
        out = []
        for ep in eps:
            addr = self.address(ep)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                # as zmq does: a port in TIME_WAIT from an earlier run is free to use
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind((self.host, int(addr.rsplit(":", 1)[1])))
                except socket.gaierror:
                    return []  # a host this check cannot resolve: zmq will say what it thinks
                except OSError:
                    out.append(addr)
        return out

    def address(self, ep: int) -> str:
        if self.spec == "ipc":
            return f"ipc://{self.run_dir}/{endpoint_name(ep)}.ipc"
        return f"tcp://{self.host}:{self.port + _offset(ep)}"


def _offset(ep: int) -> int:
    """Endpoint `ep`'s port above PORT: the launcher, the conductor, then rank r at 10 + r."""
    return 0 if ep == CLIENT_ID else 1 if ep == CONDUCTOR_ID else 10 + ep


class Transport:
    def __init__(self, me: int, endpoints: Endpoints, codec: Codec | None = None) -> None:
        self.me = me
        self.endpoints = endpoints
        self.codec = codec or Codec()
        self.ctx = zmq.Context()
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.RCVHWM, HWM)
        self.pull.setsockopt(zmq.LINGER, 0)
        self.pull.bind(endpoints.address(me))
        self._push: dict[int, Any] = {}
        self.poller = zmq.Poller()
        self.poller.register(self.pull, zmq.POLLIN)

    def _socket_to(self, dst: int) -> Any:
        sock = self.ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.SNDHWM, HWM)
        sock.setsockopt(zmq.LINGER, LINGER_MS)
        sock.connect(self.endpoints.address(dst))
        self._push[dst] = sock
        return sock

    def send(self, dst: int, msg: Any, payload_of: PayloadOf | None = None) -> None:
        sock = self._push.get(dst) or self._socket_to(dst)
        frame = self.codec.encode_control(msg, payload_of)
        if frame is not None:  # most messages: one frame, which zmq copies before send returns
            sock.send(frame)
            return
        frames = self.codec.encode(msg, payload_of)
        if len(frames) == 1:
            sock.send(frames[0])
        else:
            sock.send_multipart(frames, copy=False)

    def wait(self, timeout_ms: int) -> bool:
        """Block until a message can be read or `timeout_ms` passes."""
        return bool(self.poller.poll(timeout_ms))

    def recv(self, on_payload: OnPayload | None = None) -> Any | None:
        """The next message, or None when none is waiting."""
        try:
            meta = self.pull.recv(zmq.NOBLOCK)
        except zmq.Again:
            return None
        return self._message_of(meta, on_payload)

    def _message_of(self, meta: bytes, on_payload: OnPayload | None) -> Any:
        """The message of metadata frame `meta`, taking the payload frames it announces."""
        if meta and meta[0] == 0:  # no payload frame follows: most messages, in one call
            return self.codec.decode_control(meta)
        n, _ = self.codec.frame_count(meta)
        frames: list[Any] = []
        # The parts of one zmq message arrive together, so a part that is not there now never
        # will: take the ones that came and let `Codec.decode` refuse a count that does not
        # match, rather than wait for ever. (Asking costs a socket option read per payload
        # frame, which a tensor's bytes dwarf.)
        pull = self.pull
        while len(frames) < n and pull.getsockopt(zmq.RCVMORE):
            frames.append(pull.recv(copy=False))
        return self.codec.decode(meta, frames, on_payload)

    def drain(self, handle: Callable[[Any], None], on_payload: OnPayload | None = None,
              limit: int = 10_000) -> int:
        """Handle every message waiting now (at most `limit`); the number handled. `recv` in a
        loop, written out: this is the path every message of a rank takes. The common control
        message (no payload frame, a typed body whose decoder is built) is decoded here in one
        call; anything else, and any body that decoder refuses, takes `_message_of`'s path,
        which names what is wrong (two Python calls per message fewer, about a tenth of a small
        message's receive; docs/performance.md)."""
        recv, message_of, noblock = self.pull.recv, self._message_of, zmq.NOBLOCK
        decoders = self.codec.control_decoders
        n = 0
        while n < limit:
            try:
                meta = recv(noblock)
            except zmq.Again:
                break
            dec = decoders.get(meta[1]) if len(meta) > 1 and meta[0] == 0 else None
            if dec is None:
                handle(message_of(meta, on_payload))
            else:
                try:
                    msg = dec.decode(meta[2:])
                except Exception:  # decoded again for the error's wording
                    msg = message_of(meta, on_payload)
                handle(msg)
            n += 1
        return n

    def close(self, linger_ms: int | None = None) -> None:
        for sock in self._push.values():
            if linger_ms is not None:
                sock.setsockopt(zmq.LINGER, linger_ms)
            sock.close()
        self.pull.close()
        self.ctx.term()
