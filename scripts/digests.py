"""Print the trace digest of every shipped scenario, test scenario and corpus case under every
shipped runtime, at the file's own seed and at seeds 0 to 2: one line each, in a fixed order,
for diffing before and after a change that must not move digests
(`python scripts/digests.py > before.txt`). A runtime that cannot run here (mstar-ai missing)
prints an error line instead of stopping."""

from __future__ import annotations

import sys
from pathlib import Path

from simharness.run import run_scenario
from simharness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parent.parent
RUNTIMES = ["mstar-python", "mstar-rust-prefix", "mstar-rust", "mstar-graph", "mstar"]
#: None: the file's own seed (a corpus case's recorded one)
SEEDS = [None, 0, 1, 2]


def files() -> list[Path]:
    return [*sorted((ROOT / "scenarios").glob("*.yaml")),
            *sorted((ROOT / "scenarios" / "corpus").glob("*.yaml")),
            *sorted((ROOT / "tests" / "scenarios").glob("*.yaml"))]


def main() -> int:
    for path in files():
        sc = load_scenario(path)
        for rt in RUNTIMES:
            for seed in SEEDS:
                try:
                    digest = run_scenario(sc, rt, seed).trace_digest
                except Exception as exc:  # a runtime that cannot run here is a line, not a stop
                    digest = f"error {type(exc).__name__}"
                print(f"{path.relative_to(ROOT)} {rt} {'own' if seed is None else seed} {digest}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
