"""`python -m benchmarks` still measures what it says, at sizes a test can afford.

Speed is never asserted here (the benchmark's figures are measured on a quiet machine, side by
side): these tests hold the benchmark's parts to their shape, so that the one command that
prints every figure cannot rot between the sessions that run it in full.
"""

from __future__ import annotations

import math

from benchmarks.__main__ import Table, fit_exponent, forwards_per_second
from benchmarks.probe import fanout, measure


def test_fit_exponent_recovers_a_power_law():
    xs = [10.0, 100.0, 1000.0]
    assert math.isclose(fit_exponent(xs, [3 * x**2 for x in xs]), 2.0)
    assert math.isclose(fit_exponent(xs, [5 * x for x in xs]), 1.0)


def test_the_fanout_layout_runs_clean_and_counts_its_forwards():
    # 8 ranks: 7 branches and a combine, 2 iterations, 2 requests; and a decode per request
    m = measure(fanout(8, 2, 2))
    assert m["violations"] == 0
    assert m["requests"] == 2
    assert m["forwards"] == 2 * (2 * 8 + 1)


def test_forward_rates_are_ratios_to_the_hop_rate_with_verdicts():
    table = Table()
    forwards_per_second(table, repeat=1, loaded=2, hops=2_000)
    rows = {r["figure"]: r for r in table.rows}
    hop = rows["raw simpy message hops/s (CPU time)"]["rate"]
    assert hop > 0
    targeted = [r for r in table.rows if r["target"].startswith(">= 0.25x")]
    breakdown = [r for r in table.rows if r["target"] == "(a breakdown)"]
    # every mstar profile on bagel_cfg and the 64-rank layout, then the two breakdown rows
    assert len(targeted) == 4 and len(breakdown) == 2
    for r in targeted:
        assert math.isclose(r["ratio"], r["rate"] / hop)
        assert r["verdict"] == ("met" if r["ratio"] >= 0.25 else "MISSED")
        assert len(r["round_ratios"]) == 1
    assert all(r["verdict"] == "" for r in breakdown)
