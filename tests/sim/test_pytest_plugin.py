"""The pytest plugin, run as a user would: pytest in a folder of scenarios, with --junitxml.

Each test runs pytest in a subprocess, in a temporary folder (no project ini), with the plugin
loaded from its entry point, and reads the outcome of every item from the JUnit XML.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from tests.conftest import SCENARIOS
from tests.helpers import split_loop

CASE = SCENARIOS / "corpus" / "mstar-rust-prefix__loop_exit-sibling.yaml"


def _pytest(folder: Path, *args: str) -> tuple[int, str, dict[str, str]]:
    """(exit code, output, item id -> passed|failed|skipped|xfailed) of pytest in `folder`."""
    xml = folder / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                           f"--junitxml={xml}", *args], cwd=folder, capture_output=True, text=True,
                          timeout=600)
    results = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        ident = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case]
        skipped = next((c for c in case if c.tag == "skipped"), None)
        if "failure" in kinds or "error" in kinds:
            results[ident] = "failed"
        elif skipped is not None:
            results[ident] = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
        else:
            results[ident] = "passed"
    return proc.returncode, proc.stdout + proc.stderr, results


def _write(path: Path, raw: dict) -> None:
    path.write_text(yaml.safe_dump(raw, sort_keys=False))


def test_scenarios_and_cases_become_test_items(tmp_path):
    good = split_loop()
    good["expect"] = {"forwards_per_request": {"w": {"A": 3, "B": 3, "C": 1}}}
    _write(tmp_path / "good.yaml", good)
    wrong = split_loop()
    wrong["expect"] = {"forwards_per_request": {"w": {"A": 4}}}
    _write(tmp_path / "wrong_expect.yaml", wrong)
    _write(tmp_path / "broken.yaml", {**split_loop(), "runtime": "mstar-rust-prefix"})
    (tmp_path / "corpus").mkdir()
    shutil.copy(CASE, tmp_path / "corpus" / "open.yaml")
    fixed = yaml.safe_load(CASE.read_text())
    fixed["corpus"]["status"] = "fixed"
    _write(tmp_path / "corpus" / "claims_fixed.yaml", fixed)
    # other YAML files are not scenarios and are left alone
    (tmp_path / "ci.yaml").write_text("jobs: {test: {runs-on: linux}}\n")
    # ... and a hostile one is read within the loader's limits, not expanded
    shutil.copy(SCENARIOS.parent / "tests" / "bad_inputs" / "alias_bomb.yaml", tmp_path / "bomb.yaml")

    code, out, results = _pytest(tmp_path)
    assert results == {
        "good.yaml::checks": "passed",
        "good.yaml::expect": "passed",
        "wrong_expect.yaml::checks": "passed",
        "wrong_expect.yaml::expect": "failed",
        "broken.yaml::checks": "failed",
        "corpus.open.yaml::mstar-rust-prefix[open]": "xfailed",
        "corpus.claims_fixed.yaml::mstar-rust-prefix[fixed]": "failed",
    }, out
    assert code == 1
    # a failure prints the console report
    assert "expected 4 forwards of A in w per request" in out
    assert "loop_exit" in out and "rerun: SIMHARNESS_SEED=0 simharness run" in out
    assert "fails again (loop_exit:sibling): a regression" in out
    # ... and a case's failure the console report of its replay's run
    assert f"rerun: SIMHARNESS_SEED=0 simharness replay {tmp_path / 'corpus' / 'claims_fixed.yaml'}" in out


def test_each_file_is_read_once(tmp_path):
    good = split_loop()
    good["expect"] = {"forwards_per_request": {"w": {"A": 3, "B": 3, "C": 1}}}
    _write(tmp_path / "good.yaml", good)
    shutil.copy(CASE, tmp_path / "case.yaml")
    # count the YAML texts the loader's reader parses, collection and runs together
    (tmp_path / "conftest.py").write_text(
        "import simharness.scenario.reading as reading\n"
        "PARSED = []\n"
        "_parse = reading.parse_text\n"
        "reading.parse_text = lambda text: PARSED.append(text) or _parse(text)\n"
        "def pytest_sessionfinish(session):\n"
        "    (session.config.rootpath / 'parsed.txt').write_text(str(len(PARSED)))\n")
    code, out, results = _pytest(tmp_path)
    assert results == {"good.yaml::checks": "passed", "good.yaml::expect": "passed",
                       "case.yaml::mstar-rust-prefix[open]": "xfailed"}, out
    assert (tmp_path / "parsed.txt").read_text() == "2"


def test_an_open_case_that_passes_is_a_strict_failure(tmp_path):
    case = yaml.safe_load(CASE.read_text())
    case["corpus"]["runtime"] = "mstar-rust"  # the fixed runtime: the open case no longer fails
    _write(tmp_path / "case.yaml", case)
    code, out, results = _pytest(tmp_path)
    assert results == {"case.yaml::mstar-rust[open]": "failed"}, out
    assert code == 1


def test_a_case_the_loader_refuses_is_one_failing_item_saying_why(tmp_path):
    # The corpus: block is read by the loader's parser, so what it refuses (a missing key, a
    # status it does not know, a block that is not a mapping) fails as one line, as replay says
    # it, and not as a traceback; so does a case whose scenario part the loader refuses.
    def case(edit):
        raw = yaml.safe_load(CASE.read_text())
        edit(raw)
        return raw

    _write(tmp_path / "no_signature.yaml", case(lambda c: c["corpus"].pop("signature")))
    _write(tmp_path / "status_typo.yaml", case(lambda c: c["corpus"].update(status="Open")))
    _write(tmp_path / "null_block.yaml", case(lambda c: c.update(corpus=None)))
    _write(tmp_path / "bad_workload.yaml", case(lambda c: c["workload"][0].update(count=0)))
    code, out, results = _pytest(tmp_path)
    assert results == {"no_signature.yaml::corpus": "failed", "status_typo.yaml::corpus": "failed",
                       "null_block.yaml::corpus": "failed",
                       "bad_workload.yaml::mstar-rust-prefix[open]": "failed"}, out
    assert code == 1
    for name, refusal in [("no_signature", "corpus.signature: missing required key"),
                          ("status_typo", "corpus.status: expected one of open, fixed"),
                          ("null_block", "corpus: expected a mapping"),
                          ("bad_workload", "workload: every phase has count 0")]:
        assert f"error: {tmp_path / name}.yaml: {refusal}" in out, out
    assert "ScenarioError" not in out, out


def test_collection_can_be_turned_off(tmp_path):
    _write(tmp_path / "good.yaml", split_loop())
    (tmp_path / "pytest.ini").write_text("[pytest]\nsimharness_collect = false\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 5, proc.stdout  # no tests collected


def test_the_fixture_runs_a_scenario(tmp_path):
    _write(tmp_path / "layout.yaml", split_loop())
    (tmp_path / "test_mine.py").write_text(
        "def test_layout(simharness_run):\n"
        "    s = simharness_run('layout.yaml')\n"
        "    assert s['outcome'] == 'pass' and s['requests']['completed'] == 2\n"
        "    bad = simharness_run('layout.yaml', runtime='mstar-rust-prefix')\n"
        "    assert {v['check'] for v in bad['violations']} >= {'loop_exit'}\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nsimharness_collect = false\n")
    code, out, results = _pytest(tmp_path)
    assert results == {"test_mine::test_layout": "passed"}, out
    assert code == 0


def test_pytest_scenarios_runs_the_shipped_scenarios_and_cases(tmp_path):
    """The acceptance line, as a user types it: `pytest scenarios/` passes."""
    xml = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "scenarios/", "-q", "-p", "no:cacheprovider",
                           f"--junitxml={xml}"], cwd=SCENARIOS.parent, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    cases = {f"{c.get('classname')}::{c.get('name')}": [x.tag for x in c]
             for c in ET.parse(xml).getroot().iter("testcase")}
    shipped = sorted(p.name for p in SCENARIOS.glob("*.yaml"))
    assert sorted(k.split("::")[0].removeprefix("scenarios.") for k in cases
                  if k.endswith("::checks")) == shipped
    corpus = sorted((SCENARIOS / "corpus").glob("*.yaml"))
    for path in corpus:
        status = yaml.safe_load(path.read_text())["corpus"]["status"]
        ident = next(k for k in cases if k.startswith(f"scenarios.corpus.{path.name}::"))
        assert cases[ident] == (["skipped"] if status == "open" else []), ident


def test_scenarios_run_under_each_runtime_and_seed_asked_for(tmp_path):
    shutil.copy(SCENARIOS / "bagel_cfg.yaml", tmp_path / "bagel_cfg.yaml")
    code, out, results = _pytest(tmp_path, "bagel_cfg.yaml", "--simharness-runtime", "mstar-rust-prefix",
                                 "--simharness-runtime", "mstar-python", "--simharness-seeds", "0..1")
    assert code == 1
    ids = {k.rpartition("::")[2]: v for k, v in results.items()}
    assert ids == {f"{part}[{rt}-seed{s}]": ("failed" if rt == "mstar-rust-prefix" else "passed")
                   for part in ("checks", "expect") for rt in ("mstar-rust-prefix", "mstar-python")
                   for s in (0, 1)}
    # the failure says what the console says, cause first, with the command that reruns it
    assert "loop_exit  r0..r6 image_gen_cfg combine_cfg@0" in out
    assert "bagel_cfg.yaml --runtime mstar-rust-prefix --seed 1" in out
    code, out, _ = _pytest(tmp_path, "bagel_cfg.yaml", "--simharness-seeds", "3..1")
    assert code != 0 and "--simharness-seeds 3..1: expected 0 <= A <= B" in out


def test_a_failed_fixture_assertion_shows_the_violations(tmp_path):
    (tmp_path / "test_mine.py").write_text(
        "def test_prefix(simharness_run):\n"
        f"    s = simharness_run({str(SCENARIOS / 'bagel_cfg.yaml')!r}, runtime='mstar-rust-prefix')\n"
        "    assert s['violations'] == []\n")
    code, out, results = _pytest(tmp_path, "test_mine.py")
    assert code == 1
    assert "the run has 70 violations (10 distinct):" in out
    assert "loop_exit r0,r1,r2 +4 combine_cfg@0: combine_cfg on rank 0 routed 6 loop-back" in out
    assert out.index("loop_exit r0") < out.index("forwards r0")  # cause first
