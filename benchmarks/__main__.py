"""Every performance figure of the project in one run, each with its target and met/missed.

``python -m benchmarks`` (the full set: includes a 100,000-request soak, which takes a long
time) or ``python -m benchmarks --quick`` (smaller sizes, under a minute on a quiet machine;
sizes it skips are said so). Figures:

* raw simpy message hops per second: the ceiling of any simpy model on this machine;
* simulated forwards per second on a loaded bagel_cfg under every mstar profile (target: at
  least 0.25x the raw hop rate, the issue's acceptance), and on a 64-rank layout (no target of its
  own: a wide layout is judged by the cost growth in ranks below), each as a ratio to the raw hop
  rate measured in turn with them; both in CPU time, which a busy machine disturbs far less than
  wall time;
* peak memory of a bagel_cfg run after 100, 10,000 and 100,000 requests, each in a fresh process
  (target: under 500 MB at 100,000);
* cost growth: wall time against requests (10 to 100,000) and against ranks (8, 64, 512), with
  the exponent of a least-squares fit on log-log axes (target: near linear, at most 1.15), and a
  plot of both curves (``--plot FILE``, default reports/benchmarks/growth.png; needs matplotlib);
* fuzz examples per second (no target: a figure to compare over time);
* a fresh ``simharness run scenarios/bagel_cfg.yaml`` process (target: under 0.4 s), and one
  with ``--runtime mstar``, the real stack (target: under 5 s; needs mstar-ai);
* zmq backend message rates against bare pyzmq (target: within 3x), when pyzmq and torch are
  installed;
* with ``--instructions`` (needs valgrind; about two minutes more): instructions per forward on
  bagel_cfg and on the 64-rank layout, and per raw hop, and their ratios, which the host's drift
  does not move (`benchmarks.instructions`).

Ratios are measured side by side in one run, so they hold on a busy machine better than the
absolute figures do; timings are best-of-N. This is a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_sim import BAGEL, LOADED, simpy_hop_rate
from benchmarks.probe import FANOUT_64, fanout, measure, measure_parts

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("mstar-python", "mstar-rust-prefix", "mstar-rust")
#: the target: simulated forwards per second at least this share of the raw simpy hop rate
MIN_HOP_SHARE = 0.25
#: what a forward rate's row is held to: TARGET, a verdict against MIN_HOP_SHARE; or no verdict,
#: with what the target column says instead: BREAKDOWN (a part of a targeted figure's time) or
#: FIGURE (a figure printed for itself)
TARGET, BREAKDOWN, FIGURE = "target", "(a breakdown)", "(no target)"


class Table:
    """The printed figures, and the JSON of them (``--json FILE``)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, figure: str, value: str, target: str = "", met: bool | None = None,
            **data: Any) -> None:
        verdict = "" if met is None else ("met" if met else "MISSED")
        self.rows.append({"figure": figure, "value": value, "target": target, "verdict": verdict,
                          **data})
        print(f"{figure:<46} {value:>32}  {target:<18} {verdict}", flush=True)


def fit_exponent(xs: list[float], ys: list[float]) -> float:
    """The slope of log(y) against log(x), least squares: y ~ x^slope."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    num = sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True))
    den = sum((a - mx) ** 2 for a in lx)
    return num / den


def probe(*args: Any) -> dict[str, Any]:
    """A measured run in a fresh process (peak memory is per process)."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.probe", *map(str, args)], cwd=ROOT,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def forwards_per_second(table: Table, repeat: int, loaded: int, hops: int) -> None:
    """Forward rates as ratios to the raw simpy hop rate. Both are CPU-time rates (what another
    process or VM takes of the core is not counted), and the hop rate is measured again before
    every round of forward runs, so that a slow spell of the machine touches both sides."""
    from simharness.scenario.loader import load_scenario

    sc = load_scenario(BAGEL, LOADED if loaded == 128 else
                       [f"workload=[{{request: t2i, count: {loaded}, concurrency: 16}}]"])
    sc64 = fanout(*FANOUT_64)
    # (label, what one measurement runs, what its ratio is held to: TARGET, BREAKDOWN or FIGURE)
    runs: list[tuple[str, Any, str]] = [
        *((f"forwards/s, bagel_cfg x{loaded}, {runtime}", lambda rt=runtime: measure(sc, rt), TARGET)
          for runtime in PROFILES),
        # Where the time of a forward goes: the runtime model and the engine alone, then with the
        # checks (the digest and judging at the end make up the mstar-python figure above).
        (f"  bagel_cfg x{loaded}, mstar-python, model and engine only",
         lambda: measure_parts(sc, "mstar-python", False, False), BREAKDOWN),
        (f"  bagel_cfg x{loaded}, mstar-python, with checks, no digest",
         lambda: measure_parts(sc, "mstar-python", True, False), BREAKDOWN),
        # The issue asks for this ratio, and holds the 0.25x to bagel_cfg under each mstar
        # profile; a wide layout is held to the cost growth in ranks (docs/performance.md).
        ("forwards/s, 64-rank layout, mstar-python", lambda: measure(sc64, "mstar-python"), FIGURE),
    ]
    hop = 0.0
    best = [0.0] * len(runs)
    #: per figure, each round's ratio to the hop rate measured at the start of that round
    rounds: list[list[float]] = [[] for _ in runs]
    for _ in range(repeat):
        this_hop = simpy_hop_rate(hops)
        hop = max(hop, this_hop)
        for i, (_, run, _) in enumerate(runs):
            m = run()
            rate = m["forwards"] / m["cpu_s"]
            best[i] = max(best[i], rate)
            rounds[i].append(rate / this_hop)
    table.add("raw simpy message hops/s (CPU time)", f"{hop:,.0f}", "(the ceiling)", None, rate=hop)
    for (label, _, held_to), rate, ratios in zip(runs, best, rounds, strict=True):
        # The verdict is the best rate over the best hop rate; the median of the rounds' own
        # ratios is shown beside it, as what a typical run gives on this machine.
        median = statistics.median(ratios)
        targeted = held_to == TARGET
        table.add(label, f"{rate:,.0f} ({rate / hop:.2f}x; median {median:.2f}x)",
                  f">= {MIN_HOP_SHARE:g}x simpy" if targeted else held_to,
                  rate / hop >= MIN_HOP_SHARE if targeted else None, rate=rate, ratio=rate / hop,
                  median_ratio=median, round_ratios=ratios)


def memory_and_growth(table: Table, quick: bool, plot: str | None) -> None:
    sizes = [10, 100, 1_000] if quick else [10, 100, 1_000, 10_000, 100_000]
    runs = {}
    for n in sizes:
        runs[n] = probe("bagel", n)
        m = runs[n]
        if n in (100, 10_000, 100_000) or (quick and n == 1_000):
            target, met = ("< 500 MB", m["peak_mb"] < 500) if n == 100_000 else ("", None)
            table.add(f"peak memory, bagel_cfg x{n:,} requests", f"{m['peak_mb']:,.0f} MB "
                      f"({m['wall_s']:.1f} s)", target, met, **m)
    if quick:
        table.add("peak memory, bagel_cfg x100,000 requests", "skipped (--quick)", "< 500 MB")
    req_exp = fit_exponent(sizes, [runs[n]["wall_s"] for n in sizes])
    table.add(f"cost growth in requests ({sizes[0]:,}..{sizes[-1]:,})", f"exponent {req_exp:.2f}",
              "<= 1.15", req_exp <= 1.15, exponent=req_exp)
    ranks = [8, 64, 512]
    # the 64-rank layout's shape (its requests and iterations; fewer iterations when quick) at
    # each rank count
    _, requests, iters = FANOUT_64
    per_rank = {r: probe("fanout", r, requests, 3 if quick else iters) for r in ranks}
    rank_exp = fit_exponent(ranks, [per_rank[r]["wall_s"] for r in ranks])
    table.add("cost growth in ranks (8, 64, 512)", f"exponent {rank_exp:.2f}", "<= 1.15",
              rank_exp <= 1.15, exponent=rank_exp,
              per_forward_us={r: 1e6 * per_rank[r]["wall_s"] / per_rank[r]["forwards"] for r in ranks})
    if plot:
        _plot(plot, sizes, runs, ranks, per_rank, req_exp, rank_exp, table)


def _plot(path: str, sizes, runs, ranks, per_rank, req_exp, rank_exp, table: Table) -> None:
    try:
        import matplotlib
    except ImportError:
        table.add("growth plot", "skipped: matplotlib is not installed (pip install matplotlib)")
        return
    matplotlib.use("Agg")  # a file, never a window
    import matplotlib.pyplot as plt

    from simharness.fileio import write_bytes

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.loglog(sizes, [runs[n]["wall_s"] for n in sizes], "o-", label=f"wall s (exponent {req_exp:.2f})")
    a.loglog(sizes, [runs[n]["peak_mb"] for n in sizes], "s--", label="peak MB")
    a.set_xlabel("bagel_cfg requests")
    a.legend()
    b.loglog(ranks, [per_rank[r]["wall_s"] for r in ranks], "o-", label=f"wall s (exponent {rank_exp:.2f})")
    b.set_xlabel("ranks (fan-out layout)")
    b.legend()
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, buf.getvalue())  # atomically
    table.add("growth plot", path)


def fuzz_rate(table: Table, examples: int) -> None:
    from simharness.explore.campaign import CampaignConfig, run_campaign

    cfg = CampaignConfig("mstar-python", seed=0, examples=examples, shrink=False)
    t = time.perf_counter()
    result = run_campaign(cfg)
    wall = time.perf_counter() - t
    table.add(f"fuzz examples/s ({result.examples} examples)", f"{result.examples / wall:,.1f}",
              "(no target)", None, rate=result.examples / wall)


def startup(table: Table, repeat: int) -> None:
    # A fresh process of an installed tool reads its modules' cached bytecode (pip writes it at
    # install, an editable install on its first run). The children get a bytecode cache of their
    # own, in a temporary folder, filled by one run that is not counted: an environment that
    # turns bytecode writing off (PYTHONDONTWRITEBYTECODE) would otherwise time the compiling
    # of every module of the project, and the checkout is not written to.
    with tempfile.TemporaryDirectory(prefix="simharness-pycache-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache

        # The console script a user types, where the install made one beside this interpreter.
        script = Path(sys.executable).with_name("simharness")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "simharness.cli"]

        def once(*extra: str) -> float:
            t = time.perf_counter()
            subprocess.run([*command, "run", str(BAGEL), *extra], cwd=ROOT, env=env, check=True,
                           capture_output=True)
            return time.perf_counter() - t

        once()
        best = min(once() for _ in range(repeat))
        table.add("fresh `simharness run bagel_cfg.yaml`", f"{best:.3f} s", "< 0.4 s", best < 0.4,
                  seconds=best)
        # The real stack imports mstar's worker and conductor (torch among them) in the process.
        from simharness.mstar.stack.runtime import MstarStack

        if not MstarStack.available():
            table.add("fresh `... --runtime mstar` (the real stack)",
                      "skipped: mstar-ai's stack is not installed")
            return
        once("--runtime", "mstar")
        best = min(once("--runtime", "mstar") for _ in range(repeat))
        table.add("fresh `... --runtime mstar` (the real stack)", f"{best:.3f} s", "< 5 s",
                  best < 5, seconds=best)


def instruction_counts(table: Table) -> None:
    from benchmarks import instructions

    if not instructions.available():
        table.add("instructions per forward", "skipped: valgrind is not installed")
        return
    hop = instructions.per_hop()
    table.add("instructions per raw simpy hop", f"{hop:,.0f}", "(the ceiling)", None, count=hop)
    for layout, name in instructions.LAYOUTS.items():
        fwd = instructions.per_forward("mstar-python", 64, layout)
        name = name.format(requests=64)
        for what, label in (("digest", "checks and digest"), ("checks", "checks, no digest")):
            table.add(f"instructions per forward, {name}, {label}",
                      f"{fwd[what]:,.0f} ({hop / fwd[what]:.2f}x)", "(by instructions)", None,
                      count=fwd[what], ratio=hop / fwd[what])


def zmq_rates(table: Table, n: int) -> None:
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("zmq", "torch", "msgpack", "msgspec")):
        table.add("zmq message rates", "skipped: pip install 'simharness[real]'")
        return
    from benchmarks.bench_real import MAX_SLOWDOWN, rates, slowdown

    for label, ours, bare, size, turns in rates(n):
        # As for the forward rates: the verdict is best over best, each turn's own ratio beside it
        (ratio, met), median = slowdown(ours, bare), statistics.median(turns)
        table.add(f"zmq {label} ({size:,} B)", f"{ours:,.0f}/s ({ratio:.1f}x; median {median:.1f}x)",
                  f"within {MAX_SLOWDOWN:g}x bare", met, rate=ours, bare=bare,
                  ratio=ratio, median_ratio=median, turn_ratios=turns)


def search_figures(table: Table, quick: bool) -> None:
    from benchmarks.bench_search import TARGET_FINDINGS, TARGET_RATIO, measure

    rows = measure(quick)
    met = 0
    for r in rows:
        ok = r["ratio"] >= TARGET_RATIO
        met += ok
        more = ">=" if r["capped"] else ""
        table.add(f"runs to hit: {r['finding']}",
                  f"pct {r['pct']:g}, random {more}{r['random']:g} ({more}{r['ratio']:.1f}x)",
                  f"(within {r['bound_ms']:g} ms)", None, **r)
    table.add("PCT >= 5x fewer runs than random", f"on {met} of {len(rows)} findings",
              f">= {TARGET_RATIO:g}x on {TARGET_FINDINGS}", met >= TARGET_FINDINGS, findings_met=met)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes: under a minute")
    ap.add_argument("--plot", default="reports/benchmarks/growth.png", metavar="FILE",
                    help="where the growth plot goes (default reports/benchmarks/growth.png; "
                         "'' for none)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions per forward and per hop (needs valgrind)")
    ap.add_argument("--search", action="store_true",
                    help="only the schedule search figures: runs PCT and random delays each need "
                         "to first hit four order-dependent findings (median over seeds)")
    args = ap.parse_args(argv)
    quick = args.quick
    repeat = 2 if quick else 3
    table = Table()
    print(f"{'figure':<46} {'value':>32}  {'target':<18} verdict")
    if args.search:
        search_figures(table, quick)
        return _finish(table, args, quick)
    forwards_per_second(table, repeat, 32 if quick else 128, 50_000 if quick else 100_000)
    startup(table, 3 if quick else 5)
    memory_and_growth(table, quick, args.plot or None)
    fuzz_rate(table, 50 if quick else 300)
    # 20,000 small messages last about 0.1 s on the backend: fewer would time process scheduling
    zmq_rates(table, 20_000 if quick else 50_000)
    if args.instructions:
        instruction_counts(table)
    return _finish(table, args, quick)


def _finish(table: Table, args: argparse.Namespace, quick: bool) -> int:
    missed = [r["figure"] for r in table.rows if r["verdict"] == "MISSED"]
    print(f"\n{len(table.rows)} figures, {len(missed)} missed" + (f": {'; '.join(missed)}" if missed else ""))
    if args.json:
        from simharness.fileio import write_text

        write_text(args.json, json.dumps({"quick": quick, "figures": table.rows},
                                                      indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
