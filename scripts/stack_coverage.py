"""How much of mstar-ai's own process code the real-stack arm runs: coverage.py over the shipped
scenarios under ``--runtime mstar``, per mstar module against its target, and whether each
entry point that must run was called.

    python scripts/stack_coverage.py            # every shipped scenario
    python scripts/stack_coverage.py --fail     # exit 1 when a target or a call is missed

Needs mstar-ai (``pip install --no-deps --ignore-requires-python mstar-ai==0.2.1``, the
``mstar`` extra) and coverage.py. A measurement, not a test: the figures move with the shipped
scenarios, and docs/fidelity.md records them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: module -> the share of its statements the shipped scenarios must execute
TARGETS = {
    "mstar.worker.node_manager_utils": 75.0,
    "mstar.worker.worker": 35.0,
    "mstar.conductor.conductor": 50.0,
    "mstar.worker.micro_scheduler": 45.0,
    "mstar.streaming.stream_buffer": 65.0,
}

#: (module, qualified name) of the entry points that must have run
CALLED = [
    ("mstar.worker.worker", "Worker._stop_loops"),
    ("mstar.worker.worker", "Worker._process_message_list"),
    ("mstar.worker.worker", "Worker._postprocess_batch"),
    ("mstar.worker.worker", "Worker._send_outputs"),
    ("mstar.worker.node_manager_utils", "WorkerGraphsManager.process_node_outputs"),
    ("mstar.worker.micro_scheduler", "MicroScheduler.get_next_batch"),
    ("mstar.conductor.conductor", "Conductor._process_worker_graphs_done"),
]


def _body_lines(module: str, qualname: str) -> tuple[str, set[int]]:
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    lines, first = inspect.getsourcelines(obj)
    # the def line runs at import; a call runs a line of the body
    return inspect.getsourcefile(obj) or "", set(range(first + 1, first + len(lines)))


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--fail", action="store_true", help="exit 1 when a target or call is missed")
    opts = args.parse_args(argv)
    import coverage

    files = {m: importlib.util.find_spec(m).origin for m in TARGETS}  # type: ignore[union-attr]
    cov = coverage.Coverage(include=list(files.values()), data_file=None)
    sys.path.insert(0, str(ROOT))
    from simharness.run import run_scenario
    from simharness.scenario import load_scenario

    scenarios = sorted((ROOT / "scenarios").glob("*.yaml"))
    outcomes = []
    cov.start()
    try:
        for path in scenarios:
            with contextlib.redirect_stderr(io.StringIO()):
                outcomes.append((path.name, run_scenario(load_scenario(path), "mstar").outcome))
    finally:
        cov.stop()
    data = cov.get_data()
    missed = 0
    print(f"{len(scenarios)} shipped scenarios under --runtime mstar: "
          + ", ".join(f"{n} {o}" for n, o in outcomes))
    print(f"{'module':40} {'covered':>8} {'target':>7}")
    for module, target in TARGETS.items():
        _, statements, _, missing, _ = cov.analysis2(files[module])
        share = 100.0 * (len(statements) - len(missing)) / max(1, len(statements))
        ok = share >= target
        missed += not ok
        print(f"{module:40} {share:7.1f}% {target:6.0f}% {'' if ok else 'BELOW'}")
    for module, qualname in CALLED:
        path, body = _body_lines(module, qualname)
        ran = bool(body & set(data.lines(path) or ()))
        missed += not ran
        print(f"{'called' if ran else 'NOT CALLED':10} {module}.{qualname}")
    return 1 if (opts.fail and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
