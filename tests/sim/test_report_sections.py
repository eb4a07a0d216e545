"""A run's page is a list of sections: a new section is one module, added with
`simharness.report.sections.register`, and shows on every page that shows a run."""

from __future__ import annotations

import re

import pytest

from simharness.cli import main
from simharness.report import sections
from simharness.report.html import run_page
from simharness.run import run_scenario
from simharness.scenario import load_scenario
from tests.conftest import SCENARIOS
from tests.sim.busiest_section import Busiest


@pytest.fixture
def busiest():
    sections.register(Busiest())
    yield
    sections.unregister("busiest")


def _ids(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', html)


def test_an_added_section_is_on_the_page_the_command_line_writes(tmp_path, capsys, busiest):
    assert main(["run", str(SCENARIOS / "bagel_cfg.yaml"), "--report", str(tmp_path / "rep")]) == 0
    html = (tmp_path / "rep" / "report.html").read_text()
    assert _ids(html)[-2:] == ["busiest", "console"]  # added before the console output by default
    assert re.search(r'<section id="busiest"><h2>Busiest rank</h2><p id="busiest-rank">rank 0: busy '
                     r'[0-9.]+% of the run</p></section>', html)
    # and on the pages that show runs of their own: each case of a replay
    case = sorted((SCENARIOS / "corpus").glob("mstar-rust-prefix__loop_exit-*.yaml"))[0]
    assert main(["replay", str(case), "--report", str(tmp_path / "rp")]) == 0
    assert "busiest" in _ids((tmp_path / "rp" / "report.html").read_text())


def test_without_it_the_page_has_no_such_section(bagel):
    assert "busiest" not in _ids(run_page(run_scenario(bagel, "mstar-python")))


def test_a_section_that_does_not_apply_is_left_out(busiest):
    one_rank = load_scenario(SCENARIOS / "bagel_cfg.yaml", [
        "placement.node_groups=[{node_names: [LLM, LLM_cfg_text, LLM_cfg_img, combine_cfg, vae_decoder], "
        "ranks: [0]}]"])
    html = run_page(run_scenario(one_rank, "mstar-python"))
    assert "busiest" not in _ids(html) and "utilisation" in _ids(html)


def test_the_page_is_its_sections_in_order():
    hang = run_scenario(load_scenario(SCENARIOS / "bagel_cfg_counter.yaml"), "mstar-rust-prefix")
    assert _ids(run_page(hang)) == [s.id for s in sections.SECTIONS]


def test_a_section_id_is_taken_once(busiest):
    with pytest.raises(ValueError, match="already has a section 'busiest'"):
        sections.register(Busiest())
