"""One measured run in a fresh process, for the figures that need a process of their own.

``python -m benchmarks.probe bagel REQUESTS [RUNTIME]`` or ``python -m benchmarks.probe fanout
RANKS REQUESTS ITERS [RUNTIME]`` runs the scenario with every built-in check and no trace kept
(as a soak would), and prints one JSON line: wall seconds of the simulation, forwards run, and
the process's peak resident memory. Peak memory is only meaningful in a process that ran nothing
else, hence a process per figure.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BAGEL = ROOT / "scenarios" / "bagel_cfg.yaml"


def bagel(requests: int, concurrency: int = 16):
    from simharness.scenario.loader import load_scenario

    return load_scenario(BAGEL, [f"workload=[{{request: t2i, count: {requests}, "
                                 f"concurrency: {concurrency}}}]"], allow_large=True)


def fanout(ranks: int, requests: int, iters: int, concurrency: int = 4):
    """bagel_cfg's shape on `ranks` ranks: a loop of `ranks - 1` parallel branches, each on its
    own rank, and a combine on rank 0 that feeds every branch the next iteration."""
    from simharness.scenario.loader import parse_scenario

    branches = [f"b{i}" for i in range(1, ranks)]
    body = {"sequential": [
        {"parallel": [{"node": b, "inputs": ["x"], "outputs": [{"name": f"v_{b}", "to": "combine"}]}
                      for b in branches]},
        {"node": "combine", "inputs": [*(f"v_{b}" for b in branches), "x"],
         "outputs": [*({"name": "x", "to": b} for b in branches), {"name": "x", "to": "combine"}]},
    ]}
    walk = {"sequential": [
        {"loop": {"name": "steps", "max_iters": iters, "body": body,
                  "outputs": [{"name": "x", "to": "decode"}]}},
        {"node": "decode", "inputs": ["x"], "outputs": [{"name": "out", "to": "client"}]},
    ]}
    raw = {
        "name": f"fanout{ranks}",
        "graph": {"nodes": {"combine": {"service_ms": 2}, "decode": {"service_ms": 20},
                            **{b: {"service_ms": 30} for b in branches}},
                  "walks": {"gen": walk}, "requests": {"req": {"walks": ["gen"]}}},
        "placement": {"max_concurrent_requests": 16, "node_groups": [
            {"node_names": ["combine", "decode"], "ranks": [0]},
            *({"node_names": [b], "ranks": [i]} for i, b in enumerate(branches, start=1))]},
        "workload": [{"request": "req", "count": requests, "concurrency": concurrency}],
        "network": {"latency_us": 10, "bandwidth_gbps": 100},
    }
    return parse_scenario(raw, source=f"<fanout {ranks} ranks>", allow_large=True)


#: the benchmark's 64-rank layout: (ranks, requests, iterations) of `fanout`; its forward rate
#: and its instruction counts (`benchmarks.instructions`) run this one
FANOUT_64 = (64, 4, 10)


def measure(scenario, runtime: str | None = None) -> dict[str, Any]:
    """A run exactly as `simharness run` makes it (every check, the digest, no trace kept); the
    forwards are counted afterwards from the forwards check's log, not by another observer."""
    from simharness.run import simulate

    t, c = time.perf_counter(), time.process_time()
    result, violations = simulate(scenario, runtime, keep_trace=False)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    forwards = sum(n for _, n in result.forward_log.counts())
    return {"wall_s": wall, "cpu_s": cpu, "forwards": forwards, "violations": len(violations),
            "requests": len(result.outcomes),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def measure_parts(scenario, runtime: str | None = None, checks: bool = True,
                  digest: bool = True) -> dict[str, Any]:
    """As `measure`, with the built-in checks and the digest each optional: what the runtime
    model and the engine cost alone, and what the checks and the digest add on top. No observer
    counts the forwards in the timed run (that would cost as much as a small check): they are
    the same in every run of the scenario, and counted once in a run of their own."""
    from simharness.checks import RunSetup, build_checks
    from simharness.engine.simulation import Simulation
    from simharness.run import build_runtime

    forwards = _forwards_of(scenario, runtime)
    setup = RunSetup.of(scenario)  # one layout for the run and its checks, as `simulate` does
    observers = build_checks(setup) if checks else ()
    t, c = time.perf_counter(), time.process_time()
    sim = Simulation(scenario, build_runtime(scenario, runtime), observers=observers,
                     layout=setup.layout, keep_trace=False, digest=digest)
    sim.run()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return {"wall_s": wall, "cpu_s": cpu, "forwards": forwards}


#: (scenario, runtime) -> forwards of a run (`measure_parts` times runs without counting them)
_FORWARDS: dict[tuple[int, str | None], tuple[Any, int]] = {}


def _forwards_of(scenario, runtime: str | None) -> int:
    key = (id(scenario), runtime)
    if key not in _FORWARDS:  # the scenario is kept beside its count, so its id stays its own
        _FORWARDS[key] = (scenario, measure(scenario, runtime)["forwards"])
    return _FORWARDS[key][1]


def main(argv: list[str]) -> None:
    kind = argv[0]
    if kind == "bagel":
        sc = bagel(int(argv[1]))
        runtime = argv[2] if len(argv) > 2 else None
    elif kind == "fanout":
        sc = fanout(int(argv[1]), int(argv[2]), int(argv[3]))
        runtime = argv[4] if len(argv) > 4 else None
    else:
        raise SystemExit(f"unknown probe {kind!r}")
    print(json.dumps(measure(sc, runtime)))


if __name__ == "__main__":
    main(sys.argv[1:])
