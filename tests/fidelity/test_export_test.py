"""``simharness export-test``: each corpus case as a standalone pytest module in mstar's terms.

Every case of scenarios/corpus/ is exported into one folder (a finding of mstar's graph objects
as a replay of them, one of its Worker's StreamBuffers or message handling as a replay of what
the real stack did; the rest refused in one line), and the written modules are run together in
one pytest subprocess that cannot import simharness at all. A module of a real finding must
fail, and by an AssertionError of its expectation (not by an error, nor by the replay leaving the
recording); a module of any other case must pass, and must fail on a graph runtime with the bug
it was found on (the loop-exit drift, imitated); the modules of the Worker's REMOVE findings
pass on a Worker that lets go of a removed request (imitated). The Rust arm of a graph-level
module skips with its reason. Then the command's refusals of bad input: exit 2 and one line,
never a traceback, and no file written or replaced.
"""

from __future__ import annotations

import ast
import contextlib
import io
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from simharness.cli import main
from simharness.errors import UsageError
from simharness.mstar.export import NEEDS_WORKER
from tests.conftest import SCENARIOS
from tests.helpers import needs_mstar_model_base

# the exported module divides the walks with mstar.model.base (torch, triton, pyzmq, msgpack)
pytestmark = needs_mstar_model_base("mstar's division")

CASES = sorted((SCENARIOS / "corpus").glob("*.yaml"))
#: mechanisms of mstar's graph objects themselves (docs/findings.md sections 1, 7 and 11) and the
#: Rust prefix's loop-exit drift: these export as replays of the graph objects
GRAPH_LEVEL = {"liveness:hang-reinjection:shared-name", "liveness:hang-reinjection:inner-loop-last",
               "liveness:hang-seed", "liveness:hang-edge", "loop_exit:peer", "loop_exit:sibling"}
#: mechanisms of the Worker's StreamBuffers and message handling (sections 3 to 6): these export
#: as replays of what the real stack did, and fail by the assertion named
WORKER_LEVEL = {"drain:dropped:remove_request:tp-follower": "keeps messages parked for ever",
                "drain:state-left": "keeps the state of",
                "forwards:counters": "releases its final chunk",
                "streams:finals": "releases its final chunk",
                "streams:order-across-ranks": "releases its final chunk",
                "liveness:hang-lockstep": "of one tensor-parallel instance release chunk"}
#: mechanisms an export does not drive yet (STOP_LOOPS between ranks), or cases whose failure the
#: real stack does not show: these are refused
REFUSED = {"liveness:hang-input", "forwards:extra-after-loop", "drain:held-at-teardown"}
#: makes ``import simharness`` fail in the subprocess that runs the exported modules
_NO_SIMHARNESS = "import sys\n\nsys.modules['simharness'] = None  # an exported test needs none\n"


def _meta(path: Path) -> Any:
    from simharness.scenario import load_scenario

    meta = load_scenario(path).corpus
    assert meta is not None
    return meta


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Case name -> ("refused", message) or ("written", Exported, {arm: (outcome, message)}):
    every case exported once, the written modules run in one pytest subprocess."""
    from simharness.mstar.export import export, identifier

    folder = tmp_path_factory.mktemp("exported")
    (folder / "conftest.py").write_text(_NO_SIMHARNESS)
    out: dict[str, Any] = {}
    modules: dict[str, str] = {}
    for path in CASES:
        try:
            ex = export(path)
        except UsageError as exc:
            out[path.stem] = ("refused", str(exc))
            continue
        module = identifier(f"test_{path.stem.replace('-', '_')}")
        (folder / f"{module}.py").write_text(ex.text)
        modules[module] = path.stem
        out[path.stem] = ("written", ex, {})
    if modules:
        report = folder / "report.xml"
        # the simharness pytest plugin stays out too: the modules run as mstar's CI would run them
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:simharness", f"--junitxml={report}", str(folder)],
                       cwd=folder, capture_output=True, text=True, timeout=600)
        for case in ET.parse(report).getroot().iter("testcase"):
            module = case.get("classname", "").rsplit(".", 1)[-1]
            arm = case.get("name", "").rpartition("[")[2].rstrip("]")
            result = ("passed", "")
            for kind in ("failure", "error", "skipped"):
                found = case.find(kind)
                if found is not None:
                    result = ({"failure": "failed"}.get(kind, kind), found.get("message", ""))
            out[modules[module]][2][arm] = result
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_each_corpus_case_exports_or_is_refused(exported: dict[str, Any], path: Path) -> None:
    meta = _meta(path)
    got = exported[path.stem]
    if got[0] == "refused":
        assert NEEDS_WORKER in got[1]
        assert meta.signature in REFUSED, got[1]
        return
    assert meta.signature not in REFUSED, f"{path.name} exported: {got[1].summary}"
    _, ex, arms = got
    real = (meta.verdict or {}).get("mstar") == "real"
    assert ex.expect == ("fail" if real else "pass")
    if meta.signature in WORKER_LEVEL:
        # one test, no Rust arm: mstar-ai 0.2.1's Worker and StreamBuffer are Python only
        [(outcome, message)] = arms.values()
        assert outcome == "failed" and message.startswith("AssertionError: "), (outcome, message)
        assert WORKER_LEVEL[meta.signature] in message, message
        return
    outcome, message = arms["python"]
    if real:
        # failed by its expectation: a replay that left the recording fails elsewhere
        assert outcome == "failed" and message.startswith("AssertionError: "), (outcome, message)
        assert "must be routed" in message or "must not be routed" in message, message
    else:
        assert outcome == "passed", (outcome, message)
    rust, why = arms["rust"]
    assert rust == "skipped" and ("mstar_rust" in why or "Rust graph runtime" in why), (rust, why)


def test_known_mechanisms_are_sorted(exported: dict[str, Any]) -> None:
    """Each mechanism of the corpus exports at its level, or is refused, as listed above."""
    for path in CASES:
        sig = _meta(path).signature
        assert sig in GRAPH_LEVEL or sig in WORKER_LEVEL or sig in REFUSED, (path.name, sig)
        want = "refused" if sig in REFUSED else "written"
        assert exported[path.stem][0] == want, (path.name, exported[path.stem][1])


def test_written_modules_import_no_simharness(exported: dict[str, Any]) -> None:
    written = [got[1] for got in exported.values() if got[0] == "written"]
    assert written
    for ex in written:
        tree = ast.parse(ex.text)
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import) for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom)}
        assert imported <= {"copy", "importlib", "types", "pytest", "torch", "mstar",
                            "mstar_rust"}, imported


def test_acceptance_cases(exported: dict[str, Any]) -> None:
    """Issue 38: a real finding (docs/findings.md section 1) fails by assertion; the seed's
    loop-exit drift, specific to the pre-fix Rust model, passes on Python and skips Rust."""
    _, _, arms = exported["mstar-python__liveness-hang-reinjection"]
    assert arms["python"][0] == "failed" and "in0 -> b" in arms["python"][1]
    for case in ("mstar-rust-prefix__loop_exit-peer", "mstar-rust-prefix__loop_exit-sibling"):
        _, _, arms = exported[case]
        assert arms["python"][0] == "passed"
        assert arms["rust"][0] == "skipped"


#: imitates the pre-fix Rust model's loop-exit drift on mstar's Python objects: a loop copy that
#: ends drops only the loop-back pairs whose destination is in its own worker graph
_DRIFT = """\
from mstar.graph import base

_real = base.LoopStateRegistry.mark_entity_complete


def _drifted(self, name):
    kept = self.loop._loop_back_inputs
    self.loop._loop_back_inputs = {p for p in kept if p[1] in self.loop.get_nodes()}
    try:
        return _real(self, name)
    finally:
        self.loop._loop_back_inputs = kept


base.LoopStateRegistry.mark_entity_complete = _drifted
"""


def test_the_loop_exit_modules_fail_on_a_runtime_with_the_drift(
        exported: dict[str, Any], tmp_path: Path) -> None:
    """The modules that pass on mstar-ai hold a graph runtime to something: with the drift
    imitated, each fails by the assertion that the loop-back must not be routed."""
    (tmp_path / "conftest.py").write_text(_DRIFT + _NO_SIMHARNESS)
    cases = ["mstar-rust-prefix__loop_exit-peer", "mstar-rust-prefix__loop_exit-sibling"]
    for case in cases:
        (tmp_path / f"test_{case.replace('-', '_')}.py").write_text(exported[case][1].text)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:simharness", "-k", "python", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert "2 failed" in run.stdout, run.stdout[-2000:]
    assert run.stdout.count("AssertionError: routes s1 -> emit_to_client") >= 2, run.stdout[-2000:]
    assert "not s1 -> a (a loop-back of loop L1, which ended here)" in run.stdout


#: imitates a Worker that lets go of a removed request: a TP follower honours the first REMOVE
#: that comes, whoever sent it, and a message for a request it removed is dropped, not parked
_LETS_GO = """\
from mstar.utils.ipc_format import MessageSource, RemoveRequest
from mstar.worker.worker import Worker

_remove, _handle = Worker._remove_request, Worker._process_message_list


def _remove_once(self, body):
    gone = self.__dict__.setdefault("_gone", set())
    if body.request_id in gone:
        return
    gone.add(body.request_id)
    _remove(self, RemoveRequest(request_id=body.request_id, source=MessageSource.SELF))


def _handle_live(self, messages):
    gone = self.__dict__.setdefault("_gone", set())
    return _handle(self, [m for m in messages
                          if getattr(m.body, "request_id", None) not in gone])


Worker._remove_request = _remove_once
Worker._process_message_list = _handle_live
"""


def test_the_message_modules_pass_on_a_worker_that_lets_go(
        exported: dict[str, Any], tmp_path: Path) -> None:
    """The modules of the Worker's REMOVE findings hold a Worker to something it can do: with a
    Worker that honours the first REMOVE and drops what comes for a removed request, each
    passes."""
    (tmp_path / "conftest.py").write_text(_LETS_GO + _NO_SIMHARNESS)
    cases = [p.stem for p in CASES if _meta(p).signature in
             ("drain:dropped:remove_request:tp-follower", "drain:state-left")]
    assert len(cases) >= 2
    for case in cases:
        (tmp_path / f"test_{case.replace('-', '_')}.py").write_text(exported[case][1].text)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:simharness", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert f"{len(cases)} passed" in run.stdout, run.stdout[-2000:]


# -- the command ------------------------------------------------------------------------------


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["export-test", *argv])
    return code, err.getvalue()


CASE = str(SCENARIOS / "corpus" / "mstar-python__liveness-hang-reinjection.yaml")


@pytest.mark.parametrize("argv, says", [
    (["no-such-case.yaml"], "no such file"),
    ([str(SCENARIOS / "orpheus.yaml")], "not a corpus case"),
    ([str(SCENARIOS / "corpus" / "mstar-python__liveness-hang-input.yaml")], NEEDS_WORKER),
    ([CASE, "--runtime", "mstar-python"], "--runtime mstar-python"),
    ([str(SCENARIOS / "corpus" / "mstar-python__liveness-hang-input.yaml"), "--runtime", "mstar"],
     "--runtime mstar: nothing of mstar's Worker to export (the real stack's run (seed 0) "
     "streams nothing)"),
    ([CASE, "--runtime", "no-such-runtime"], "--runtime no-such-runtime"),
], ids=["missing", "not-a-case", "worker-level", "model-runtime", "stack-nothing",
        "unknown-runtime"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], says: str) -> None:
    target = tmp_path / "test_out.py"
    code, err = _cli(*argv, "-o", str(target))
    assert code == 2
    assert says in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not target.exists()


def test_the_stack_runtime_exports_the_workers_part_only(tmp_path: Path) -> None:
    target = tmp_path / "test_state_left.py"
    case = SCENARIOS / "corpus" / "mstar-python__drain-state-left.yaml"
    code, err = _cli(str(case), "--runtime", "mstar", "-o", str(target))
    assert code == 0, err
    assert "worker_3 ends with the state of r0 though a REMOVE reached it" in err
    assert "def stub_worker(" in target.read_text()


def test_an_existing_file_is_replaced_only_with_force(tmp_path: Path) -> None:
    target = tmp_path / "test_mine.py"
    target.write_text("# the user's own test\n")
    code, err = _cli(CASE, "-o", str(target))
    assert code == 2 and "--force" in err and err.count("\n") == 1
    assert target.read_text() == "# the user's own test\n"
    code, err = _cli(CASE, "-o", str(target), "--force")
    assert code == 0, err
    assert target.read_text().startswith('"""mstar-python__liveness-hang-reinjection')
    # written atomically: no temporary file left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_mine.py"]
    code, err = _cli(CASE, "-o", str(tmp_path / "no-folder" / "test_x.py"))
    assert code == 2 and "does not exist" in err


def test_dash_prints_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["export-test", CASE, "-o", "-"])
    assert code == 0, err.getvalue()
    assert out.getvalue().startswith('"""mstar-python__liveness-hang-reinjection')
    ast.parse(out.getvalue())
    assert list(tmp_path.iterdir()) == []
