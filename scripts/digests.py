"""Print the trace digest of every shipped scenario under every shipped runtime, and of every
corpus case under its recorded runtime: one line each, sorted, for diffing before and after a
change that must not move digests (`python scripts/digests.py > before.txt`)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from simharness.explore.corpus import replay
from simharness.run import run_scenario
from simharness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parent.parent
RUNTIMES = ["mstar-python", "mstar-rust-prefix", "mstar-rust", "mstar"]


def main() -> int:
    lines = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        sc = load_scenario(path)
        for rt in RUNTIMES:
            try:
                digest = run_scenario(sc, rt).trace_digest
            except Exception as exc:  # a runtime that cannot run here is a line, not a stop
                digest = f"error {type(exc).__name__}"
            lines.append(f"{path.relative_to(ROOT)} {rt} {digest}")
    for path in sorted((ROOT / "scenarios" / "corpus").glob("*.yaml")):
        runtime = yaml.safe_load(path.read_text())["corpus"]["runtime"]

        rep = replay(path)
        lines.append(f"{path.relative_to(ROOT)} {runtime} {rep.digest}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
