"""Import every config shipped with mstar-ai and run it under `mstar-python` and `mstar`.

Prints the markdown table of docs/fidelity.md ("Every shipped config"): config, model, walks,
ranks, worker graphs, the outcome under each runtime, and what was not derived from mstar's code.
With ``--write`` it replaces the table in docs/fidelity.md between its markers.

    python scripts/mstar_configs.py [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

from simharness.mstar.build import import_config
from simharness.mstar.package import default_config_names
from simharness.run import run_scenario
from simharness.scenario.loader import parse_scenario

BEGIN = "<!-- mstar-configs:begin (scripts/mstar_configs.py --write) -->"
END = "<!-- mstar-configs:end -->"
DOC = Path(__file__).resolve().parent.parent / "docs" / "fidelity.md"


def outcome(report) -> str:
    if report.outcome == "pass":
        return "pass"
    checks = sorted({v.check for v in report.violations})
    return "fail (" + ", ".join(checks) + ")"


def row(name: str) -> str:
    with contextlib.redirect_stderr(io.StringIO()):
        imported = import_config(name)
        sc = parse_scenario(imported.raw, source=f"{name}.yaml", default_name=name)
        model = run_scenario(sc, "mstar-python")
        real = run_scenario(sc, "mstar")
    same = "same trace" if model.trace_digest == real.trace_digest else "traces differ"
    return (f"| {name} | {imported.model} | {len(sc.walks)} | {sc.placement.num_ranks} | "
            f"{imported.worker_graphs} | {outcome(model)} | {outcome(real)} ({same}) | "
            f"{', '.join(imported.defaulted) or '-'} |")


def table() -> str:
    lines = ["| config | model | walks | ranks | worker graphs | mstar-python | mstar | "
             "defaults (not derived) |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [row(name) for name in default_config_names()]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="replace the table in docs/fidelity.md")
    args = p.parse_args()
    text = table()
    if not args.write:
        print(text)
        return 0
    from simharness.fileio import write_text

    doc = DOC.read_text(encoding="utf-8")
    if BEGIN not in doc or END not in doc:
        print(f"{DOC}: no table markers", file=sys.stderr)
        return 2
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    write_text(DOC, head + BEGIN + "\n" + text + "\n" + END + tail)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
