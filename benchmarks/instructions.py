"""Instructions per simulated forward and per raw simpy hop, counted by valgrind's cachegrind.

Two layouts, as the forward rates of ``python -m benchmarks``: a loaded bagel_cfg, and the
64-rank fan-out (`benchmarks.probe.FANOUT_64`), whose clock figure swings most with the host.

The clock on a shared machine drifts, and not evenly: a fast spell speeds a raw simpy hop up
more than a forward (docs/performance.md). An instruction count does not move with the host, so
a change to the hot path can be judged by it in one run, before and after, with no noise. Each
figure is the count of a run minus the count of the same process that stops before the measured
part (imports, the scenario read, one small warm-up run), divided by the forwards or hops.

Run: ``python -m benchmarks.instructions [--requests N]`` (about two minutes: each process runs
some 50 times slower under valgrind); ``python -m benchmarks --instructions`` adds the figures
to the full table. Needs ``valgrind`` on the PATH.

cachegrind runs sha256 without the CPU's SHA instructions, so the digest's hashing counts
several times what it costs on the machine: the figure with every check and the digest is an
upper bound, and the one without the digest is given beside it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")
#: hops of the raw simpy ping-pong that is counted
HOPS = 100_000
#: the layouts whose forwards are counted -> their name in the printed figures (``{requests}``:
#: bagel_cfg's size; the fan-out's is its own, `benchmarks.probe.FANOUT_64`)
LAYOUTS = {"bagel": "bagel_cfg x{requests}", "fanout": "64-rank layout"}


def available() -> bool:
    return shutil.which("valgrind") is not None


def _count(*args: str) -> int:
    """Instructions of ``python -m benchmarks.instructions --child ARGS`` under cachegrind."""
    # One hash seed for every process: string hashing decides how dicts and sets lay out, which
    # moves a count by a few tenths of a percent from one process to the next.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, "-m", "benchmarks.instructions", "--child", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    found = _REFS.search(out.stderr)
    if found is None:
        raise RuntimeError(f"cachegrind printed no instruction count:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_forward(runtime: str, requests: int, layout: str = "bagel") -> dict[str, float]:
    """Instructions per forward of a run with every check, with the digest (``digest``) and
    without it (``checks``), and the run's ``forwards``: a loaded bagel_cfg of `requests`
    requests, or (``layout="fanout"``) the benchmark's 64-rank fan-out, whose size is its own."""
    from benchmarks.probe import measure

    base = _count(layout, runtime, str(requests), "none")
    n = measure(_scenario(layout, requests), runtime)["forwards"]
    return {"forwards": n,
            **{what: (_count(layout, runtime, str(requests), what) - base) / n
               for what in ("checks", "digest")}}


def per_hop() -> float:
    return (_count("hops", str(HOPS)) - _count("hops", "0")) / HOPS


def _scenario(layout: str, requests: int):
    if layout == "fanout":
        from benchmarks.probe import FANOUT_64, fanout

        return fanout(*FANOUT_64)
    if layout != "bagel":
        raise ValueError(f"no layout {layout!r}: one of {', '.join(LAYOUTS)}")
    from benchmarks.bench_sim import BAGEL
    from simharness.scenario.loader import load_scenario

    return load_scenario(BAGEL, [f"workload=[{{request: t2i, count: {requests}, concurrency: 16}}]"])


def _child(args: list[str]) -> None:
    """What one counted process runs: everything up to the measured part, then (unless told
    ``none`` or 0) the measured part."""
    if args[0] == "hops":
        from benchmarks.bench_sim import simpy_hop_rate

        if int(args[1]):
            simpy_hop_rate(int(args[1]))
        return
    layout, runtime, requests, what = args
    from benchmarks.bench_sim import BAGEL
    from simharness.checks import RunSetup, build_checks
    from simharness.engine.simulation import Simulation
    from simharness.run import build_runtime
    from simharness.scenario.loader import load_scenario

    sc = _scenario(layout, int(requests))
    small = load_scenario(BAGEL)  # the warm-up: every lazy import and first-use cache
    setup = RunSetup.of(small)  # one layout for the run and its checks, as `simulate` does
    Simulation(small, build_runtime(small, runtime), observers=build_checks(setup), layout=setup.layout,
               keep_trace=False).run()
    if what == "none":
        return
    setup = RunSetup.of(sc)
    Simulation(sc, build_runtime(sc, runtime), observers=build_checks(setup), layout=setup.layout,
               keep_trace=False, digest=what == "digest").run()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.instructions",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64, help="bagel_cfg requests (default 64)")
    ap.add_argument("--runtime", default="mstar-python")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    if not available():
        print("valgrind is not installed: no instruction counts", file=sys.stderr)
        return 2
    hop = per_hop()
    print(f"raw simpy hop                               {hop:10,.0f} instructions")
    for layout, name in LAYOUTS.items():
        fwd = per_forward(args.runtime, args.requests, layout)
        name = name.format(requests=args.requests)
        print(f"{name:<14} forward, checks and digest   {fwd['digest']:10,.0f} instructions  "
              f"({hop / fwd['digest']:.2f}x of a hop; {fwd['forwards']:,} forwards)")
        print(f"{name:<14} forward, checks, no digest   {fwd['checks']:10,.0f} instructions  "
              f"({hop / fwd['checks']:.2f}x of a hop)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
