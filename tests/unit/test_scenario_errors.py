"""Bad input: one line naming the file, the key path and what was expected; exit 2; no traceback."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from simharness.cli import main
from tests.helpers import split_loop


def _mut(fn):
    def apply(raw):
        raw = copy.deepcopy(raw)
        fn(raw)
        return raw
    return apply


def _loop(raw):
    return raw["graph"]["walks"]["w"]["sequential"][0]["loop"]


def _other_walk(raw):
    """A second walk v (its own kind), and an expectation of it under kind req, which never takes it."""
    raw["graph"]["walks"]["v"] = {"node": "D", "inputs": ["q"]}
    raw["graph"]["requests"]["other"] = {"walks": ["v"], "inputs": ["q"]}
    raw["placement"]["node_groups"].append({"node_names": ["D"], "ranks": [0]})
    raw["expect"] = {"per_request_kind": {"req": {"v": {"D": 1}}}}


CASES = [
    # (id, mutation of a valid scenario, expected key path, expected words)
    ("unknown top-level key", _mut(lambda r: r.update(colour="red")), "colour", "unknown key"),
    ("unknown node key", _mut(lambda r: _loop(r)["body"]["sequential"][0].update(inptus=["x"])),
     "graph.walks.w.sequential[0].loop.body.sequential[0].inptus", "unknown key"),
    ("wrong type", _mut(lambda r: _loop(r).update(max_iters="ten")),
     "graph.walks.w.sequential[0].loop.max_iters", "expected an integer"),
    ("max_iters below 1", _mut(lambda r: _loop(r).update(max_iters=0)),
     "graph.walks.w.sequential[0].loop.max_iters", "expected an integer >= 1"),
    ("unplaced node", _mut(lambda r: r["placement"]["node_groups"][1]["node_names"].remove("C")),
     "placement.node_groups", "node 'C' of walk 'w'"),
    ("edge to unknown node",
     _mut(lambda r: _loop(r)["body"]["sequential"][0]["outputs"][0].update(to="Z")),
     "graph.walks.w.sequential[0].loop.body.sequential[0].outputs[0].to", "not a node of walk"),
    ("edge to an input the node lacks",
     _mut(lambda r: _loop(r)["body"]["sequential"][0]["outputs"][0].update(name="q")),
     "graph.walks.w.sequential[0].loop.body.sequential[0].outputs[0].name", "has no input named"),
    ("input nobody sends",
     _mut(lambda r: _loop(r)["body"]["sequential"][0]["inputs"].append("ghost")),
     "graph.walks.w.sequential[0].loop.body.sequential[0].inputs[1]", "never sent"),
    ("unknown request kind", _mut(lambda r: r["workload"][0].update(request="nope")),
     "workload[0].request", "unknown request kind"),
    ("negative count", _mut(lambda r: r["workload"][0].update(count=-3)),
     "workload[0].count", "expected an integer >= 0"),
    ("unknown walk in a request kind", _mut(lambda r: r["graph"]["requests"]["req"]["walks"].append("x")),
     "graph.requests.req.walks[1]", "unknown walk"),
    ("rank gap", _mut(lambda r: r["placement"]["node_groups"][1].update(ranks=[2])),
     "placement.node_groups[1].ranks[0]", "rank 2 leaves a gap"),
    ("node twice in a walk",
     _mut(lambda r: r["graph"]["walks"]["w"]["sequential"].append(
         {"node": "A", "inputs": [], "outputs": []})),
     "graph.walks.w.sequential[2].node", "appears twice"),
    ("unknown runtime", _mut(lambda r: r.update(runtime="mstar-cobol")), "runtime", "unknown runtime"),
    ("bad runtime option", _mut(lambda r: r.update(runtime={"name": "mstar-python",
                                                             "options": {"batching": "x"}})),
     "runtime.options.batching", "must be one of minibatch, backlog, got 'x'"),
    ("zero concurrency", _mut(lambda r: r["workload"][0].update(concurrency=0)),
     "workload[0].concurrency", ">= 1"),
    ("bad size", _mut(lambda r: r.update(payloads={"x": "lots"})), "payloads.x", "a size such as"),
] + [
    # A misspelt name gets "did you mean" and the names it could be; a refusal names what was typed.
    ("node in expect", _mut(lambda r: r.update(expect={"forwards_per_request": {"w": {"AA": 1}}})),
     "expect.forwards_per_request.w.AA", "walk 'w' has no node 'AA'; did you mean 'A'? (nodes: "),
    ("node in graph.nodes", _mut(lambda r: r["graph"].update(nodes={"Bx": {"service_ms": 1}})),
     "graph.nodes.Bx", "unknown node 'Bx': no walk of this scenario has a node of that name; "
                       "did you mean 'B'? (nodes: A, B, C)"),
    ("walk in per_walk", _mut(lambda r: r["graph"].update(nodes={"A": {"per_walk": {"ww": {}}}})),
     "graph.nodes.A.per_walk.ww", "unknown walk 'ww'; did you mean 'w'? (walks: w)"),
    ("node in stop.by", _mut(lambda r: _loop(r).update(stop={"by": ["AA"]})),
     "graph.walks.w.sequential[0].loop.stop.by[0]",
     "node 'AA' is not in the body of loop 'L'; did you mean 'A'? (body nodes: A, B)"),
    ("loop in stops", _mut(lambda r: (_loop(r).update(stop={}),
                                      r["graph"]["requests"]["req"].update(stops={"LL": 2}))),
     "graph.requests.req.stops.LL", "did you mean 'L'? (dynamic loops: L)"),
    ("input in a script", _mut(lambda r: r["graph"].update(nodes={"A": {"script": [
        {"at_counter": 0, "wait_for_walk_start": ["xx"]}]}})),
     "graph.nodes.A.script[0].wait_for_walk_start",
     "node 'A' has no input 'xx' in walk 'w'; did you mean 'x'? (inputs: x)"),
    ("node of a walk-start input", _mut(lambda r: r["graph"]["requests"]["req"].update(
        inputs=[{"name": "x", "to": "AA"}])),
     "graph.requests.req.inputs[0]", "input x→AA can never be taken: no walk of kind 'req' has a "
                                     "node 'AA'; did you mean 'A'? (nodes: "),
    ("input of a walk-start input", _mut(lambda r: r["graph"]["requests"]["req"].update(
        inputs=[{"name": "xx", "to": "A"}])),
     "graph.requests.req.inputs[0]", "node 'A' has no input 'xx' in walk w; did you mean 'x'? (inputs: x)"),
    ("edge name", _mut(lambda r: _loop(r)["body"]["sequential"][0]["outputs"][0].update(name="yy")),
     "graph.walks.w.sequential[0].loop.body.sequential[0].outputs[0].name",
     "edge 'yy' goes to 'B', which has no input named 'yy' in walk 'w'; did you mean 'y'?"),
    ("transport", _mut(lambda r: r["network"].update(transport="shmm")), "network.transport",
     "got the string 'shmm'; did you mean 'shm'?"),
    ("fault kind", _mut(lambda r: r.update(faults=[{"kind": "crashh", "rank": 0}])), "faults[0].kind",
     "did you mean 'crash'?"),
    ("fault without a kind", _mut(lambda r: r.update(faults=[{"rank": 0}])), "faults[0].kind",
     "missing required key (one of delay, "),
    ("fault message", _mut(lambda r: r.update(faults=[{"kind": "drop", "message": "new_requets"}])),
     "faults[0].message", "did you mean 'new_request' or 'remove_request'?"),
    ("fault endpoint", _mut(lambda r: r.update(faults=[{"kind": "drop", "message": "new_request",
                                                         "from": "conductr"}])),
     "faults[0].from", "got the string 'conductr'; did you mean 'conductor'?"),
    ("corpus status", _mut(lambda r: r.update(corpus={"signature": "a:b", "runtime": "mstar-python",
                                                      "status": "opne"})),
     "corpus.status", "did you mean 'open'?"),
    ("corpus digest not a string", _mut(lambda r: r.update(corpus={
        "signature": "a:b", "runtime": "mstar-python", "status": "open", "trace_digest": 5})),
     "corpus.trace_digest", "expected a string"),
    ("unknown runtime option", _mut(lambda r: r.update(runtime={"name": "mstar-python",
                                                                 "options": {"batchin": "backlog"}})),
     "runtime.options.batchin", "unknown option; did you mean 'batching'? (options of mstar-python: "),
    ("misspelt runtime option value", _mut(lambda r: r.update(runtime={
        "name": "mstar-python", "options": {"batching": "backlg"}})),
     "runtime.options.batching", "got 'backlg'; did you mean 'backlog'?"),
    ("payload of no signal", _mut(lambda r: r.update(payloads={"yy": 8})), "payloads.yy",
     "no edge or input of any walk is named 'yy'; did you mean 'y'?"),
    ("empty graph_walks", _mut(lambda r: r["placement"]["node_groups"][0].update(graph_walks=[])),
     "placement.node_groups[0].graph_walks", "leave graph_walks out to place the group's nodes"),
    ("rank twice", _mut(lambda r: r["placement"]["node_groups"][1].update(ranks=[1, 1])),
     "placement.node_groups[1].ranks[1]", "rank 1 is listed twice"),
    ("input nobody sends, said plainly",
     _mut(lambda r: _loop(r)["body"]["sequential"][0]["inputs"].append("ghost")),
     "graph.walks.w.sequential[0].loop.body.sequential[0].inputs[1]",
     "input 'ghost' of node 'A' is never sent in walk 'w': no edge in the walk targets it, it is "
     "neither a loop-back input nor a stream, request kind 'req' does not supply it (add it to "
     "graph.requests.req.inputs), and no earlier walk of the kind persists it"),
    ("output in outputs and accumulated_outputs",
     _mut(lambda r: _loop(r).update(accumulated_outputs=[{"name": "x", "to": "C"}])),
     "graph.walks.w.sequential[0].loop.accumulated_outputs",
     "output 'x' is in both outputs and accumulated_outputs: give it one of the two"),
    ("streaming edge that persists",
     _mut(lambda r: _loop(r)["body"]["sequential"][0]["outputs"][0].update(stream=True, persist=True)),
     "graph.walks.w.sequential[0].loop.body.sequential[0].outputs[0].persist", "cannot persist"),
    ("streaming edge to the client",
     _mut(lambda r: r["graph"]["walks"]["w"]["sequential"][1]["outputs"][0].update(stream=True)),
     "graph.walks.w.sequential[1].outputs[0].to",
     "a streaming edge goes to a node of another partition, not to client"),
    ("expect a walk the kind does not take", _mut(_other_walk), "expect.per_request_kind.req.v",
     "request kind 'req' takes no walk 'v' (its walks: w)"),
]


def _run_cli(capsys, args):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_scenario_gives_one_line_and_exit_2(tmp_path, capsys, case):
    _, mutate, path, words = case
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(mutate(split_loop())))
    code, out, err = _run_cli(capsys, ["run", str(f)])
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert str(f) in lines[0]
    assert f"{path}:" in lines[0], lines[0]
    assert words in lines[0]


@pytest.mark.parametrize("text,words", [
    ("graph: [unclosed", "not valid YAML at line"),
    ("- just\n- a list\n", "expected a mapping at the top level"),
    ("name: a\nname: b\n", "duplicate key 'name'"),
    ("", "expected a mapping at the top level"),
])
def test_unreadable_files(tmp_path, capsys, text, words):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    code, _, err = _run_cli(capsys, ["run", str(f)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err and str(f) in err


def test_missing_file(capsys, tmp_path):
    code, _, err = _run_cli(capsys, ["run", str(tmp_path / "nope.yaml")])
    assert code == 2 and "file not found" in err


def test_overrides_are_validated_like_the_file(tmp_path, capsys):
    f = tmp_path / "ok.yaml"
    f.write_text(yaml.safe_dump(split_loop()))
    code, _, err = _run_cli(capsys, ["run", str(f), "--set", "workload[0].count=-1"])
    assert code == 2 and "workload[0].count" in err and "set by --set workload[0].count=-1" in err
    code, _, err = _run_cli(capsys, ["run", str(f), "--set", "workload[4].count=1"])
    assert code == 2 and "no index 4" in err
    code, _, err = _run_cli(capsys, ["run", str(f), "--set", "nokey"])
    assert code == 2 and "expected KEY=VALUE" in err
    code, out, _ = _run_cli(capsys, ["run", str(f), "--set", "workload[0].count=1", "--json"])
    assert code == 0 and '"submitted": 1' in out
    # a dotted index under a list is the bracketed one; under a mapping it stays a key
    code, out, _ = _run_cli(capsys, ["run", str(f), "--set", "workload.0.count=2", "--json"])
    assert code == 0 and '"submitted": 2' in out
    code, _, err = _run_cli(capsys, ["run", str(f), "--set", "workload.0.count=-1"])
    assert code == 2 and "workload[0].count" in err
    code, _, err = _run_cli(capsys, ["run", str(f), "--set", "workload.4.count=1"])
    assert code == 2 and "no index 4" in err
    code, _, err = _run_cli(capsys, ["run", str(f), "--set", "placement.0=1"])
    assert code == 2 and "placement.0: unknown key" in err
    for path in ("workload[1234567890].count", "workload.1234567890.count"):
        code, _, err = _run_cli(capsys, ["run", str(f), "--set", f"{path}=1"])
        assert code == 2 and "list index 1234567890... is too large" in err


def test_unknown_runtime_on_the_command_line(tmp_path, capsys):
    f = tmp_path / "ok.yaml"
    f.write_text(yaml.safe_dump(split_loop()))
    code, _, err = _run_cli(capsys, ["run", str(f), "--runtime", "nope"])
    assert code == 2 and "unknown runtime 'nope'" in err


def test_a_real_process_exits_2_without_a_traceback(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("graph: {walks: {}}\nplacement: {node_groups: []}\nworkload: []\n")
    proc = subprocess.run([sys.executable, "-m", "simharness.cli", "run", str(f)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {f}: graph.walks: ")


def _orpheus():
    from tests.conftest import SCENARIOS
    return yaml.safe_load((SCENARIOS / "orpheus.yaml").read_text())


LAYOUT_CASES = [
    ("stream edge without a connection",
     lambda r: r["graph"].update(streams=[]), "graph.walks.decode.loop.body.outputs[1].stream", "no stream"),
    ("unknown partition in a stream",
     lambda r: r["graph"]["streams"][0].update(to="Nope"), "graph.streams[0].to", "unknown partition"),
    ("walk in no partition",
     lambda r: r["graph"]["partitions"]["LLM"].remove("decode"), "graph.partitions", "is in no partition"),
    ("dynamic loop without a draw",
     lambda r: r["graph"]["requests"]["tts"].pop("stops"), "graph.requests.tts.stops",
     "needs an iteration count"),
    ("repeat-until step not last",
     lambda r: r["graph"]["requests"]["tts"]["partitions"]["SNAC"].append("snac_chunk"),
     "graph.requests.tts.partitions.SNAC[0].until", "only the last step"),
    ("walk of another partition",
     lambda r: r["graph"]["requests"]["tts"]["partitions"]["SNAC"].insert(0, "decode"),
     "graph.requests.tts.partitions.SNAC[0]", "belongs to partition 'LLM'"),
    ("bad policy",
     lambda r: r["graph"]["streams"][0].update(policy={"sliding_window": {"window": 2, "stride": 7}}),
     "graph.streams[0].policy.sliding_window.stride", "stride <= window"),
    ("left_context context above chunk",
     lambda r: r["graph"]["streams"][0].update(policy={"left_context": {"chunk": 3, "context": 4}}),
     "graph.streams[0].policy.left_context.context", "context <= chunk (3), got 4"),
    ("sliding_window stride below 1",
     lambda r: r["graph"]["streams"][0].update(policy={"sliding_window": {"window": 2, "stride": 0}}),
     "graph.streams[0].policy.sliding_window.stride", "expected an integer >= 1"),
    ("stop by a node outside the loop",
     lambda r: r["graph"]["walks"]["decode"]["loop"].update(stop={"by": ["snac_decoder"]}),
     "graph.walks.decode.loop.stop.by[0]", "not in the body"),
    ("one stream to two consumer nodes",
     lambda r: (r["graph"]["walks"].update(snac_chunk={"sequential": [
         {"node": "snac_decoder", "inputs": ["new_token"], "outputs": [{"name": "a", "to": "mix"}]},
         {"node": "mix", "inputs": ["a", "new_token"],
          "outputs": [{"name": "audio_chunk", "to": "client"}]}]}),
         r["placement"]["node_groups"][1]["node_names"].append("mix"),
         r["graph"]["walks"]["decode"]["loop"]["body"]["outputs"][1].update(to="mix")),
     "graph.walks.prefill.outputs[1].to", "feeds one consumer node"),
    ("ranks not divisible by tp_size",
     lambda r: r["placement"]["node_groups"][0].update(ranks=[0, 1, 2], tp_size=2),
     "placement.node_groups[0].ranks", "cannot be split into instances"),
]


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=[c[0] for c in LAYOUT_CASES])
def test_malformed_layout_keys(tmp_path, capsys, case):
    _, mutate, path, words = case
    raw = _orpheus()
    mutate(raw)
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(raw))
    code, out, err = _run_cli(capsys, ["run", str(f)])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{path}:" in err and words in err, err
