"""Schedule search measured against random delays: how many runs each needs to first hit an
order-dependent finding, both searching the same space (every delay within one bound).

Each scenario in benchmarks/scenarios/ passes in its default order and fails in some other order
that the transport permits; it has one mechanism, so its first failure is that finding. For each,
`runs_to_hit` runs ``explore``'s PCT and its random-delay baseline at several seeds, each until
the first failing run or a cap, and the figure is the median over seeds (a search that hit the
cap counts as the cap: the ratio is then a lower bound). Counts of runs, not time: the figures
do not depend on the machine.

The bound per finding is a little above the delay the mechanism needs (the gap between the two
messages' nominal arrivals): the regime the issue is about, where a realistic bound makes the
needed delay rare among random draws. With a far larger bound a one-message race is easy for
random delays too (the TP REMOVE race is easy at any bound).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent / "scenarios"
#: the target: PCT needs at least this many times fewer runs than random on at least
TARGET_RATIO = 5.0
#: ... this many of the findings
TARGET_FINDINGS = 3


@dataclass(frozen=True)
class Finding:
    label: str
    scenario: str
    bound_ms: float


FINDINGS = (
    Finding("TP REMOVE race (bagel-style TP2 group)", "tp_remove_race.yaml", 2.0),
    Finding("producer_done overtakes the last item", "stream_done_overtakes.yaml", 6.0),
    Finding("STOP_LOOPS before a peer's walk starts", "stop_before_walk.yaml", 2.0),
    Finding("late STOP_LOOPS on a three-rank chain", "stop_loops_late_chain.yaml", 2.0),
)


def runs_to_hit(scenario: object, schedule: str, seed: int, bound_s: float, cap: int) -> int:
    """Runs until the first failure under `schedule` at `seed` (the unperturbed run counts as
    none: every scenario passes it), or `cap` when none fails by then."""
    from simharness.explore.search import search

    result = search(scenario, "mstar-python", schedule, cap + 1, seed=seed, max_delay_s=bound_s,
                    stop_at_first=True)  # type: ignore[arg-type]
    return min((f.run for f in result.found.values()), default=cap)


def measure(quick: bool) -> list[dict[str, object]]:
    from simharness.scenario.loader import load_scenario

    seeds = range(5 if quick else 11)
    cap = 150 if quick else 500
    rows = []
    for f in FINDINGS:
        sc = load_scenario(HERE / f.scenario)
        per = {s: [runs_to_hit(sc, s, seed, f.bound_ms / 1000, cap) for seed in seeds]
               for s in ("pct", "random")}
        pct, rnd = statistics.median(per["pct"]), statistics.median(per["random"])
        rows.append({"finding": f.label, "scenario": f.scenario, "bound_ms": f.bound_ms,
                     "pct": pct, "random": rnd, "cap": cap, "seeds": len(seeds),
                     "pct_runs": per["pct"], "random_runs": per["random"],
                     "ratio": rnd / pct, "capped": rnd >= cap})
    return rows
