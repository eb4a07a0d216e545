"""`python -m benchmarks` still measures what it says, at sizes a test can afford.

Speed is never asserted here (the benchmark's figures are measured on a quiet machine, side by
side): these tests hold the benchmark's parts to their shape, so that the one command that
prints every figure cannot rot between the sessions that run it in full.
"""

from __future__ import annotations

import math

import pytest

from benchmarks import instructions
from benchmarks.__main__ import BREAKDOWN, FIGURE, Table, fit_exponent, forwards_per_second
from benchmarks.probe import FANOUT_64, fanout, measure


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
    breakdown = [r for r in table.rows if r["target"] == BREAKDOWN]
    untargeted = [r for r in table.rows if r["target"] == FIGURE]
    # every mstar profile on bagel_cfg, the two breakdown rows, and the 64-rank layout's figure
    assert [r["figure"].rsplit(", ", 1)[-1] for r in targeted] == [
        "mstar-python", "mstar-rust-prefix", "mstar-rust"]
    assert len(breakdown) == 2
    assert [r["figure"] for r in untargeted] == ["forwards/s, 64-rank layout, mstar-python"]
    for r in targeted:
        assert r["verdict"] == ("met" if r["ratio"] >= 0.25 else "MISSED")
    for r in [*targeted, *breakdown, *untargeted]:
        assert math.isclose(r["ratio"], r["rate"] / hop)
        assert len(r["round_ratios"]) == 1
    assert all(r["verdict"] == "" for r in [*breakdown, *untargeted])


def test_instruction_counts_are_per_forward_of_the_layout_asked_for(monkeypatch):
    # The count itself needs valgrind: stand in for it with a count that says which layout and
    # which part each counted process ran, and check the arithmetic and the plumbing.
    parts = {"none": 1_000, "checks": 1_000 + 7_000_000, "digest": 1_000 + 9_000_000}
    layouts = {"bagel": 1, "fanout": 2}
    asked = []

    def count(layout, runtime, requests, what):
        asked.append((layout, what))
        return layouts[layout] * parts[what]

    monkeypatch.setattr(instructions, "_count", count)
    fan = instructions.per_forward("mstar-python", 64, "fanout")
    assert fan["forwards"] == measure(fanout(*FANOUT_64))["forwards"]
    assert math.isclose(fan["checks"], 2 * 7_000_000 / fan["forwards"])
    assert math.isclose(fan["digest"], 2 * 9_000_000 / fan["forwards"])
    assert asked == [("fanout", "none"), ("fanout", "checks"), ("fanout", "digest")]


def test_each_counted_process_runs_its_layout():
    # what a counted process runs, without valgrind around it: the fan-out's measured part, and
    # bagel_cfg's warm-up alone; a layout the counter does not know is refused
    instructions._child(["fanout", "mstar-python", "64", "checks"])
    instructions._child(["bagel", "mstar-python", "2", "none"])
    with pytest.raises(ValueError, match="no layout 'ring'"):
        instructions._child(["ring", "mstar-python", "2", "checks"])
