"""Fuzzing speed: examples per second per core on small layouts, and the time to shrink a failure.

Prints:
* examples per second in one process (one core) over generated scenarios of at most 4 nodes
  (generation, validation, simulation with every check, coverage; target: 50 per second), the
  same over the default generator (up to 10 nodes, several walks, streams, TP, KV, dynamic loops,
  faults; target: 100 per second), and over each feature family alone (`strategies.FAMILIES`),
  so that one slow mechanism shows;
* the time Hypothesis takes to shrink the loop-exit drift under ``mstar-rust-prefix`` from the
  first failing example of a campaign to the minimal case (target: under 60 s), with its size.

Each figure is the best of ``--repeat`` runs; this is a benchmark, not a test.
Run: ``python benchmarks/bench_fuzz.py [--examples N] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import time

from simharness.explore.campaign import ChunkSpec, explore_chunk, shrink
from simharness.explore.strategies import FAMILIES


def rate(runtime: str, examples: int, max_nodes: int, seed: int,
         features: frozenset[str] | None = None) -> float:
    t0 = time.perf_counter()
    done = 0
    index = 0
    while done < examples:
        spec = ChunkSpec(runtime, seed, index, min(50, examples - done), max_nodes=max_nodes,
                         features=features)
        done += explore_chunk(spec).examples
        index += 1
    return done / (time.perf_counter() - t0)


def shrink_time(seed: int) -> tuple[float, int, int, int, int, int]:
    index = 0
    while True:
        spec = ChunkSpec("mstar-rust-prefix", seed, index, 50)
        found = explore_chunk(spec).findings.get("loop_exit:peer")
        if found is not None:
            t0 = time.perf_counter()
            sh = shrink(spec, found)
            return time.perf_counter() - t0, found.nodes, found.ranks, sh.nodes, sh.ranks, sh.calls
        index += 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=500)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    for label, nodes, target in (("small layouts (<= 4 nodes)", 4, 50),
                                 ("default generator (<= 10 nodes)", 10, 100)):
        for runtime in ("mstar-rust-prefix", "mstar-python"):
            best = max(rate(runtime, args.examples, nodes, seed) for seed in range(args.repeat))
            verdict = "meets" if best >= target else "misses"
            print(f"{label:<32} {runtime:<18} {best:7.1f} examples/s per core "
                  f"({verdict} the {target}/s target)")
    for family, features in sorted(FAMILIES.items()):
        best = max(rate("mstar-python", args.examples, 10, seed, features)
                   for seed in range(args.repeat))
        print(f"{'family ' + family:<32} {'mstar-python':<18} {best:7.1f} examples/s per core")
    for seed in range(args.repeat):
        wall, n0, r0, n1, r1, calls = shrink_time(seed)
        verdict = "meets" if wall < 60 else "misses"
        print(f"shrink loop_exit:peer (campaign seed {seed}): {n0} nodes/{r0} ranks -> "
              f"{n1} nodes/{r1} ranks in {wall:.1f} s, {calls} test calls ({verdict} the 60 s target)")


if __name__ == "__main__":
    main()
