"""Simulation speed, measured side by side in one run.

Prints:
* the raw simpy message-hop rate on this machine (two processes handing a message back and forth
  through Stores, with a timeout per hop): the ceiling any simpy model can approach;
* simulated forwards per CPU second on a loaded bagel_cfg (128 text-to-image requests at
  concurrency 16, every check on), and its ratio to the raw hop rate (target: at least 0.25);
* the wall time of ``simharness run scenarios/bagel_cfg.yaml`` as a user runs it (target: under
  1 s), in process and as a fresh process.

Each figure is the best of several repetitions; machines are noisy, so this is a benchmark and
not a test. Run: ``python benchmarks/bench_sim.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import simpy

from simharness.run import run_scenario
from simharness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parent.parent
BAGEL = ROOT / "scenarios" / "bagel_cfg.yaml"
LOADED = ["workload=[{request: t2i, count: 128, concurrency: 16}]"]


def simpy_hop_rate(hops: int = 100_000) -> float:
    env = simpy.Environment()
    a, b = simpy.Store(env), simpy.Store(env)

    def ping():
        for i in range(hops // 2):
            b.put(i)
            yield a.get()

    def pong():
        for _ in range(hops // 2):
            m = yield b.get()
            yield env.timeout(0.001)
            a.put(m)

    env.process(ping())
    env.process(pong())
    # CPU time, as the forward rates it is compared with: on a shared machine the wall clock
    # also counts the time another process (or another VM) had the core.
    t = time.process_time()
    env.run()
    return hops / (time.process_time() - t)


def loaded_forward_rate(runtime: str) -> tuple[float, int, float]:
    """(forwards per CPU second, forwards, CPU seconds) of the loaded bagel_cfg, run as
    `simharness run` runs it: every check, the digest as the run goes, no trace kept."""
    sc = load_scenario(BAGEL, LOADED)
    t = time.process_time()
    report = run_scenario(sc, runtime, keep_trace=False)
    cpu = time.process_time() - t
    forwards = sum(n for _, n in report.result.forward_log.counts())
    return forwards / cpu, forwards, cpu


def default_wall() -> float:
    sc = load_scenario(BAGEL)
    t = time.perf_counter()
    run_scenario(sc)
    return time.perf_counter() - t


def cli_wall() -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "simharness.cli", "run", str(BAGEL), "--json"],
                   check=True, capture_output=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    hop = max(simpy_hop_rate() for _ in range(args.repeat))
    print(f"raw simpy message hops        {hop:12,.0f} /s")
    for runtime in ("mstar-python", "mstar-rust-prefix"):
        best = max((loaded_forward_rate(runtime) for _ in range(args.repeat)), key=lambda r: r[0])
        rate, n, wall = best
        ratio = rate / hop
        verdict = "meets" if ratio >= 0.25 else "MISSES"
        print(f"loaded bagel_cfg, {runtime:<18} {rate:10,.0f} forwards/s  ({n} forwards in {wall:.2f} s CPU)"
              f"  ratio {ratio:.2f} of raw simpy: {verdict} the 0.25 target")
    dw = min(default_wall() for _ in range(args.repeat))
    cw = min(cli_wall() for _ in range(args.repeat))
    print(f"default scenario in process   {dw:12.3f} s   ({'meets' if dw < 1 else 'MISSES'} the 1 s target)")
    print(f"default scenario, fresh CLI   {cw:12.3f} s   (interpreter start and imports included)")


if __name__ == "__main__":
    main()
