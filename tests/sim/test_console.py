"""Console tables: aligned by rich, colour only on a terminal without NO_COLOR."""

from __future__ import annotations

import io
import re

import pytest

from simharness.report.console import render
from simharness.report.table import cell, render_table

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def plain_env(monkeypatch):
    for var in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("COLUMNS", raising=False)


def test_colour_on_a_terminal_only(plain_env, monkeypatch):
    rows = [["a", cell("50*", "bad")], ["bb", "49"]]
    tty = Terminal()
    render_table(tty, ["node", "r0"], rows, align=["left", "right"])
    assert "\x1b[1;31m50*" in tty.getvalue()  # red on a terminal
    piped = io.StringIO()
    render_table(piped, ["node", "r0"], rows, align=["left", "right"])
    assert not ANSI.search(piped.getvalue())
    assert piped.getvalue() == "node   r0\na     50*\nbb     49\n"  # right-aligned, no trailing space
    monkeypatch.setenv("NO_COLOR", "1")
    tty = Terminal()
    render_table(tty, ["node", "r0"], rows, align=["left", "right"])
    assert "31m" not in tty.getvalue()  # no colour (bold may stay: NO_COLOR is about colour)


def test_run_table_is_plain_text_when_piped(plain_env, prefix_report):
    out = io.StringIO()
    render(prefix_report, out)
    text = out.getvalue()
    assert not ANSI.search(text)
    assert all(ln == ln.rstrip() for ln in text.splitlines())
    assert "image_gen_cfg  LLM_cfg_text@1  50*  50*" in text


def test_confirm_headers_sit_over_their_columns(plain_env, bagel):
    from real_backends.confirm import compare, summarize
    from real_backends.confirm import render as render_confirm
    from simharness.run import run_scenario

    a = summarize(run_scenario(bagel, "mstar-python"))
    b = summarize(run_scenario(bagel, "mstar-rust-prefix"))
    agree, diffs = compare(a, b)
    out = io.StringIO()
    render_confirm(a, b, agree, diffs, out)
    lines = out.getvalue().splitlines()
    header = next(ln for ln in lines if ln.startswith("forwards (sim|real)"))
    row = next(ln for ln in lines if ln.startswith("image_gen_cfg  combine_cfg@0"))
    # each request's name starts where its column starts (before, headers sat off their columns)
    starts = [m.start() for m in re.finditer(r"\d+\|\d+", row)]
    assert starts == [header.index(f"r{i}") for i in range(7)], (header, row)
    # the bars of sim|real line up down a column
    bars = {ln.index("|") for ln in lines if ln.startswith(("prefill_text", "image_gen_cfg"))}
    assert len(bars) == 1
    assert "DISAGREE" in out.getvalue()


@pytest.fixture(scope="module")
def prefix_report(bagel):
    from simharness.run import run_scenario

    return run_scenario(bagel, "mstar-rust-prefix")


def test_the_rerun_line_leaves_out_where_output_went():
    from simharness.report.console import rerun_command

    cmd = ["simharness", "run", "s.yaml", "--report", "out", "--runtime", "x", "--trace=t.json",
           "--json", "--set", "a=1", "--report"]
    assert rerun_command(3, cmd) == "SIMHARNESS_SEED=3 simharness run s.yaml --runtime x --set a=1"
    assert rerun_command(0, ["simharness", "run", "s.yaml", "--report", "--seed", "2"]) == \
        "SIMHARNESS_SEED=0 simharness run s.yaml --seed 2"
