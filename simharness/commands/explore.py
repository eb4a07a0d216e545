"""``simharness explore``: search the orders of deliveries of one scenario for a failure.

The search is `simharness.explore.search`'s (PCT, random delays, or exhaustive with partial-order
reduction); this module owns the verb's arguments, its lines, the corpus cases it writes (each
failure's schedule shrunk to the deliveries it needs, replayable by ``simharness replay``) and its
exit code: 0 when no order failed, 1 when one did.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from simharness import interrupts
from simharness.commands import common
from simharness.errors import UsageError
from simharness.wording import plural

NAME = "explore"
HELP = "search the orders of message deliveries of one scenario for a failure"
DESCRIPTION = ("Run one scenario many times, a schedule deciding which message arrives when "
               "(FIFO per link, any order across links, optionally within a bound): PCT, "
               "random delays, or every distinct order of a small layout. Each failure's "
               "schedule is shrunk and written to the corpus, where 'simharness replay' runs "
               "it again bit for bit.")
EPILOG = ("Same scenario, --schedule, --seed and --runs: same result. A --time search ends by "
          "then, shrinking included. Exit codes: 0 no order failed, 1 a failure found, 2 bad "
          f"usage, {common.EXIT_CODES_COMMON}")

#: how long shrinking one failure's schedule may take when no --time says otherwise
SHRINK_S = 120.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--schedule", choices=("pct", "random", "exhaustive"), default="pct",
                   help="pct: priorities over links with DEPTH-1 change points (default); random: "
                        "a delay drawn per message within --max-delay-ms (1 ms if unset); "
                        "exhaustive: every distinct order, with partial-order reduction")
    p.add_argument("--runs", type=int, default=100, metavar="N",
                   help="runs of a pct or random search (default 100)")
    p.add_argument("--max-runs", type=int, default=1000, metavar="N",
                   help="at most this many runs of an exhaustive search (default 1000)")
    p.add_argument("--depth", type=int, default=3, metavar="D",
                   help="PCT's bug depth: D-1 priority change points per run (default 3)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="search seed (default 0)")
    p.add_argument("--max-delay-ms", type=float, metavar="MS",
                   help="no message arrives later than this after its nominal time (default: no "
                        "bound for pct and exhaustive; a held message waits while anything else "
                        "can happen)")
    p.add_argument("--runtime", metavar="NAME",
                   help="runtime under test (default: the scenario's); the real stack (mstar) "
                        "runs under it too")
    p.add_argument("--time", type=float, metavar="S",
                   help="budget in seconds for the whole search, shrinking included")
    p.add_argument("--corpus", metavar="DIR",
                   help="where failing schedules are written (default: the project's "
                        "scenarios/corpus, found as fuzz finds it)")
    p.add_argument("--no-write", action="store_true", help="do not write corpus cases")
    p.add_argument("--no-shrink", action="store_true", help="keep each failing schedule whole")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def main(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    from simharness.explore.search import search
    from simharness.scenario.loader import load_scenario

    _check(args)
    scenario = load_scenario(args.scenario)
    runtime = args.runtime or scenario.runtime.name
    common.check_runtime(runtime, scenario)
    corpus, where = _corpus(args)
    until = None if args.time is None else started + args.time
    bound = None if args.max_delay_ms is None else args.max_delay_ms / 1000
    runs = args.max_runs if args.schedule == "exhaustive" else args.runs
    from simharness.report.progress import StatusLine

    status = StatusLine(sys.stderr)
    failures: dict[str, int] = {}
    done = [0]

    def on_run(i: int, sig: str | None) -> None:
        done[0] = i + 1
        if sig is not None:
            failures[sig] = failures.get(sig, 0) + 1
        status.update(f"explore {args.schedule}: run {i + 1} of {runs}, "
                      f"{plural(sum(failures.values()), 'failing run')}")

    try:
        # The search's own budget leaves room to shrink what it finds.
        # An exhaustive search stops at its first failure ("failure found", with the schedule).
        result = search(scenario, runtime, args.schedule, runs, depth=args.depth, seed=args.seed,
                        max_delay_s=bound, until=None if until is None else started + 0.6 * args.time,
                        stop_at_first=args.schedule == "exhaustive", on_run=on_run)
    except KeyboardInterrupt as exc:
        status.done()
        stop = interrupts.as_interrupted(exc)
        stop.partial = (done[0], dict(failures))  # what the runs so far showed
        raise stop from None
    status.done()
    if where:
        print(where, file=sys.stderr)
    cases = _write(args, scenario, runtime, result, corpus, until)
    doc = _summary(args, scenario, runtime, result, cases, time.perf_counter() - started)
    if args.json:
        common.print_json(doc)
    else:
        _print(doc)
    return common.EXIT_FAIL if result.failed else common.EXIT_PASS


def partial(found: tuple[int, dict[str, int]], args: argparse.Namespace) -> None:
    """What the runs before the signal showed (nothing was shrunk or written)."""
    runs, failures = found
    seen = ", ".join(f"{sig} x{n}" for sig, n in failures.items()) or "no failure"
    print(f"explore {args.schedule}: {plural(runs, 'run')} before the signal: {seen} (not shrunk, "
          f"not written: run it again to keep a case)", file=sys.stderr)


def _check(args: argparse.Namespace) -> None:
    for flag, value in (("--runs", args.runs), ("--max-runs", args.max_runs), ("--depth", args.depth)):
        if value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.time is not None and not (math.isfinite(args.time) and args.time > 0):
        raise UsageError(f"--time must be a finite number of seconds > 0, got {args.time:g}")
    if args.max_delay_ms is not None and not (math.isfinite(args.max_delay_ms) and args.max_delay_ms > 0):
        raise UsageError(f"--max-delay-ms must be a finite number of milliseconds > 0, got "
                         f"{args.max_delay_ms:g}")


def _corpus(args: argparse.Namespace) -> tuple[Path, str]:
    if args.corpus is not None:
        corpus, where = Path(args.corpus), ""
    else:
        from simharness.explore.corpus import locate

        found = locate(Path(args.scenario).resolve().parent)
        corpus, where = found.path, found.describe()
    if corpus.exists() and not corpus.is_dir():
        raise UsageError(f"--corpus {corpus}: exists and is not a directory")
    if not args.no_write:
        common.check_creatable(corpus, "--corpus")
    return corpus, where


def _write(args: argparse.Namespace, scenario: Any, runtime: str, result: Any, corpus: Path,
           until: float | None) -> dict[str, dict[str, Any]]:
    """Shrink each failure's schedule and write it as a case; signature -> what was done."""
    from simharness.explore.corpus import case_name, read_case, write_case
    from simharness.explore.execute import size_of
    from simharness.explore.search import bare, replays, schedule_entries, shrink, with_deliveries
    from simharness.explore.verdict import verdict

    out: dict[str, dict[str, Any]] = {}
    for sig, found in result.found.items():
        moved = found.moved
        entry: dict[str, Any] = {"moved": len(moved)}
        if not args.no_shrink and moved:
            budget = time.perf_counter() + SHRINK_S if until is None else until
            moved = shrink(scenario, runtime, moved, sig, until=budget)
        entry["kept"] = len(moved)
        entry["deliveries"] = schedule_entries(moved)
        entry["replays"] = replays(scenario, runtime, moved, sig)
        if not entry["replays"]:
            out[sig] = entry
            continue
        name = f"{case_name(runtime, sig)}__{args.schedule}"
        path = corpus / f"{name}.yaml"
        known = path.exists()
        if known:  # its verdict is the case's, recorded (replay --update renews it)
            meta = read_case(path).meta
            judged = (meta.verdict if meta is not None else None) or {}
        else:  # does mstar's own stack show it? (it searches the stack's own orders)
            judged = verdict(with_deliveries(bare(scenario), moved), runtime, sig, until=until).to_json()
        entry["verdict"] = judged.get("text", "")
        if not args.no_write:
            if known:
                entry["case"], entry["known"] = str(path), True
            else:
                raw = _case_raw(scenario, entry["deliveries"])
                nodes, ranks = size_of(scenario)
                note = (f"Found by simharness explore --schedule {args.schedule} (seed {args.seed}, "
                        f"run {found.run}) on {Path(args.scenario).name}; its schedule moved "
                        f"{plural(len(found.moved), 'delivery', 'deliveries')}, "
                        f"{len(moved)} kept by shrinking.")
                written = write_case(corpus, raw, runtime, sig, seed=args.seed, example=found.run,
                                     nodes=nodes, ranks=ranks, note=note, name=name,
                                     found_by="explore", judged=judged)
                entry["case"], entry["known"] = str(written), False
        out[sig] = entry
    return out


def _case_raw(scenario: Any, deliveries: list[dict[str, Any]]) -> dict[str, Any]:
    """The scenario as its file has it, with the found schedule in place of its own."""
    import copy

    raw = copy.deepcopy(dict(scenario.raw))
    raw.pop("corpus", None)
    raw["schedule"] = {"deliveries": deliveries}
    return raw


def _summary(args: argparse.Namespace, scenario: Any, runtime: str, result: Any,
             cases: dict[str, dict[str, Any]], wall: float) -> dict[str, Any]:
    return {
        "scenario": args.scenario, "runtime": runtime, "schedule": args.schedule,
        "seed": args.seed, "depth": args.depth if args.schedule == "pct" else None,
        "max_delay_ms": args.max_delay_ms, "runs": result.runs, "distinct_orders": result.distinct,
        "steps": result.steps, "complete": result.complete, "stopped": result.stopped,
        "wall_s": round(wall, 2),
        "failures": [{"signature": sig, "first_run": f.run, "runs": f.count,
                      "message": f.messages[0] if f.messages else "", **cases.get(sig, {})}
                     for sig, f in result.found.items()],
    }


def _print(doc: dict[str, Any]) -> None:
    head = (f"explore {Path(doc['scenario']).name} under {doc['runtime']}: {doc['schedule']}"
            + (f" depth {doc['depth']}" if doc["depth"] else "")
            + (f", delays up to {doc['max_delay_ms']:g} ms" if doc["max_delay_ms"] else "")
            + f", seed {doc['seed']}: {plural(doc['runs'], 'run')}, "
            f"{plural(doc['distinct_orders'], 'distinct order')} of delivery, {doc['wall_s']} s")
    print(head)
    for f in doc["failures"]:
        first = ("in the scenario's own order (run 0: no reordering needed)" if f["first_run"] == 0
                 else f"first at run {f['first_run']}")
        print(f"FAIL {f['signature']}: {f['runs']} of {plural(doc['runs'], 'run')}, {first}")
        if f["message"]:
            print(f"  {f['message']}")
        if "kept" in f:
            print(f"  schedule: {plural(f['kept'], 'moved delivery', 'moved deliveries')}"
                  + (f" (shrunk from {f['moved']})" if f["kept"] != f["moved"] else ""))
            for d in f["deliveries"][:6]:
                print(f"    {d['message']} #{d['nth']} {d['from']} -> {d['to']}: held to "
                      f"{d['at_s'] * 1000:.3f} ms")
            if len(f["deliveries"]) > 6:
                print(f"    ... {len(f['deliveries']) - 6} more")
        if f.get("verdict"):
            print(f"  verdict: {f['verdict']}")
        if not f.get("replays", True):
            print("  its shrunk schedule does not replay the failure: not written")
        elif f.get("case"):
            print(f"  {'known case' if f['known'] else 'case'}: {f['case']}")
            print(f"  replay: simharness replay {f['case']}")
    if not doc["failures"]:
        if doc["complete"]:
            print(f"PASS: no failure in any of the {doc['distinct_orders']} distinct orders "
                  f"(complete)")
        elif doc["schedule"] == "exhaustive":
            print(f"PASS so far: {plural(doc['runs'], 'run')}, incomplete ({doc['stopped']})")
        else:
            print(f"PASS: no failure in {plural(doc['runs'], 'run')}")
    elif doc["schedule"] == "exhaustive":
        print(f"failure found after {plural(doc['runs'], 'run')} ({doc['distinct_orders']} distinct "
              f"orders); the search stops at the first")
