"""The zmq backend's speed, measured side by side in one run.

Prints:
* bagel_cfg on both backends: the simulation's wall time, the zmq backend's wall time (with and
  without process start-up) and their ratio. The real run's length is set by ``--time-scale``
  (a batch lasts its service time times the scale), so the ratio mostly says how much slower
  wall-clock execution is than a simulation, and how much the backend adds beyond the scaled
  scenario time;
* messages per second between two rank processes through the backend's transport (wire format
  encode, PUSH/PULL over ipc, decode into message objects) beside a bare pyzmq PUSH/PULL between
  two processes sending the very bytes the backend sends (its encodings of the same messages,
  made before the clock starts), measured in the same run, best of three with the two sides
  taking turns (target: the backend within 3x of the bare rate). Both sides stream: the sender
  sends as fast as it can, the receiver's rate is timed. Two message shapes: INPUT_SIGNALS with
  two signal-only edges (the control-path cost), and INPUT_SIGNALS carrying a 512 KiB latents
  tensor as its own frame (the tensor path). Messages are built before the clock starts: a
  runtime builds them, the transport only moves them.

Run: ``python benchmarks/bench_real.py [--time-scale X] [--messages N] [--device cpu|cuda]``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue as queues
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BAGEL = ROOT / "scenarios" / "bagel_cfg.yaml"
#: distinct messages the backend's sender cycles through
POOL = 1000
#: the target: the backend at most this many times slower than bare pyzmq (best over best)
MAX_SLOWDOWN = 3.0


def slowdown(ours: float, bare: float) -> tuple[float, bool]:
    """How many times slower the backend's best rate is than bare pyzmq's, and whether that
    meets `MAX_SLOWDOWN`: the verdict every printer of these figures gives."""
    ratio = bare / ours
    return ratio, ratio <= MAX_SLOWDOWN


def _signal(name: str, nbytes: int, seq: int):
    from simharness.signals import Signal

    return Signal(name, "LLM_cfg_text", False, False, nbytes, "combine_cfg", 0, "image_gen_cfg", 0,
                  seq % 49, "node", seq)


def _message(i: int, with_tensor: bool):
    from simharness.runtime.messages import InputSignals

    if with_tensor:
        return InputSignals(rid="r0", walk="image_gen_cfg", pass_no=0,
                            signals=[_signal("latents", 512 << 10, i)], src=0)
    return InputSignals(rid="r0", walk="image_gen_cfg", pass_no=0,
                        signals=[_signal("latents", 0, 2 * i), _signal("time_index", 0, 2 * i + 1)],
                        src=0)


#: how long a receiver process may take to report, before it is given up (seconds)
CHILD_TIMEOUT_S = 120.0


def from_child(queue, proc, what: str, timeout_s: float = CHILD_TIMEOUT_S):
    """The next item `proc` puts on `queue`. Raises instead of waiting for ever when the process
    ends without putting it (a receiver that failed to bind or import) or takes longer than
    `timeout_s`; the process is stopped first, so that nothing is left behind."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return queue.get(timeout=0.2)
        except queues.Empty:
            pass
        if not proc.is_alive():
            try:  # it may have put the item just before it ended
                return queue.get(timeout=0.2)
            except queues.Empty:
                pass
            proc.join()
            raise RuntimeError(f"the {what} process ended (exit code {proc.exitcode}) before it "
                               f"reported")
        if time.monotonic() > deadline:
            proc.kill()
            proc.join()
            raise RuntimeError(f"the {what} process did not report within {timeout_s:g} s")


# -- the backend's transport between two processes -------------------------------------------------

def _ignore(msg: object) -> None:
    """A message handler that keeps nothing."""


def _backend_receiver(run_dir: str, n: int, ready, out) -> None:
    from real_backends.transport import Endpoints, Transport

    t = Transport(1, Endpoints("ipc", run_dir))
    ready.put(True)
    # The first message starts the clock; then the rank's own read loop (`Transport.drain`).
    while t.recv(lambda sig, p: None) is None:
        t.wait(1000)
    start = time.perf_counter()
    got = 1
    while got < n:
        t.wait(1000)
        got += t.drain(_ignore, lambda sig, p: None)
    out.put((n - 1) / (time.perf_counter() - start))
    t.close(linger_ms=0)


def backend_rate(n: int, with_tensor: bool) -> float:
    import torch

    from real_backends.transport import Endpoints, Transport

    run_dir = tempfile.mkdtemp(prefix="simharness-bench-")
    ctx = mp.get_context("spawn")
    ready, out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_backend_receiver, args=(run_dir, n, ready, out))
    p.start()
    from_child(ready, p, "backend receiver")
    t = Transport(0, Endpoints("ipc", run_dir))
    latents = torch.randn(2048, 64)
    # A rank's hook, as a rank sends: asked only for a signal that carries bytes, so the
    # signal-only message never calls it.
    def payload_of(sig):
        return latents
    # Messages are built before the clock starts: building them is the runtime's work, not the
    # transport's, and the bare sender below sends bytes it already has. A pool of distinct
    # messages, not one, so that nothing is cached per object.
    pool = [_message(i, with_tensor) for i in range(min(n, POOL))]
    for i in range(n):
        t.send(1, pool[i % POOL], payload_of)
    try:
        rate = from_child(out, p, "backend receiver")
    finally:
        t.close(linger_ms=0)
        shutil.rmtree(run_dir, ignore_errors=True)
    p.join()
    return rate


# -- bare pyzmq --------------------------------------------------------------------------------------

def _bare_receiver(addr: str, n: int, parts: int, ready, out) -> None:
    import zmq

    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.bind(addr)
    ready.put(True)
    if parts == 1:
        s.recv()
        start = time.perf_counter()
        for _ in range(n - 1):
            s.recv()
    else:
        s.recv_multipart(copy=False)
        start = time.perf_counter()
        for _ in range(n - 1):
            s.recv_multipart(copy=False)
    out.put((n - 1) / (time.perf_counter() - start))
    s.close(linger=0)
    ctx.term()


def bare_rate(n: int, pool: list[list[bytes]]) -> float:
    """Messages per second of a bare pyzmq PUSH/PULL sending `n` messages: the frame lists of
    `pool` in turn (the backend's encodings of the messages it sends, so the same bytes travel)."""
    import zmq

    run_dir = tempfile.mkdtemp(prefix="simharness-bench-")
    addr = f"ipc://{run_dir}/bare.ipc"
    mpc = mp.get_context("spawn")
    ready, out = mpc.Queue(), mpc.Queue()
    p = mpc.Process(target=_bare_receiver, args=(addr, n, len(pool[0]), ready, out))
    p.start()
    from_child(ready, p, "bare pyzmq receiver")
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.SNDHWM, 200_000)
    s.connect(addr)
    size = len(pool)
    if len(pool[0]) == 1:
        metas = [frames[0] for frames in pool]
        for i in range(n):
            s.send(metas[i % size])
    else:
        for i in range(n):
            s.send_multipart(pool[i % size], copy=False)
    try:
        rate = from_child(out, p, "bare pyzmq receiver")
    finally:
        s.close(linger=0)
        ctx.term()
        shutil.rmtree(run_dir, ignore_errors=True)
    p.join()
    return rate


def rates(n: int, repeat: int = 3) -> list[tuple[str, float, float, int, list[float]]]:
    """(label, backend msg/s, bare pyzmq msg/s, bytes per message, each turn's ratio) for each
    message shape, each rate the best of `repeat` runs, the two sides taking turns (on a shared
    machine one run can lose its core for a while; taking turns gives both sides the same
    chances). A turn's ratio is its bare rate over its backend rate: their spread shows how far
    the machine moved the verdict (best bare over best backend)."""
    import torch

    from real_backends.wire import Codec, payload_from_tensor

    codec = Codec()
    small = [[bytes(codec.encode(_message(i, False))[0])] for i in range(POOL)]
    tensor = bytes(memoryview(payload_from_tensor(torch.randn(2048, 64)).buffer))  # one, shared
    big = [[bytes(codec.encode(_message(i, True), lambda sig: torch.randn(2048, 64))[0]), tensor]
           for i in range(POOL)]
    out = []
    for label, pool, with_tensor, count in (
        ("signal-only INPUT_SIGNALS", small, False, n),
        ("INPUT_SIGNALS + 512 KiB tensor", big, True, max(200, n // 50)),
    ):
        bare = ours = 0.0
        turns = []
        for _ in range(repeat):
            b, o = bare_rate(count, pool), backend_rate(count, with_tensor)
            bare, ours = max(bare, b), max(ours, o)
            turns.append(b / o)
        out.append((label, ours, bare, sum(len(f) for f in pool[0]), turns))
    return out


def message_rates(n: int) -> None:
    for label, ours, bare, size, turns in rates(n):
        ratio, met = slowdown(ours, bare)
        verdict = "meets" if met else "MISSES"
        print(f"{label:<32} backend {ours:10,.0f} msg/s   bare pyzmq {bare:10,.0f} msg/s "
              f"({size:,} B)   bare/backend {ratio:4.1f}x: {verdict} the {MAX_SLOWDOWN:g}x target "
              f"(turns {', '.join(f'{t:.1f}x' for t in turns)})")


def bagel_both(time_scale: float, device: str) -> None:
    from real_backends.confirm import compare, summarize
    from real_backends.launcher import RealOptions, run_real
    from simharness.run import run_scenario
    from simharness.scenario.loader import load_scenario

    sc = load_scenario(BAGEL)
    t = time.perf_counter()
    sim = run_scenario(sc)
    sim_wall = time.perf_counter() - t
    real = run_real(sc, options=RealOptions(device=device, time_scale=time_scale), sim_report=sim)
    agree, _ = compare(summarize(sim), summarize(real))
    run_s = real.result.sim_time_s
    print(f"bagel_cfg simulation          {sim_wall:8.3f} s wall ({sim.result.sim_time_s:.2f} s simulated)")
    print(f"bagel_cfg zmq backend         {real.wall_s:8.3f} s wall with start-up, {run_s:.3f} s run "
          f"({device}, time scale {time_scale}: {sim.result.sim_time_s * time_scale:.2f} s of "
          f"scaled service time)")
    print(f"wall-time ratio zmq / sim     {real.wall_s / sim_wall:8.1f}x with start-up, "
          f"{run_s / sim_wall:.1f}x run only; backend overhead over the scaled time "
          f"{run_s / (sim.result.sim_time_s * time_scale):.2f}x; confirm agrees: {agree}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-scale", type=float, default=0.2)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = ap.parse_args()
    bagel_both(args.time_scale, args.device)
    message_rates(args.messages)


if __name__ == "__main__":
    main()
