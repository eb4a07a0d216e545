"""One OS process of a real run: a rank (a `WorkerLoop` doing real torch work) or the conductor.

``python -m real_backends.process CONFIG rank R`` / ``... CONFIG conductor``. CONFIG is the JSON
file the launcher wrote into the run directory (scenario, runtime, endpoints, device, timing).

Each process runs the same pure state machines as the simulation (the runtime under test from
the registry, `WorkerLoop`, `Conductor`) and carries out the `Send`s they return over ZMQ. Time
is the host's monotonic clock relative to the run's start (`Start.t0`), in seconds.

A rank runs the driver core's main loop (`simharness.drive.worker.worker_main`) with this
process as its port: real work for a batch's budget, the socket as the inbox; with nothing to
run, it blocks on the socket. The ranks of a TP instance meet twice per lockstep batch
(`Lockstep` messages), before the work and after it, as the collectives inside mstar's TP
forward hold them; runtime messages that arrive meanwhile wait, as they would in the socket
during the work. Trace events are shipped to the launcher after every step (`EventBatch`), so a
rank killed mid-run has already reported everything up to its last step. A process whose
launcher disappears exits on its own (it is started through
`real_backends.teardown.child_main`, which ties it to its launcher before anything is imported).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
from typing import Any

import zmq

from real_backends import control as ctl
from real_backends.transport import Endpoints, Transport
from real_backends.wire import Payload
from simharness import events as ev
from simharness.drive.core import RequestPosition, conductor_final, rank_final
from simharness.drive.worker import worker_main
from simharness.placement.layout import Layout
from simharness.rng import RandomStreams
from simharness.run import build_runtime, with_seed
from simharness.runtime.effects import Abort, Arrived, Effects, Received, Submit
from simharness.runtime.fake_nodes import FakeNodes
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID, Send
from simharness.runtime.protocol import LoopPolicy
from simharness.runtime.rank import Completion
from simharness.scenario.loader import parse_scenario
from simharness.scenario.model import Scenario
from simharness.signals import Signal

#: How long an idle process blocks on its socket before checking that its launcher is alive.
IDLE_POLL_MS = 200


def load_config(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def scenario_from_config(cfg: dict[str, Any]) -> Scenario:
    s = cfg["scenario"]
    sc = parse_scenario(s["raw"], source=s["source"], default_name=s["name"])
    return with_seed(sc, s["seed"])


def _key(sig: Signal) -> tuple[int, int]:
    return (sig.src_rank, sig.seq)


class _Process:
    """What both kinds of process share: transport, clock, event shipping, probes."""

    def __init__(self, cfg: dict[str, Any], endpoint: int) -> None:
        self.cfg = cfg
        self.endpoint = endpoint
        self.scenario = scenario_from_config(cfg)
        self.runtime = build_runtime(self.scenario, cfg["runtime"])
        self.policy: LoopPolicy = self.runtime.policy
        self.layout = Layout.build(self.scenario)
        ep = cfg["endpoints"]
        self.transport = Transport(endpoint, Endpoints(ep["spec"], ep["run_dir"]))
        self.parent = cfg["parent_pid"]
        self.t0 = 0.0
        self.events: list[Any] = []
        self.sent = 0
        self.handled = 0
        self.probe: int | None = None
        self.running = True
        self.started = False
        #: payloads that arrived with the message being decoded, filed once it is handled
        self._arrived: list[tuple[Signal, Payload]] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def emit(self, event: Any) -> None:
        self.events.append(event)

    def flush_events(self) -> None:
        if self.events:
            batch, self.events = self.events, []
            self.transport.send(CLIENT_ID, ctl.EventBatch(endpoint=self.endpoint, events=batch))

    def carry_out(self, sends: list[Send]) -> None:
        send = self.transport.send
        payload_of = self.payload_of
        for s in sends:
            send(s.dst, s.msg, payload_of)
        self.sent += len(sends)

    def payload_of(self, sig: Signal) -> Any:
        return None

    def _on_payload(self, sig: Signal, p: Payload) -> None:
        self._arrived.append((sig, p))

    def file_arrived(self, into: dict[tuple[int, int], Any], convert: Any = None) -> None:
        """File the payloads that came with the message just decoded under their signal's
        identity (producing rank, seq), converted by `convert` if given."""
        for sig, p in self._arrived:
            into[_key(sig)] = p if convert is None else convert(p)
        self._arrived.clear()

    def launcher_alive(self) -> bool:
        return os.getppid() == self.parent

    def hello(self, device: str) -> None:
        self.transport.send(CLIENT_ID, ctl.Hello(endpoint=self.endpoint, pid=os.getpid(),
                                                 device=device))

    def control(self, msg: Any) -> bool:
        """Handle a driver message common to every process; False if it is not one."""
        if isinstance(msg, ctl.Start):
            self.t0 = msg.t0
            self.started = True
        elif isinstance(msg, ctl.Probe):
            self.probe = msg.round
        elif isinstance(msg, ctl.Shutdown):
            self.running = False
        else:
            return False
        return True

    def answer_probe(self, idle: bool) -> None:
        if self.probe is not None:
            self.flush_events()
            self.transport.send(CLIENT_ID, ctl.ProbeReply(
                round=self.probe, endpoint=self.endpoint, idle=idle, sent=self.sent,
                handled=self.handled))
            self.probe = None

    def final(self) -> ctl.Final:
        raise NotImplementedError

    def close(self) -> None:
        self.flush_events()
        self.transport.send(CLIENT_ID, self.final())
        self.transport.close()


class RankProcess(_Process):
    """A rank: the `WorkerPort` on which `drive.worker.worker_main` runs its `WorkerLoop`, with
    real tensor work in the fake nodes and a tensor store beside it."""

    def __init__(self, cfg: dict[str, Any], rank: int) -> None:
        super().__init__(cfg, rank)
        from real_backends.tensors import FakeWork, select_device

        self.rank = rank
        self.device = select_device(cfg["device"], rank)
        self.fake_nodes = FakeNodes(self.scenario)
        self.loop = self.runtime.build_worker(rank, self.layout, self.fake_nodes)
        self.work = FakeWork(self.scenario, self.device, cfg["time_scale"], cfg["compute_share"],
                             seed=self.scenario.seed * 1000 + rank)
        #: rid -> (producing rank, seq) -> the signal's tensor on this rank
        self.store: dict[str, dict[tuple[int, int], Any]] = {}
        #: rid -> this batch's result, to cut output tensors from (set while a batch finishes)
        self._results: dict[str, Any] = {}
        #: signals produced by the finishing batch that left this rank only (freed once sent)
        self._sent_only: list[tuple[str, tuple[int, int]]] = []
        #: tensors the running batch consumed (freed once its outputs are sent)
        self._consumed: list[tuple[str, tuple[int, int]]] = []
        self._pending_sends: list[Send] = []
        #: a slow_rank fault: the factor on this rank's batch budgets
        self.slow = float(cfg.get("slow_ranks", {}).get(str(rank), 1.0))
        #: (instance, leader's batch number, phase) -> the other ranks that have reached it
        self._met: dict[tuple[tuple[int, ...], int, str], set[int]] = {}
        #: in a lockstep rendezvous: runtime messages wait in `_deferred` (with their payloads)
        self._meeting = False
        self._deferred: list[tuple[Any, list[tuple[Signal, Payload]]]] = []
        self._to_free: list[tuple[str, tuple[int, int]]] = []
        #: the main loop's message handler while `receive` drains the socket
        self._handle: Any = lambda msgs: self.apply(
            self.loop.handle_stimulus(Received(msgs=msgs), self.now()))

    @property
    def stopped(self) -> bool:
        return not self.running

    # -- the tensor store ----------------------------------------------------------------------

    def _completed(self, c: Completion) -> None:
        """A node completed for one request in the finishing batch: keep a tensor for every
        output signal it routed; one that only left this rank is freed once sent."""
        result = self._results.get(c.rid)
        if result is None:
            return
        mine = self.store.setdefault(c.rid, {})
        local = {_key(sig) for sig in c.local()}
        for sig, _where in c.routes:
            k = _key(sig)
            if sig.nbytes and k not in mine:
                mine[k] = self.work.payload(result, sig.nbytes)
                if k not in local:
                    self._sent_only.append((c.rid, k))

    def emit(self, event: Any) -> None:
        self.events.append(event)
        if type(event) is ev.Removed:
            self.store.pop(event.rid, None)

    def payload_of(self, sig: Signal) -> Any:
        for mine in self.store.values():
            t = mine.get(_key(sig))
            if t is not None:
                return t
        return None

    # -- messages -----------------------------------------------------------------------------

    def _on_message(self, msg: Any) -> None:
        if self.control(msg):
            return
        if isinstance(msg, ctl.BlockedQuery):
            blocked = self.loop.blocked(msg.rid, msg.position)
            self.transport.send(CLIENT_ID, ctl.BlockedReply(round=msg.round, rank=self.rank,
                                                            rid=msg.rid, blocked=blocked))
            return
        if isinstance(msg, ctl.Lockstep):
            self._met.setdefault((tuple(msg.instance), msg.number, msg.phase), set()).add(msg.rank)
            return
        if self._meeting:
            # Handled at the next `receive`, in arrival order, as if still in the socket.
            self._deferred.append((msg, self._arrived))
            self._arrived = []
            return
        if self._arrived:
            from real_backends.tensors import tensor_from_payload

            self.file_arrived(self.store.setdefault(msg.rid, {}),
                              lambda p: tensor_from_payload(p, self.device))
        self.handled += 1
        self._handle([msg])

    # -- WorkerPort ---------------------------------------------------------------------------

    def receive(self, handle: Any) -> None:
        self._handle = handle
        if self._deferred:
            deferred, self._deferred = self._deferred, []
            for msg, arrived in deferred:
                self._arrived = arrived
                self._on_message(msg)
        self.transport.drain(self._on_message, self._on_payload)

    def apply(self, effects: Effects) -> None:
        for e in effects.events:
            self.emit(e)
        if effects.sends:
            self.carry_out(effects.sends)

    def chosen(self, batch: Any) -> None:
        # The previous batch's outputs leave only now, after the next batch was chosen: in
        # the simulation postprocess takes no time, so no reply to them (a REMOVE after the
        # last worker-graph report) can reach the rank before its next scheduling decision.
        # Sending first would let a fast round trip overtake it here.
        self.release()
        self.answer_probe(idle=batch is None)
        if batch is None:
            self.flush_events()

    def idle(self, timeout: float | None = None) -> None:
        # a message ends the wait; so does `timeout` (mstar's 10 ms poll of its StreamBuffers,
        # scaled as every duration here is), or IDLE_POLL_MS, to look at the launcher
        ms = IDLE_POLL_MS if timeout is None else max(
            1, min(IDLE_POLL_MS, round(timeout * 1000 * self.cfg["time_scale"])))
        if not self.transport.wait(ms) and not self.launcher_alive():
            self.running = False

    def wait(self, seconds: float) -> None:
        time.sleep(seconds * self.cfg["time_scale"])

    def duration(self, batch: Any) -> float:
        budget = self.work.budget(self.fake_nodes.duration(batch.node, batch.walk, len(batch.rids)))
        return budget * self.slow if self.slow != 1.0 else budget

    def collective(self, batch: Any) -> None:
        self._meet(batch, "start")

    def _meet(self, batch: Any, phase: str) -> None:
        """Block until every other rank of the batch's TP instance has reached `phase` of it.

        The collectives inside mstar's TP forward hold its ranks together: none starts a batch
        before the others, and the leader's output exists only once every rank has done its
        share. The simulation starts them together (`Simulation.collective`) and, with equal
        service times, ends them together; here work takes what the host gives it, so the end
        is a meeting too. Without them a leader whose outputs leave the group ran ahead, and a
        follower two iterations behind got loop-backs for an iteration it had not started
        (docs/fidelity.md, finding 10)."""
        instance = tuple(batch.instance)
        key = (instance, batch.collective, phase)
        note = ctl.Lockstep(instance=list(instance), number=batch.collective, phase=phase,
                            rank=self.rank)
        transport = self.transport
        for r in instance:
            if r != self.rank:
                transport.send(r, note)
        need = len(instance) - 1
        met = self._met
        self._meeting = True
        try:
            while self.running and len(met.get(key, ())) < need:
                if transport.wait(IDLE_POLL_MS):
                    transport.drain(self._on_message, self._on_payload)
                elif not self.launcher_alive():
                    self.running = False
                if len(met.get(key, ())) < need:
                    # Waiting for a rank that has not reached the batch: this rank makes no
                    # progress of its own (messages it holds are not counted handled yet).
                    self.answer_probe(idle=True)
        finally:
            self._meeting = False
        met.pop(key, None)

    def execute(self, batch: Any, duration: float) -> None:
        loop = self.loop
        inputs = []
        nbytes = 0
        consumed: list[tuple[str, tuple[int, int]]] = []
        for rid in batch.rids:
            st = loop.runtime.state_of(rid, batch.walk, batch.node)
            mine = self.store.get(rid, {})
            if st is None:
                continue
            for sig in st.inputs(batch.node).values():
                nbytes = max(nbytes, sig.nbytes)
                t = mine.get(_key(sig))
                if t is not None:
                    inputs.append(t)
                    consumed.append((rid, _key(sig)))
        # Ship the trace while the batch runs, not between its end and the next batch: a message
        # that arrives in that gap (a REMOVE) must find the rank as quick as the simulation does.
        self.flush_events()
        if not self.running:
            return  # told to stop while meeting the other ranks of the batch
        result = self.work.run(inputs, nbytes, duration)
        if batch.instance:
            self._meet(batch, "end")
        self._results = dict.fromkeys(batch.rids, result)
        self._consumed = consumed

    def finished(self, effects: Effects) -> None:
        # Tensors first: a request removed at the end of the batch drops its store after.
        for c in effects.completions:
            self._completed(c)
        for e in effects.events:
            self.emit(e)
        self._pending_sends = effects.sends
        self._results = {}
        # Once sent: free the tensors this batch consumed and those that only left this rank.
        self._to_free = self._consumed + self._sent_only
        self._consumed = []
        self._sent_only = []

    def release(self) -> None:
        """Carry out the finished batch's sends, then free the tensors it consumed or sent away."""
        if self._pending_sends:
            sends, self._pending_sends = self._pending_sends, []
            self.carry_out(sends)
        if self._to_free:
            for rid, k in self._to_free:
                mine = self.store.get(rid)
                if mine is not None:
                    mine.pop(k, None)
            self._to_free = []

    # -- the process ---------------------------------------------------------------------------

    def serve(self) -> None:
        transport = self.transport
        self.hello(str(self.device))
        while self.running and not self.started:
            if transport.wait(IDLE_POLL_MS):
                transport.drain(self._on_message, self._on_payload)
            elif not self.launcher_alive():
                return
        for _ in worker_main(self.loop, self):
            pass  # every wait happened inside the port
        self.release()

    def final(self) -> ctl.Final:
        return ctl.Final(endpoint=self.rank, state=rank_final(self.loop),
                         stats={**self.work.stats(), "sent": self.sent, "handled": self.handled})


class ConductorProcess(_Process):
    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg, CONDUCTOR_ID)
        streams = RandomStreams(self.scenario.seed)
        self.conductor = self.runtime.build_conductor(
            self.layout, lambda n: streams.choice_index("placement", n))
        #: rid -> (producing rank, seq) -> payload of a persisted signal
        self.persisted: dict[str, dict[tuple[int, int], Payload]] = {}
        self._rid = ""

    def payload_of(self, sig: Signal) -> Any:
        if not sig.nbytes:
            return None
        req = self.conductor.requests.get(self._rid)
        if req is not None:
            prev = req.persisted.get(sig.name)
            if prev is not None:
                got = self.persisted.get(self._rid, {}).get(_key(prev))
                if got is not None:
                    return got
        return Payload(bytes(sig.nbytes))

    def carry_out(self, sends: list[Send]) -> None:
        for s in sends:
            self._rid = getattr(s.msg, "rid", "")
            self.transport.send(s.dst, s.msg, self.payload_of)
        self.sent += len(sends)

    def _ended(self, rid: str, outcome: str) -> None:
        self.persisted.pop(rid, None)
        self.transport.send(CLIENT_ID, ctl.Ended(rid=rid, outcome=outcome))

    def conduct(self, stimulus: Any) -> None:
        eff = self.conductor.handle_stimulus(stimulus, self.now())
        self.events.extend(eff.events)
        for rid, outcome in eff.ended:
            self._ended(rid, outcome)
        self.carry_out(eff.sends)

    def handle(self, msg: Any) -> None:
        if self.control(msg):
            return
        c = self.conductor
        if isinstance(msg, ctl.Submit):
            self.conduct(Submit(rid=msg.rid, kind=msg.kind))
        elif isinstance(msg, ctl.Abort):
            self.conduct(Abort(rid=msg.rid, outcome=msg.outcome))
        elif isinstance(msg, ctl.StallQuery):
            position = c.stall_position
            self.transport.send(CLIENT_ID, ctl.StallInfo(round=msg.round, requests=[
                RequestPosition(rid=rid, position=position(rid)) for rid in c.unfinished()]))
        else:
            if self._arrived:
                self.file_arrived(self.persisted.setdefault(msg.rid, {}))
            self.handled += 1
            self.conduct(Arrived(msg=msg))

    def serve(self) -> None:
        transport = self.transport
        self.hello("cpu")
        while self.running:
            if transport.wait(IDLE_POLL_MS):
                transport.drain(self.handle, self._on_payload)
                self.answer_probe(idle=True)
                self.flush_events()
            elif not self.launcher_alive():
                return

    def final(self) -> ctl.Final:
        return ctl.Final(endpoint=CONDUCTOR_ID, state=conductor_final(self.conductor),
                         stats={"sent": self.sent, "handled": self.handled})


def main(argv: list[str]) -> int:
    # SIGUSR1 prints every thread's stack to the log: the launcher sends it to a process that
    # does not exit when told, before killing it.
    faulthandler.register(signal.SIGUSR1)
    cfg = load_config(argv[0])
    role = argv[1]
    try:
        if role == "rank":
            import torch

            torch.set_num_threads(max(1, int(cfg.get("threads_per_rank", 1))))
            proc: RankProcess | ConductorProcess = RankProcess(cfg, int(argv[2]))
        elif role == "conductor":
            proc = ConductorProcess(cfg)
        else:
            print(f"unknown role {role!r}", file=sys.stderr)
            return 2
    except zmq.ZMQError as exc:
        # The launcher quotes the last line of the log: one line, not a traceback.
        ep = int(argv[2]) if role == "rank" else CONDUCTOR_ID
        where = Endpoints(cfg["endpoints"]["spec"], cfg["endpoints"]["run_dir"]).address(ep)
        print(f"cannot listen at {where}: {exc}", file=sys.stderr)
        return 3
    try:
        proc.serve()
    finally:
        if proc.launcher_alive():
            proc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
