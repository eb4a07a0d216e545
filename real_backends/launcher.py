"""The launcher: runs a scenario on real OS processes and turns what happened into a `RunReport`.

It starts one process per rank and one for the conductor (`real_backends.process`), plays the
client and the API server itself (the same `ApiClient` as the simulation), and supplies the
driver core (`simharness.drive.core`) with a wall clock and a transport: the core's `Workload`
decides what to submit, its `Stalls` which requests hung and what their reports say. The
launcher watches the run:

* **quiescence**: every ``PROBE_EVERY_S`` it asks every process whether it is idle and how many
  runtime messages it has sent and handled. Two rounds in a row with every process idle, sent ==
  handled everywhere and unchanged counts mean nothing can happen any more (no batch running, no
  message in flight). Then the conductor says where each unfinished request stands, each rank
  reports what its nodes hold and miss (`runtime.stall.blocked_nodes`), and the core reports and
  aborts the hung ones, as in the simulation, so the workload goes on;
* **the run deadline** (`derive_deadline`): every unfinished request is reported the same way with
  reason ``timeout``, the workload stops, and the run ends;
* **a process that dies** (exit status, e.g. killed by a signal): reported as a ``crash``
  violation naming the process, how it died and its last trace event; the run ends and the
  requests still open are ``failed``.

At the end every process is asked for its final state (`RunEnded`) and exits; any process still
alive after a grace period is killed, every process is reaped, and the run directory (config,
ipc socket files, per-process logs) is deleted. On SIGINT or SIGTERM the processes are killed at
once and the run is reported as far as it got; if the launcher itself is killed, its children
and a janitor process clean up after it (`real_backends.teardown`). The trace events of all
processes are merged in time order and fed to the same checks as a simulation; the summary is the
same JSON with ``"backend": "zmq"``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq

from real_backends import control as ctl
from real_backends import teardown
from real_backends.faults import RealFaults, option_faults
from real_backends.options import RealOptions
from real_backends.transport import Endpoints, Transport, endpoint_name, process_name
from simharness import events as ev
from simharness import interrupts
from simharness.checks import Violation
from simharness.drive.core import (
    QUIESCENCE,
    RUNAWAY,
    TIMEOUT,
    RequestPosition,
    Stalls,
    Submission,
    Workload,
    run_ended,
)
from simharness.drive.result import RunResult
from simharness.drive.runaway import RunawayGuard
from simharness.errors import ScenarioError, UsageError
from simharness.placement.layout import Layout
from simharness.run import RunChecks, RunReport, build_runtime, with_seed
from simharness.runtime.effects import Arrived
from simharness.runtime.messages import CLIENT_ID, CONDUCTOR_ID
from simharness.runtime.protocol import LoopPolicy
from simharness.scenario.model import Scenario
from simharness.trace import Recorder
from simharness.wording import plural

PROBE_EVERY_S = 0.02
#: How long to wait for a process to answer a query before going on without it.
REPLY_TIMEOUT_S = 10.0
#: After the deadline: how long the aborted requests get to be torn down before the run stops.
WIND_DOWN_S = 5.0


class RealBackendError(RuntimeError):
    """The real run could not be carried out (a process failed to start, a port was taken)."""


def derive_deadline(scenario: Scenario, sim_time_s: float, forwards: int, time_scale: float) -> float:
    """The run deadline: the simulated length scaled to wall time, four times over, plus 5 ms of
    messaging per forward the simulation ran, plus 20 s for start-up; never more than the
    scenario's request timeout (``limits.request_timeout_s``)."""
    guess = 20.0 + 4.0 * sim_time_s * time_scale + 0.005 * forwards
    return min(guess, scenario.limits.request_timeout_s)


@dataclass
class _Child:
    endpoint: int
    proc: subprocess.Popen
    log: Path
    device: str = ""
    pid: int = 0
    final: ctl.Final | None = None
    exited: int | None = None
    #: the stacks of a process that had to be killed at the end
    stuck: str = ""


class Launcher:
    def __init__(self, scenario: Scenario, runtime_name: str | None, options: RealOptions,
                 deadline_s: float) -> None:
        self.scenario = scenario
        self.runtime = build_runtime(scenario, runtime_name)
        self.runtime_name = getattr(self.runtime, "name", runtime_name or scenario.runtime.name)
        if getattr(self.runtime, "simulation_only", False):
            raise UsageError(f"--runtime {self.runtime_name} runs only in the simulation (its "
                             f"loops are restated over the simulated clock); on real processes "
                             f"use --runtime mstar-graph (mstar's graph code) or a model runtime")
        #: what the worker processes build their runtime from: the name as given, or None for
        #: the scenario's own runtime with its options. Not `runtime_name`, which is a display
        #: name: a ``module:Class`` subclass of a profile keeps the profile's name, and a
        #: profile's name alone drops the scenario's ``runtime.options``.
        self.runtime_spec = runtime_name
        self.policy: LoopPolicy = self.runtime.policy
        self.layout = Layout.build(scenario)
        self.options = options
        self.deadline_s = deadline_s
        self.num_ranks = self.layout.num_ranks
        self.t0 = 0.0
        self.own_events: list[Any] = []
        self.batches: dict[int, list[Any]] = {}
        self.client = self.runtime.build_client()
        self.workload = Workload(scenario)
        self.stalls = Stalls(self, self.client, self.own_events.append)
        #: the runaway guard, fed as events arrive; the main loop reads its trips
        self.guard = RunawayGuard(scenario)
        self._trips_handled = 0
        self._cut: set[str] = set()
        self.children: dict[int, _Child] = {}
        self.violations: list[Violation] = []
        self.sent = 0
        self.handled = 0
        self.end = "completed"
        # replies
        self._round = 0
        self._probe_replies: dict[int, ctl.ProbeReply] = {}
        self._stall_info: dict[int, list[RequestPosition]] = {}
        self._blocked: dict[tuple[int, str, int], list[ev.BlockedNode]] = {}
        self._killed = False
        self._probing = False
        self._check_fault()
        #: what the options' faults do here: the slow ranks' factors, the rank to kill and when
        self.faults = RealFaults.of(option_faults(options.kill, options.slow_ranks))

    def _check_fault(self) -> None:
        """Refuse a `--kill-rank` that cannot fire, rather than run and pass without it."""
        if self.options.kill is None:
            return
        rank, at = self.options.kill
        spec = f"--kill-rank {rank}:{at:g}"
        if not 0 <= rank < self.num_ranks:
            raise RealBackendError(f"{spec}: no rank {rank}; the scenario has "
                                   f"{plural(self.num_ranks, 'rank')} (0 to {self.num_ranks - 1})")
        if not (math.isfinite(at) and at >= 0):
            raise RealBackendError(f"{spec}: expected a time in seconds >= 0")
        if at >= self.deadline_s:
            raise RealBackendError(f"{spec}: cannot fire, the run deadline is {self.deadline_s:.1f} s "
                                   f"(--deadline to give it longer)")

    def _fault_notes(self, end_t: float) -> tuple[str, ...]:
        """Say so when the fault asked for never fired (the run ended before its time)."""
        if self.options.kill is None or self._killed or self.end == "interrupted":
            return ()
        rank, at = self.options.kill
        return (f"--kill-rank {rank}:{at:g} did not fire: the run ended at {end_t:.2f} s, before "
                f"{at:g} s; nothing was killed",)

    # -- clock and sending --------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.t0

    def send(self, dst: int, msg: Any) -> None:
        self.transport.send(dst, msg)

    def endpoints_all(self) -> list[int]:
        return [CONDUCTOR_ID, *range(self.num_ranks)]

    # -- processes ----------------------------------------------------------------------------

    def _config(self, run_dir: str) -> dict[str, Any]:
        sc = self.scenario
        raw = sc.raw
        try:
            json.dumps(raw)
        except TypeError as exc:
            raise RealBackendError(f"scenario {sc.source} cannot be handed to worker processes: "
                                   f"{exc}") from None
        return {
            "scenario": {"raw": raw, "source": sc.source, "name": sc.name, "seed": sc.seed},
            "runtime": self.runtime_spec,
            "endpoints": {"spec": self.options.endpoints, "run_dir": run_dir},
            "device": self.options.device,
            "time_scale": self.options.time_scale,
            "compute_share": self.options.compute_share,
            "threads_per_rank": self.options.threads_per_rank,
            "slow_ranks": {str(r): f for r, f in self.faults.slow_ranks.items()},
            "parent_pid": os.getpid(),
        }

    def _spawn(self, run_dir: str) -> None:
        cfg_path = Path(run_dir) / "run.json"
        cfg_path.write_text(json.dumps(self._config(run_dir)), encoding="utf-8")
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        threads = str(self.options.threads_per_rank)
        env.setdefault("OMP_NUM_THREADS", threads)
        env.setdefault("MKL_NUM_THREADS", threads)
        env.update(self.options.extra_env)
        env[teardown.PARENT_ENV] = str(os.getpid())
        for ep in self.endpoints_all():
            role = ["conductor"] if ep == CONDUCTOR_ID else ["rank", str(ep)]
            log = Path(run_dir) / f"{endpoint_name(ep)}.log"
            with open(log, "wb") as fh:
                proc = subprocess.Popen(
                    teardown.child_command([str(cfg_path), *role]),
                    stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env=env,
                    **self.group.popen_kwargs())
            if self.group.pgid is None:
                self.group.joined(proc)
                self.janitor.watch_group(proc.pid)
            self.children[ep] = _Child(ep, proc, log, pid=proc.pid)

    def _started(self) -> bool:
        """Every process has said hello; tells `options.progress` how many have so far."""
        ready = sum(1 for c in self.children.values() if c.device)
        if self.options.progress is not None:
            self.options.progress(ready, len(self.children), time.perf_counter() - self._wall0)
        return ready == len(self.children)

    def _log_tail(self, child: _Child, lines: int = 12) -> str:
        try:
            text = child.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def _dead(self) -> list[_Child]:
        out = []
        for c in self.children.values():
            if c.exited is None:
                rc = c.proc.poll()
                if rc is not None:
                    c.exited = rc
                    if c.final is None:
                        out.append(c)
        return out

    def _await(self, done: Any, timeout_s: float, what: str, fatal: bool = False) -> bool:
        """Pump messages until `done()` holds; False on timeout. Stops early if a process dies
        (the main loop reports it)."""
        until = time.monotonic() + timeout_s
        while not done():
            left = until - time.monotonic()
            if left <= 0:
                if fatal:
                    raise RealBackendError(f"timed out after {timeout_s:g} s waiting for {what}")
                return False
            if self.transport.wait(int(min(left, 0.05) * 1000) + 1):
                self.transport.drain(self._dispatch)
            elif any(c.exited is None and c.proc.poll() is not None for c in self.children.values()):
                if fatal:
                    dead = [c for c in self.children.values() if c.proc.poll() is not None]
                    c = dead[0]
                    raise RealBackendError(
                        f"{process_name(c.endpoint)} exited with code {c.proc.returncode} while "
                        f"waiting for {what}: {self._log_tail(c, 6)}")
                return False
        return True

    # -- messages -----------------------------------------------------------------------------

    def _dispatch(self, msg: Any) -> None:
        t = type(msg)
        if t is ctl.EventBatch:
            self.batches.setdefault(msg.endpoint, []).extend(msg.events)
            see = self.guard.see
            for e in msg.events:
                see(e)
        elif t is ctl.ProbeReply:
            if msg.round == self._round:
                self._probe_replies[msg.endpoint] = msg
        elif t is ctl.Ended:
            self._ended(msg.rid, msg.outcome)
        elif t is ctl.Hello:
            c = self.children[msg.endpoint]
            c.device = msg.device
        elif t is ctl.StallInfo:
            self._stall_info[msg.round] = msg.requests
        elif t is ctl.BlockedReply:
            self._blocked[(msg.round, msg.rid, msg.rank)] = msg.blocked
        elif t is ctl.Final:
            self.children[msg.endpoint].final = msg
        else:
            self.handled += 1
            eff = self.client.handle_stimulus(Arrived(msg=msg), self.now())
            self.own_events.extend(eff.events)
            for s in eff.sends:
                self.send(s.dst, s.msg)
            self.sent += len(eff.sends)

    # -- workload: the core's closed loop, driven by the conductor's Ended messages ----------

    def _submit(self, subs: list[Submission]) -> None:
        for sub in subs:
            self.send(CONDUCTOR_ID, ctl.Submit(rid=sub.rid, kind=sub.kind))

    def _ended(self, rid: str, outcome: str) -> None:
        self._submit(self.workload.ended(rid, outcome))

    def unfinished(self) -> list[str]:
        return self.workload.unfinished()

    # -- watching -----------------------------------------------------------------------------

    def _probe(self) -> None:
        self._round += 1
        self._probe_replies = {}
        self._probing = True
        for ep in self.endpoints_all():
            self.send(ep, ctl.Probe(round=self._round))

    def _probe_snapshot(self) -> tuple[Any, ...] | None:
        """The counts of a complete probe round, or None if some process is busy or it does not
        balance."""
        replies = self._probe_replies
        if len(replies) < len(self.children) or not all(r.idle for r in replies.values()):
            return None
        sent = self.sent + sum(r.sent for r in replies.values())
        handled = self.handled + sum(r.handled for r in replies.values())
        if sent != handled:
            return None
        return tuple(sorted((ep, r.sent, r.handled) for ep, r in replies.items())) + (self.sent,
                                                                                   self.handled)

    def _stall_all(self, reason: str, only: str | None = None) -> None:
        """Ask the conductor where every unfinished request stands (or request `only`) and let
        the core report and abort the stalled ones (`Stalls.stall`)."""
        self._round += 1
        rnd = self._round
        self.send(CONDUCTOR_ID, ctl.StallQuery(round=rnd))
        if self._await(lambda: rnd in self._stall_info, REPLY_TIMEOUT_S, "the conductor's state"):
            unfinished = self._stall_info.pop(rnd)
        else:
            unfinished = [RequestPosition(rid=rid, position=None) for rid in self.unfinished()]
        if only is not None:
            unfinished = [p for p in unfinished if p.rid == only]
        self.stalls.stall(reason, unfinished)

    def _runaway(self) -> bool:
        """The guard tripped: tear the request down, as the simulation does (a `Stalled` with
        reason runaway); True when a request already torn down still grows (the run ends)."""
        while self._trips_handled < self.guard.trips:
            rid = self.guard.runaways[self._trips_handled].rid
            self._trips_handled += 1
            if rid in self._cut or rid not in self.unfinished():
                return True
            self._cut.add(rid)
            self._stall_all(RUNAWAY, only=rid)
        return False

    # -- the StallPort of the core ----------------------------------------------------------------

    def blocked(self, asks: Sequence[RequestPosition]) -> dict[str, list[ev.BlockedNode]]:
        """Every rank of each request's position reports its blocked nodes (one round trip)."""
        rnd = self._round
        wanted = []
        for p in asks:
            assert p.position is not None
            for r in p.position.ranks:
                self.send(r, ctl.BlockedQuery(round=rnd, rid=p.rid, position=p.position))
                wanted.append((rnd, p.rid, r))
        self._await(lambda: all(k in self._blocked for k in wanted), REPLY_TIMEOUT_S,
                    "the ranks' blocked state")
        out: dict[str, list[ev.BlockedNode]] = {}
        for p in asks:
            assert p.position is not None
            nodes = out[p.rid] = []
            for r in p.position.ranks:
                nodes.extend(self._blocked.pop((rnd, p.rid, r), ()))
        return out

    def abort(self, rid: str, outcome: str) -> None:
        self.send(CONDUCTOR_ID, ctl.Abort(rid=rid, outcome=outcome))

    def _crash(self, dead: list[_Child]) -> None:
        # Whatever the dead process shipped before it died is waiting in our socket.
        self._await(lambda: False, 0.2, "events")
        now = self.now()
        for c in dead:
            rc = c.exited if c.exited is not None else c.proc.returncode
            if rc is not None and rc < 0:
                try:
                    how = f"killed by {signal.Signals(-rc).name}"
                except ValueError:
                    how = f"killed by signal {-rc}"
            else:
                how = f"exited with code {rc}"
            mine = self.batches.get(c.endpoint, [])
            last = mine[-1] if mine else None
            open_rids = self.unfinished()
            name = endpoint_name(c.endpoint)
            tail = self._log_tail(c) if rc is not None and rc > 0 else ""
            msg = (f"{process_name(c.endpoint)} (pid {c.pid}) died at t={now:.3f} s, {how}; its last event: "
                   f"{describe_event(last)}"
                   + (f". Requests left unfinished: {', '.join(open_rids)}" if open_rids else ""))
            self.violations.append(Violation(
                "crash", msg, rank=c.endpoint if c.endpoint >= 0 else None,
                request=getattr(last, "rid", None),
                details={"process": name, "pid": c.pid, "exit_code": rc, "how": how,
                         "last_event": _event_json(last), "unfinished": open_rids,
                         **({"log_tail": tail} if tail else {})}))
        for rid in self.unfinished():
            self.workload.end(rid, "failed")
        self.workload.stopped = True

    def _main_loop(self) -> None:
        deadline = self.deadline_s
        hard_stop: float | None = None
        next_probe = 0.0
        prev: tuple[Any, ...] | None = None
        kill = self.faults.kill
        self._submit(self.workload.start())
        while True:
            if self.transport.wait(5):
                self.transport.drain(self._dispatch)
            if self.guard.trips != self._trips_handled and self._runaway():
                self.end = "runaway"
                return
            now = self.now()
            dead = self._dead()
            if dead:
                self.end = "crash"
                self._crash(dead)
                return
            if kill is not None and not self._killed and now >= kill[1]:
                self._killed = True
                victim = self.children.get(kill[0])
                if victim is not None and victim.proc.poll() is None:
                    os.kill(victim.pid, signal.SIGKILL)
            if hard_stop is None and now >= deadline:
                self.end = "deadline"
                self.workload.stopped = True
                self._stall_all(TIMEOUT)
                hard_stop = self.now() + WIND_DOWN_S
                prev = None
                continue
            if hard_stop is not None and now >= hard_stop:
                return
            if self._probing and len(self._probe_replies) >= len(self.children):
                snap = self._probe_snapshot()
                self._probe_replies = {}
                self._probing = False
                if snap is not None and snap == prev:
                    prev = None
                    if self.unfinished():
                        self._stall_all(QUIESCENCE)
                        continue
                    if self.workload.done or self.workload.stopped:
                        return
                else:
                    prev = snap
                next_probe = now + PROBE_EVERY_S
            elif now >= next_probe and not self._probing:
                self._probe()

    def _shutdown(self) -> None:
        alive = [c for c in self.children.values() if c.proc.poll() is None]
        for c in alive:
            self.send(c.endpoint, ctl.Shutdown())
        self._await(lambda: all(c.final is not None or c.proc.poll() is not None for c in alive),
                    REPLY_TIMEOUT_S, "the final state of every process")

    def _reap(self) -> None:
        for c in self.children.values():
            if c.proc.poll() is None:
                try:
                    c.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(OSError):
                        os.kill(c.pid, signal.SIGUSR1)  # its stacks go to its log
                    time.sleep(0.3)
                    c.proc.kill()
                    c.stuck = self._log_tail(c, 30)
        for c in self.children.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.proc.wait(timeout=10)

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> RunReport:
        wall0 = self._wall0 = time.perf_counter()
        endpoints, eps = Endpoints(self.options.endpoints, "-"), [CLIENT_ID, *self.endpoints_all()]
        try:
            endpoints.check_ports(eps)
        except ValueError as exc:
            raise RealBackendError(str(exc)) from None
        busy = endpoints.busy(eps)
        if busy:
            raise RealBackendError(f"cannot listen at {busy[0]}: address already in use "
                                   f"(choose another --endpoints port)")
        run_dir = tempfile.mkdtemp(prefix="simharness-")
        self.run_dir = run_dir
        # Before any child exists: the janitor and the group cover every exit path of this
        # process, SIGKILL included (real_backends.teardown).
        self.janitor = teardown.Janitor(run_dir)
        self.group = teardown.Group()
        interrupted: interrupts.Interrupted | None = None
        stop_now = True
        end_t = 0.0
        try:
            try:
                self.transport = Transport(CLIENT_ID, Endpoints(self.options.endpoints, run_dir))
            except zmq.ZMQError as exc:
                raise RealBackendError(f"cannot listen at "
                                       f"{Endpoints(self.options.endpoints, run_dir).address(CLIENT_ID)}"
                                       f": {exc}") from None
            self._spawn(run_dir)
            self._await(self._started, self.options.startup_timeout_s, "every process to start",
                        fatal=True)
            self.t0 = time.monotonic()
            for ep in self.endpoints_all():
                self.send(ep, ctl.Start(t0=self.t0))
            self._main_loop()
            end_t = self.now()
            self._shutdown()
            stop_now = False
        except KeyboardInterrupt as exc:
            # SIGINT or SIGTERM (simharness.interrupts): stop every process now and report what
            # the run had found up to here.
            interrupted = interrupts.as_interrupted(exc)
            self.end = "interrupted"
            end_t = self.now() if self.t0 else 0.0
        finally:
            with interrupts.deferred():
                self._teardown(run_dir, stop_now)
        report = self._report(end_t, time.perf_counter() - wall0)
        if interrupted is not None:
            report.extra["interrupted"] = interrupted.name
            interrupted.partial = report
            raise interrupted
        return report

    def _teardown(self, run_dir: str, stop_now: bool) -> None:
        """Stop and reap every process, close the sockets, remove the run folder; on an
        interruption or an error the processes are killed at once instead of told to finish."""
        keep = os.environ.get("SIMHARNESS_KEEP_RUN_DIR") == "1"
        if stop_now:
            self.group.kill()
            if not keep:  # nothing of a killed process needs its folder: remove it first
                shutil.rmtree(run_dir, ignore_errors=True)
                self.janitor.dismiss()
        self._reap()
        if not stop_now:
            self._late_failures()
        if hasattr(self, "transport"):
            self.transport.close(linger_ms=0)
        if keep:
            print(f"note: run directory kept at {run_dir}", file=sys.stderr)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
        self.janitor.done()

    def _late_failures(self) -> None:
        """A process that failed to hand over its final state, or was killed at the end, is a
        fault of the run too: say so rather than drop it."""
        if self.end == "crash":
            return
        for c in self.children.values():
            if c.final is None or c.proc.returncode not in (0, None):
                rc = c.proc.returncode
                how = c.stuck and "did not exit when told and was killed" or f"exited with code {rc}"
                self.violations.append(Violation(
                    "crash", f"{process_name(c.endpoint)} (pid {c.pid}) {how} at the end of the run"
                             f"{'' if c.final else ' without reporting its final state'}",
                    rank=c.endpoint if c.endpoint >= 0 else None,
                    details={"process": endpoint_name(c.endpoint), "pid": c.pid, "exit_code": rc,
                             "log_tail": c.stuck or self._log_tail(c)}))

    def _report(self, end_t: float, wall: float) -> RunReport:
        # The events, merged in time order, go through the same checks and runaway guard as a
        # simulated run's.
        watch = RunChecks(self.scenario, self.layout)
        recorder = Recorder(watch.observers)
        order = [CLIENT_ID, CONDUCTOR_ID, *range(self.num_ranks)]
        streams = {CLIENT_ID: self.own_events, **self.batches}
        merged = sorted(
            ((e.t, order.index(ep) if ep in order else 99, i, e)
             for ep, evs in streams.items() for i, e in enumerate(evs)),
            key=lambda x: x[:3])
        recorder.emit_all([e for *_, e in merged])
        if self.end not in ("crash", "interrupted"):
            # a rank's `RankFinal`, the conductor's `ConductorFinal`
            finals: dict[int, Any] = {ep: c.final.state for ep, c in self.children.items()
                                      if c.final is not None}
            recorder.emit(run_ended(end_t, [finals.get(r) for r in range(self.num_ranks)],
                                    finals.get(CONDUCTOR_ID)))
        outcomes = self.workload.final_outcomes()
        # An interrupted run ends mid-way: its open requests are no verdict on the runtime.
        violations = self.violations + (watch.judge(outcomes) if self.end != "interrupted" else [])
        result = RunResult(self.scenario, self.runtime_name, self.layout, recorder, end_t, outcomes,
                           notes=self._fault_notes(end_t), forward_log=watch.forward_log)
        opts = self.options
        extra = {
            "device": opts.device, "time_scale": opts.time_scale,
            "compute_share": opts.compute_share, "endpoints": opts.endpoints,
            "deadline_s": round(self.deadline_s, 3), "end": self.end, "run_dir": self.run_dir,
            **({"kill": {"rank": opts.kill[0], "at_s": opts.kill[1], "fired": self._killed}}
               if opts.kill else {}),
            "processes": {endpoint_name(c.endpoint): {"pid": c.pid, "device": c.device,
                                                      "exit_code": c.proc.returncode,
                                                      **(c.final.stats if c.final else {})}
                          for c in self.children.values()},
        }
        return RunReport(self.scenario, self.runtime_name, "zmq", result, violations,
                         recorder.digest(), wall, extra)


def describe_event(e: Any) -> str:
    if e is None:
        return "none (it died before reporting anything)"
    parts = [type(e).__name__, f"at t={e.t:.3f} s"]
    for key in ("node", "walk", "rid", "counter"):
        v = getattr(e, key, None)
        if v is not None:
            parts.append(f"{key} {v}")
    return " ".join(parts)


def _event_json(e: Any) -> Any:
    if e is None:
        return None
    from simharness.trace import to_json

    return to_json(e)


def refuse_perturbations(scenario: Scenario, command: str = "run") -> None:
    """Real processes do not apply `schedule:` or `faults:` (their timing is the machine's, and
    their faults are the backend's own options, `real_backends.faults`): refuse such a scenario
    rather than run another one, with the way out `command` has (``confirm`` has no --backend: it
    always runs both)."""
    for key, what, extra in (("faults", "inject scenario faults",
                              " (a rank crash on real processes: --kill-rank)"),
                             ("schedule", "apply schedule perturbations", "")):
        if not (scenario.faults if key == "faults" else scenario.schedule.active):
            continue
        if command == "confirm":
            them, empty = ("them", "[]") if key == "faults" else ("it", "{}")
            raise ScenarioError(key, f"confirm runs the scenario on the zmq backend too, which does "
                                     f"not {what}: drop {them} (--set {key}={empty}) or use "
                                     f"'simharness run' (sim backend)", scenario.source)
        raise ScenarioError(key, f"the zmq backend does not {what}; run it with --backend sim{extra}",
                            scenario.source)


def run_real(scenario: Scenario, runtime_name: str | None = None, seed: int | None = None,
             options: RealOptions | None = None, sim_report: RunReport | None = None) -> RunReport:
    """Run `scenario` on the zmq backend. The run deadline comes from `options.deadline_s` or from
    a simulation of the same scenario (`sim_report`, run here when not given)."""
    options = options or RealOptions()
    options.check()
    refuse_perturbations(scenario)
    scenario = with_seed(scenario, seed)
    deadline = options.deadline_s
    if deadline is None:
        if sim_report is None:
            from simharness.run import run_scenario

            sim_report = run_scenario(scenario, runtime_name)
        forwards = sum(1 for e in sim_report.result.events if type(e) is ev.Forward)
        deadline = derive_deadline(scenario, sim_report.result.sim_time_s, forwards, options.time_scale)
    return Launcher(scenario, runtime_name, options, deadline).run()
