"""Every malformed scenario in tests/bad_inputs/ is refused in one line with exit 2; no input,
however hostile, crashes the loader; the command line's own failure modes have exit codes of
their own (docs/reliability.md)."""

from __future__ import annotations

import copy
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simharness import cli
from simharness.commands import common, runtimes
from simharness.errors import ScenarioError
from simharness.scenario.loader import load_scenario, parse_scenario
from tests.conftest import SCENARIOS

BAD = Path(__file__).resolve().parent.parent / "bad_inputs"
FILES = sorted(BAD.glob("*.yaml"))


def _expectation(path: Path) -> tuple[str, str]:
    head = path.read_bytes().split(b"\n", 1)[0].decode("ascii")
    assert head.startswith("# expect: "), f"{path.name}: first line must say what to expect"
    key, words = head.removeprefix("# expect: ").split(" :: ")
    return key.strip(), words


def test_there_are_at_least_fifty_bad_inputs():
    assert len(FILES) >= 50


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_bad_input_is_refused_in_one_line_with_exit_2(path, capsys):
    key, words = _expectation(path)
    start = time.monotonic()
    code = cli.main(["run", str(path)])
    elapsed = time.monotonic() - start
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert "Traceback" not in err
    assert line.startswith(f"error: {path}: "), line
    if key:
        assert f": {key}: " in line, line
    else:
        assert "line " in line or "UTF-8" in line or "top level" in line, line
    assert words in line, line
    # Refused up front: no bad input gets anywhere near a run.
    assert elapsed < 10, f"{path.name} took {elapsed:.1f}s to refuse"


# ---------------------------------------------------------------------------------------------
# the loader never crashes: random mutations of every shipped scenario


def _shipped() -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(SCENARIOS.glob("*.yaml"))}


SHIPPED = _shipped()

JUNK = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e-300, 1e300, 0, -1, 2**63, "", " ", ":",
                     "1e30", "9" * 100 + "B", "512KiB", "client", "conductor", "A"]),
    st.text(max_size=12),
    st.lists(st.integers(-3, 5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(-2, 3), max_size=2),
)


def _paths(data, prefix=()):
    """Every key path into `data` (mappings and lists), outermost first."""
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(sorted(SHIPPED)))
    raw = copy.deepcopy(SHIPPED[name])
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(raw)
        path = draw(st.sampled_from(paths))
        parent = raw
        for k in path[:-1]:
            parent = parent[k]
        action = draw(st.sampled_from(["replace", "delete", "duplicate"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        else:
            parent[path[-1]] = draw(JUNK)
    return name, raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_shipped_scenarios_give_a_scenario_or_a_scenario_error(case):
    name, raw = case
    try:
        parse_scenario(raw, source=str(SCENARIOS / f"{name}.yaml"))
    except ScenarioError as err:
        assert str(err) and "\n" not in str(err)


# ---------------------------------------------------------------------------------------------
# files that are not files, overrides, the command line's own failures


def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "simharness.cli", "run", str(fifo)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "not a regular file" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("target,words", [("/dev/zero", "not a regular file"),
                                          (".", "is a directory")])
def test_devices_and_directories_are_not_scenarios(capsys, target, words):
    assert cli.main(["run", target]) == 2
    assert words in capsys.readouterr().err


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path, capsys):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: 50 MB that cost nothing to make
    assert cli.main(["run", str(big)]) == 2
    assert "more than the 1,048,576 bytes a scenario file may have" in capsys.readouterr().err


@pytest.mark.parametrize("override,key,words", [
    ("workload[0]count=1", "workload[0]count", "not a key path"),
    ("placement.node_groups[1].ranks[0]=100000000", "placement.node_groups[1].ranks[0]",
     "rank numbers"),
    ("schedule.service_jitter=.nan", "schedule.service_jitter", "finite"),
    ("network.latency_us=.inf", "network.latency_us", "finite"),
    ("runtime={name: x, options: " + "[" * 300 + "]" * 300 + "}", "runtime", "nesting deeper"),
    (".".join(["runtime.options"] + ["a"] * 300) + "=1", "", "deeper than"),
    ("seed=" + "9" * 5000, "seed", "5000 digits"),
    ("workload[0].count=100000", "workload", "--allow-large"),
])
def test_overrides_are_held_to_the_same_limits(tmp_path, capsys, override, key, words):
    from tests.helpers import split_loop

    f = tmp_path / "ok.yaml"
    f.write_text(yaml.safe_dump(split_loop()))
    assert cli.main(["run", str(f), "--set", override]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err, err
    assert f"{key}:" in err or not key, err


def test_allow_large_lets_a_refused_size_through(tmp_path):
    from tests.helpers import split_loop

    f = tmp_path / "ok.yaml"
    f.write_text(yaml.safe_dump(split_loop()))
    with pytest.raises(ScenarioError, match="allow-large"):
        load_scenario(f, ["workload[0].count=20000"])
    sc = load_scenario(f, ["workload[0].count=20000"], allow_large=True)
    assert sc.total_requests == 20000


@pytest.mark.parametrize("runtime,words", [(":", "module:Name"), (".x:y", "module:Name"),
                                           ("subprocess:Popen", "cannot be built")])
def test_malformed_runtime_specs_are_usage_errors(capsys, runtime, words):
    assert cli.main(["run", str(SCENARIOS / "bagel_cfg.yaml"), "--runtime", runtime]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err


def test_a_harness_crash_is_exit_3_with_the_traceback_saved(monkeypatch, capsys):
    def boom(*_a, **_k):
        raise RuntimeError("something inside simharness broke\nsecond line")

    monkeypatch.setattr(runtimes, "main", boom)
    assert cli.main(["runtimes"]) == cli.EXIT_INTERNAL == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "internal error" in err and "RuntimeError: something inside simharness broke" in err
    saved = Path(err.split("traceback saved to ")[1].split(";")[0])
    try:
        assert "Traceback" in saved.read_text() and "boom" in saved.read_text()
    finally:
        saved.unlink()


def test_a_closed_stdout_ends_quietly(monkeypatch, capsys):
    class Closed:
        def write(self, _text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert cli.main(["runtimes"]) == cli.EXIT_BROKEN_PIPE
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_stdout_to_a_full_device_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "simharness.cli", "run",
                               str(SCENARIOS / "bagel_cfg.yaml"), "--json"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
                              check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: cannot write to standard output: No space left on device"


def test_json_never_prints_nan(capsys):
    with pytest.raises(ValueError):
        common.print_json({"x": math.nan})


@pytest.mark.parametrize("name,overrides", [
    ("alias_bomb", []), ("deep_nesting", []), ("integer_5000_digits", []),
    ("iterations_times_requests", []), ("count_10_to_12", []),
    ("count_negative", ["placement.node_groups[0].ranks[0]=100000000"]),
    ("count_negative", ["workload[0].count=1000000000"]),
])
def test_refusals_cost_little_memory(name, overrides):
    """The issue's costliest inputs are refused before they cost: well under 1 GB (here 64 MB)."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(ScenarioError):
            load_scenario(BAD / f"{name}.yaml", overrides)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024, f"{name}: peak {peak / 1e6:.0f} MB"


STREAMS = SCENARIOS / "orpheus.yaml"


@pytest.mark.parametrize("overrides,key,words", [
    # what was typed is named, and a misspelt name gets the names it could be
    (["graph.streams[0].to=LLM"], "graph.streams[0].to",
     "from and to are both partition 'LLM': a stream connects two different partitions"),
    (["graph.walks.prefill.outputs[1].to=snac_decodr"], "graph.walks.prefill.outputs[1].to",
     "which has no node 'snac_decodr'; did you mean 'snac_decoder'? (nodes of 'SNAC': snac_decoder)"),
    (["graph.walks.snac_chunk.inputs=[new_tokens]"], "graph.walks.prefill.outputs[1].name",
     "stream 'new_token' goes to 'snac_decoder' (partition 'SNAC'), which has no input named "
     "'new_token'; did you mean 'new_tokens'? (inputs: new_tokens)"),
    (["graph.streams[0].edge=new_tokn"], "graph.walks.prefill.outputs[1].stream",
     "(declare it in graph.streams); graph.streams declares 'new_tokn' (graph.streams[0]) from 'LLM'; "
     "did you mean 'new_tokn'?"),
    (["graph.walks.prefill.outputs[1].persist=true"], "graph.walks.prefill.outputs[1].persist",
     "a streaming edge cannot persist"),
    (["graph.walks.prefill.outputs[1].to=client"], "graph.walks.prefill.outputs[1].to",
     "a streaming edge goes to a node of another partition, not to client"),
    (["graph.requests.tts=[prefill]"], "graph.requests.tts", "the graph has several partitions"),
    # the --set that caused an error is named, however its key was spelt
    (["workload.0.count=-1"], "workload[0].count", "(set by --set workload.0.count=-1)"),
    (["grpah.walks=1"], "grpah", "did you mean 'graph'?"),
    (["workload[0].count=1", "workload[0].count=-1"], "workload[0].count",
     "(set by --set workload[0].count=-1)"),
])
def test_refusals_name_what_was_typed(capsys, overrides, key, words):
    args = [a for o in overrides for a in ("--set", o)]
    assert cli.main(["run", str(STREAMS), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f": {key}: " in err and words in err, err


@pytest.mark.parametrize("args,env,words", [
    (["--seed", str(2**64)], {}, f"--seed must be <= {2**64 - 1}, got {2**64}"),
    ([], {"SIMHARNESS_SEED": "-5"}, "SIMHARNESS_SEED must be >= 0, got -5"),
    (["--runtime", "mstar-pyhton"], {}, "--runtime mstar-pyhton: unknown runtime 'mstar-pyhton'; "
                                        "did you mean 'mstar-python'"),
    (["--device", "cpu"], {}, "--device only applies to --backend zmq"),
    (["--device", "cpu", "--deadline", "3"], {}, "--device, --deadline only apply to --backend zmq"),
    (["--trace", "orpheus.yaml/t.json"], {}, "orpheus.yaml is not a folder"),
])
def test_run_flags_name_the_flag_and_the_value(monkeypatch, capsys, args, env, words):
    monkeypatch.chdir(SCENARIOS)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert cli.main(["run", "orpheus.yaml", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err, err


@pytest.mark.parametrize("command,words", [
    (["run", "x.yaml", "--rnutime", "y"], "unrecognized arguments: --rnutime y; did you mean '--runtime'?"),
    (["fuzz", "--exmaples", "3"], "unrecognized arguments: --exmaples 3; did you mean '--examples'?"),
])
def test_an_unknown_flag_gets_a_hint_and_its_command_s_usage(capsys, command, words):
    with pytest.raises(SystemExit) as exc:
        cli.main(command)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and words in err and f"usage: simharness {command[0]} " in err, err


@pytest.mark.parametrize("args,words", [
    (["--time", "inf"], "--time must be a finite number of seconds > 0, got inf"),
    (["--examples", "1", "--runtime", "mstar-rust-prefx"], "--runtime mstar-rust-prefx: unknown runtime"),
    # refused up front, not when the first failure is written
    (["--examples", "1", "--corpus", "/dev/null/corpus"],
     "--corpus /dev/null/corpus: cannot create: /dev/null is not a folder"),
])
def test_fuzz_refuses_bad_flags_before_any_work(capsys, args, words):
    assert cli.main(["fuzz", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err, err


def test_compare_names_the_arm_flag(capsys):
    assert cli.main(["compare", str(STREAMS), "--runtime", "mstar-python", "--runtime", "nope"]) == 2
    assert "--runtime nope: unknown runtime 'nope'" in capsys.readouterr().err


def test_layout_says_what_run_would_note(capsys):
    group = "placement.node_groups[2]={node_names: [snac_decoder], ranks: [2], graph_walks: [prefill]}"
    assert cli.main(["layout", str(STREAMS), "--set", group]) == 0
    assert "note: rank 2 hosts no node of any walk" in capsys.readouterr().err


def test_the_options_of_another_runtime_are_not_applied_silently(tmp_path, capsys):
    raw = yaml.safe_load(STREAMS.read_text())
    raw["runtime"] = {"name": "mstar-python", "options": {"batching": "backlog"}}
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(raw))
    cli.main(["run", str(f), "--runtime", "mstar-rust"])
    assert (f"note: runtime.options of {f} (batching) are for mstar-python: not applied to "
            f"--runtime mstar-rust") in capsys.readouterr().err
