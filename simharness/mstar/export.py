"""``simharness export-test``: a corpus case as one standalone pytest module in mstar's own terms.

The module reproduces a finding with mstar-ai's API alone (pytest, the standard library and
``mstar``; no simharness):

1. it builds each walk of the case's model from mstar's graph classes and divides it into worker
   graphs with mstar's own division (``Model._get_worker_graphs_for_graph_walk``, the call
   `simharness.mstar.placement.mstar_worker_graphs` makes), written out as literal code;
2. it replays, as plain statements and in the recorded order, every call the simulation's
   workers made into each request's ``WorkerGraphIO`` under the ``mstar-graph`` runtime
   (`simharness.mstar.record`), each commented with its rank and worker graph;
3. at each ``mark_node_complete`` it asserts the pairs a correct graph runtime routes
   (`simharness.mstar.expect`): so on a runtime with the bug it fails by assertion at the
   completion where mstar goes wrong, and stops there (what the recording holds after that point
   is what mstar did once it had gone wrong).

A finding is exportable at this level when mstar's graph objects themselves answer wrongly
during the recorded run (a real finding: the module fails), or, for a case whose failure belongs
to another runtime (its verdict is not *real*), when its check concerns what the graph objects
answer (`GRAPH_CHECKS`; the module passes on mstar's Python runtime and holds the Rust one to the
same answers). A case whose graph objects answered every call correctly is handed to
`simharness.mstar.worker_export`, which writes what the real stack's StreamBuffers or message
handling did, where they misbehaved in the case's run; every other case is refused in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from simharness.errors import UsageError
from simharness.graph.ir import Edge, Loop, Node, Parallel, Section, Sequential
from simharness.mstar.convert import dest_of
from simharness.mstar.expect import Expected, Judge, first_disagreement
from simharness.mstar.export_text import WIDTH, Exported, describe_runtime, docstring, identifier
from simharness.mstar.export_text import literal as _literal
from simharness.mstar.export_text import quote as _q
from simharness.mstar.export_text import set_literal as _set
from simharness.mstar.package import PINNED, installed_version
from simharness.mstar.record import Call, Recording, StateKey, record
from simharness.wording import plural

#: the real stack's runtime name: ``--runtime mstar`` exports what its Workers did
STACK = "mstar"
#: checks whose failure can be a wrong answer of the graph objects themselves: a loop-back that
#: escapes a loop's end (loop_exit), an input a node waits for that is never routed (liveness)
GRAPH_CHECKS = ("loop_exit", "liveness")
#: why a case whose mechanism is elsewhere cannot be shown at the graph level, by its check
ELSEWHERE = {
    "drain": "what a rank keeps after a request ends is decided by the Worker's teardown "
             "(REMOVE, parked messages)",
    "streams": "stream chunks are cut by the StreamBuffer and ended by the Conductor's "
               "producer_done",
    "forwards": "which passes run is decided by the Worker (STOP_LOOPS between ranks, stream "
                "chunks, speculation)",
    "liveness": "the missing input is lost between ranks (the Worker's STOP_LOOPS, messages, "
                "TP lockstep), not by the graph objects",
    "tp_agreement": "TP ranks agree through the Worker's lockstep",
    "worker_graphs": "the Worker reports worker graphs done",
}
#: the one line of a refusal, as issue 38 words it
NEEDS_WORKER = ("this finding needs more of mstar's Worker than an exported test drives: not "
                "exportable yet")


def export(path: str | Path, runtime: str | None = None) -> Exported:
    """Record the case at `path` under ``mstar-graph`` and write its module's text; where mstar's
    graph objects answered every call correctly, or `runtime` is ``mstar`` (the real stack), write
    what the stack's StreamBuffers or message handling did instead (`worker_export`)."""
    from simharness.scenario.loader import load_scenario

    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path}: is a directory; expected a corpus case (a YAML file)")
    sc = load_scenario(p)
    meta = sc.corpus
    if meta is None:
        raise UsageError(f"{path}: not a corpus case (it has no corpus: block); export-test "
                         f"exports a failing case that fuzz or explore wrote")
    if meta.against is not None:
        raise UsageError(f"{path}: a differential case ({meta.runtime} against {meta.against}) "
                         f"is not exportable: two runtimes that differ give no one correct answer "
                         f"to assert")
    if runtime == STACK:
        return _from_stack(sc, p, lambda looked: (
            f"--runtime {STACK}: nothing of mstar's Worker to export"
            f"{f' ({looked})' if looked else ''}; without --runtime, export-test also tries "
            f"mstar's graph objects"))
    options = _runtime_options(sc, runtime)
    rec = record(sc, options)
    judged = Judge(rec).judge()
    wrong = first_disagreement(judged)
    verdict = meta.verdict if isinstance(meta.verdict, dict) else {}
    real = verdict.get("mstar") == "real"
    check = str(meta.check or meta.signature.split(":")[0])
    n_calls = plural(len(rec.calls), "call")
    notes: list[str] = []
    if wrong is None and (real or check not in GRAPH_CHECKS):
        why = ELSEWHERE.get(check, "its mechanism lies around the graph objects")
        return _from_stack(sc, p, lambda looked: (
            f"{NEEDS_WORKER} (mstar's graph objects answered all {n_calls} of the run as a "
            f"correct runtime would{f', and {looked}' if looked else ''}; {why})"))
    if wrong is not None and not real:
        notes.append(f"the case's verdict is {verdict.get('mstar') or 'not recorded'}, but "
                     f"mstar's graph code answers wrongly in it: the module fails; "
                     f"simharness replay --update {p.name} judges the case again")
    if wrong is None and not verdict:
        notes.append("the case has no verdict recorded; the module holds mstar's graph code to "
                     "the correct answers, which it gives here")
    text = Emitter(rec, judged, wrong, p).module()
    if wrong is None:
        summary = (f"passes on mstar-ai's Python graph runtime: {n_calls} replayed, "
                   f"{plural(len(judged), 'completion')} asserted")
        return Exported(text, "pass", summary, notes)
    rank, _rid, wg = wrong.call.key
    explained = _explains(rec, wrong)
    summary = (f"fails by assertion where mstar goes wrong: {wrong.call.args['node']} completing "
               f"in {wg} on rank {rank} ({'; '.join(_differences(wrong))}"
               f"{'; ' + explained if explained else ''})")
    return Exported(text, "fail", summary, notes)


def _from_stack(sc: Any, p: Path, refusal: Callable[[str], str]) -> Exported:
    """The module of what the real stack's Workers did (`worker_export`), or the refusal
    `refusal` words from what was looked at."""
    from simharness.mstar.worker_export import export_worker

    exported = export_worker(sc, p)
    if isinstance(exported, Exported):
        return exported
    raise UsageError(f"{p.name}: {refusal(exported)}")


def _runtime_options(sc: Any, runtime: str | None) -> dict[str, Any]:
    """The options of the ``mstar-graph`` runtime to record under (the scenario's, when it
    names that runtime); any other runtime is refused: only mstar-graph drives mstar's graph
    objects call by call."""
    from simharness.mstar.runtime import MstarRuntime

    name = runtime or MstarRuntime.name
    if name != MstarRuntime.name:
        raise UsageError(f"--runtime {name}: export-test records the calls the {MstarRuntime.name} "
                         f"runtime makes into mstar's graph objects, or what the real stack "
                         f"({STACK}) does around them; {name} does neither (use --runtime "
                         f"{MstarRuntime.name}, the default, or {STACK})")
    if sc.runtime.name == MstarRuntime.name:
        return dict(sc.runtime.options)
    return {}


def _differences(ex: Expected) -> list[str]:
    out = [f"it must route {_pair(p)}" for p in ex.missing]
    out += [f"it must not route {_pair(p)}" for p in ex.extra]
    return out


def _explains(rec: Recording, ex: Expected) -> str:
    """Whether the missing pair is what a hang the checks reported waits for."""
    for v in rec.violations:
        if v.check != "liveness":
            continue
        for link in v.details.get("chain", ()):
            for name in link.get("missing", ()):
                if (name, link.get("node")) in ex.missing:
                    return f"the input the liveness check saw {link['node']} wait for"
    return ""


def _pair(p: Any) -> str:
    name, dest = p
    return f"{name} -> {dest or '(conductor)'}"


# -- the module's text ------------------------------------------------------------------------


def _pairs(pairs: Iterable[Any]) -> str:
    items = sorted({tuple(p) for p in pairs})
    return "{" + ", ".join(f"({_q(a)}, {_q(b)})" for a, b in items) + "}" if items else "set()"


def _edge(name: str, dest: str, persist: bool = False, new_token: bool = False) -> str:
    flags = (", persist=True" if persist else "") + (", conductor_new_token=True" if new_token else "")
    return f"GraphEdge(next_node={_q(dest)}, name={_q(name)}{flags})"


# A small tree of the code that builds a walk, printed on one line where it fits: a call is
# (function, [(keyword or None, argument)]), a list is a Python list, a string is written as is.
_Expr = Any


def _render(expr: _Expr, indent: str, lead: str = "", trail: str = "") -> list[str]:
    """`expr` as lines at `indent`, after `lead` (``name=``) and before `trail` (``,``)."""
    flat = lead + _flat(expr) + trail
    if isinstance(expr, str) or len(indent + flat) <= WIDTH:
        return [indent + flat]
    if isinstance(expr, list):
        open_, close, items = "[", "]", [(None, e) for e in expr]
    elif len(expr[1]) == 1 and expr[1][0][0] is None and isinstance(expr[1][0][1], list):
        # a call of one list, as mstar writes Sequential([...]): the brackets hug the parens
        open_, close, items = f"{expr[0]}([", "])", [(None, e) for e in expr[1][0][1]]
    else:
        open_, close, items = f"{expr[0]}(", ")", expr[1]
    lines = [indent + lead + open_]
    for kw, arg in items:
        lines += _render(arg, indent + "    ", f"{kw}=" if kw else "", ",")
    return [*lines, indent + close + trail]


def _flat(expr: _Expr) -> str:
    if isinstance(expr, str):
        return expr
    if isinstance(expr, list):
        return "[" + ", ".join(_flat(e) for e in expr) + "]"
    func, args = expr
    return f"{func}(" + ", ".join((f"{kw}=" if kw else "") + _flat(a) for kw, a in args) + ")"


def _out_edges(edges: Iterable[Edge]) -> list[str]:
    # as `simharness.mstar.convert.to_mstar` builds them (a stream edge is a plain one there)
    return [_edge(e.name, dest_of(e.to), e.persist, e.new_token) for e in edges]


def section_expr(sec: Section) -> _Expr:
    """The code building `sec` from mstar's graph classes: the calls `convert.to_mstar` makes."""
    if isinstance(sec, Node):
        args: list[tuple[str | None, _Expr]] = [
            ("name", _q(sec.name)), ("input_names", _set(sec.inputs)),
            ("outputs", _out_edges(sec.outputs))]
        if not sec.async_scheduling:
            args.append(("enable_async_scheduling", "False"))
        return ("GraphNode", args)
    if isinstance(sec, Sequential | Parallel):
        kind = "Sequential" if isinstance(sec, Sequential) else "Parallel"
        return (kind, [(None, [section_expr(s) for s in sec.sections])])
    assert isinstance(sec, Loop)
    args = [("section", section_expr(sec.body)), ("max_iters", str(sec.max_iters)),
            ("outputs", _out_edges(sec.outputs)), ("name", _q(sec.name))]
    if sec.accumulated_outputs:
        args.append(("accumulated_outputs", _out_edges(sec.accumulated_outputs)))
    return ("Loop", args)


def section_code(sec: Section, indent: str = "", lead: str = "") -> list[str]:
    """Lines building `sec` (see `section_expr`)."""
    return _render(section_expr(sec), indent, lead)


def _classes(sec: Section) -> set[str]:
    """The mstar graph classes `section_code` uses for `sec`."""
    if isinstance(sec, Node):
        return {"GraphNode"}
    parts = sec.sections if isinstance(sec, Sequential | Parallel) else (sec.body,)
    return {type(sec).__name__}.union(*(_classes(p) for p in parts))


class Emitter:
    """Writes the module for one recording (see the module docstring for its parts)."""

    def __init__(self, rec: Recording, judged: list[Expected], wrong: Expected | None,
                 path: Path) -> None:
        self.rec = rec
        self.sc = rec.scenario
        self.judged = {id(j.call): j for j in judged}
        self.wrong = wrong
        self.path = path
        self.names = self._state_names()
        self.version = installed_version() or PINNED

    def _state_names(self) -> dict[StateKey, str]:
        """A variable per (rank, request, worker graph): ``r0_w0_1``, with ``_rank2`` where the
        request has that worker graph on several ranks (a TP instance)."""
        keys = list(dict.fromkeys(c.key for c in self.rec.calls if c.op == "create"))
        ranks_of: dict[tuple[str, str], set[int]] = {}
        for rank, rid, wg in keys:
            ranks_of.setdefault((rid, wg), set()).add(rank)
        names = {}
        for rank, rid, wg in keys:
            several = len(ranks_of[(rid, wg)]) > 1
            names[(rank, rid, wg)] = identifier(f"{rid}_{wg}" + (f"_rank{rank}" if several else ""))
        return names

    # -- the parts ----------------------------------------------------------------------------

    def module(self) -> str:
        classes = sorted({"GraphEdge", "WorkerGraphIO"}.union(
            *(_classes(root) for root in self.sc.walks.values())))
        parts = [
            self._docstring(), "import copy", "import importlib.util",
            "from types import SimpleNamespace", "", "import pytest", "",
            f"from mstar.graph.graph_io import {', '.join(classes)}", "", "",
            *self._walks(), "", "", *self._division(), "", "", *self._runtimes(), "", "",
            *self._test()]
        return "\n".join(parts).rstrip() + "\n"

    def _docstring(self) -> str:
        meta = self.sc.corpus
        assert meta is not None
        verdict = meta.verdict if isinstance(meta.verdict, dict) else {}
        check = str(meta.check or meta.signature.split(":")[0])
        seen = [v.headline or v.message for v in self.rec.violations if v.check == check]
        paras = [
            f"Exported by `simharness export-test` from the corpus case {self.path.name} "
            f"(signature {meta.signature}, found under {meta.runtime}). It needs pytest and "
            f"mstar-ai alone."]
        if verdict.get("text"):
            paras.append(f"Verdict: {verdict['text']}.")
        if seen:
            paras.append(f"What the harness's {check} check saw, under mstar's graph code: "
                         f"{seen[0]}.")
        paras.append(
            "The test builds the model's walks from mstar's graph classes, divides them into "
            "worker graphs with mstar's own division (Model._get_worker_graphs_for_graph_walk), "
            "and replays what the simulation's workers asked of each request's WorkerGraphIO, "
            "call by call, in the order they asked it. At each mark_node_complete it asserts "
            "the (name, destination) pairs a correct graph runtime routes: the node's outputs, "
            "less the loop-backs of a loop that ended there; an ended loop's outputs; and, when "
            "a loop advances, every external input it took, to each node that took it.")
        if self.wrong is not None:
            rank, _rid, wg = self.wrong.call.key
            paras.append(
                f"mstar-ai {self.version} goes wrong at {self.wrong.call.args['node']}'s "
                f"completion in worker graph {wg} (rank {rank}): {'; '.join(_differences(self.wrong))}. "
                f"{_mechanism(self.wrong)} The test fails there, by assertion, and the replay "
                f"stops there.")
        else:
            paras.append(f"The case fails the harness's {check} check under {meta.runtime}, which "
                         f"simharness describes as: {describe_runtime(meta.runtime)}. It passes under "
                         f"mstar's own graph code.")
            paras.append(
                f"mstar-ai {self.version}'s Python graph runtime gives every one of these "
                f"answers, so the test passes on it; a graph runtime that does not (the case "
                f"was found on {meta.runtime}) fails it by assertion.")
        paras.append(
            "Parametrized over mstar's Python graph runtime and its Rust one. The Rust arm "
            "skips, with the reason, where mstar_rust cannot be imported or the installed mstar "
            "has no Rust graph runtime this test can drive (mstar-ai 0.2.1 has none: its graph "
            "code is mstar.graph alone, and its mstar_rust carries the ZMQ transport and the "
            "shared-memory arena).")
        return docstring(f"{self.sc.name}: a correct graph runtime's answers, asked of mstar's.",
                         f"{self.sc.name}.", paras)

    def _walks(self) -> list[str]:
        lines: list[str] = []
        for walk, root in self.sc.walks.items():
            lines += [f"def {identifier('walk_' + walk)}():",
                      f'    """Walk {walk} as mstar graph objects (what the model\'s '
                      f'get_graph_walk_graphs gives)."""',
                      *section_code(root, "    ", "return "), "", ""]
        return [*lines, "WALKS = {" + ", ".join(f"{_q(w)}: {identifier('walk_' + w)}"
                                                for w in self.sc.walks) + "}"]

    def _division(self) -> list[str]:
        layout = self.rec.layout
        groups = []
        for ng in self.sc.placement.node_groups:
            group = (f'{{"node_names": [{", ".join(_q(n) for n in ng.node_names)}], '
                     f'"ranks": {list(ng.ranks)}, "tp_size": {ng.tp_size}, "sp_size": {ng.sp_size}')
            if ng.graph_walks is not None:
                group += f', "graph_walks": [{", ".join(_q(w) for w in ng.graph_walks)}]'
            groups.append(group + "}")
        parts = [("SimpleNamespace", [("name", _q(name)), ("graph_walks", _set(walks))])
                 for name, walks in self.sc.partitions.items()]
        conns = [("SimpleNamespace", [("from_partition", _q(c.src)), ("to_partition", _q(c.dst)),
                                      ("edge_name", _q(c.edge))]) for c in self.sc.connections]
        ids = {walk: [wg.id for wg in wgs] for walk, wgs in layout.by_walk.items()}
        shapes = {wg.id: (sorted(wg.node_names), list(wg.ranks)) for wg in layout.worker_graphs}
        return [
            "#: the config's node groups (mstar: node_groups)",
            "NODE_GROUPS = [", *(f"    {g}," for g in groups), "]",
            "#: the model's partitions and stream connections: all that",
            "#: Model._get_worker_graphs_for_graph_walk reads of a model",
            *_render(parts, "", "PARTITIONS = "),
            *_render(conns, "", "CONNECTIONS = "),
            "MODEL = SimpleNamespace(",
            "    get_partitions=lambda: PARTITIONS,",
            "    get_partition_topology=lambda: SimpleNamespace(connections=CONNECTIONS),",
            ")",
            "#: the worker graphs of each walk, in mstar's order, as the harness names them",
            "WORKER_GRAPH_IDS = {" + ", ".join(
                f"{_q(w)}: [{', '.join(_q(i) for i in v)}]" for w, v in ids.items()) + "}",
            "", "",
            '@pytest.fixture(scope="module")',
            "def worker_graphs():",
            '    """Each walk divided into worker graphs by mstar\'s own division."""',
            "    try:",
            "        from mstar.model.base import Model",
            "    except Exception as exc:  # it imports torch, triton, pyzmq and msgpack",
            '        pytest.skip(f"mstar.model.base cannot be imported ({type(exc).__name__}: {exc})")',
            "    out = {}",
            "    for walk, build in WALKS.items():",
            "        divided = Model._get_worker_graphs_for_graph_walk(MODEL, walk, build(), NODE_GROUPS)",
            "        out.update(zip(WORKER_GRAPH_IDS[walk], divided, strict=True))",
            "    # the replay below means something only on the division it was recorded on",
            "    division = {wg_id: (sorted(wg.section.get_nodes()), wg.ranks) for wg_id, wg in out.items()}",
            "    assert division == {",
            *(f"        {_q(k)}: ([{', '.join(_q(n) for n in v[0])}], {v[1]})," for k, v in shapes.items()),
            "    }",
            "    return out"]

    def _runtimes(self) -> list[str]:
        return [
            "def _rust_graph_runtime_or_skip():",
            '    """Skip, with the reason, unless an mstar Rust graph runtime can be driven here."""',
            "    try:",
            "        import mstar_rust",
            "    except ImportError as exc:",
            '        pytest.skip(f"mstar_rust cannot be imported ({exc})")',
            '    if importlib.util.find_spec("mstar.graph.runtime") is None or not hasattr(',
            '            mstar_rust, "GraphRuntime"):',
            *_literal("this mstar has no Rust graph runtime: its mstar_rust carries the transport "
                      "and the shared-memory arena, not the graph code", "        ", "pytest.skip(", ")"),
            *_literal("this mstar selects a Rust graph runtime with MSTAR_RUST_GRAPH, behind "
                      "mstar.graph.runtime: an interface this test does not drive yet (it drives "
                      "WorkerGraphIO, the Python runtime's objects)", "    ", "pytest.skip(", ")"),
            "", "",
            '@pytest.fixture(params=["python", "rust"])',
            "def graph_runtime(request):",
            '    """mstar\'s graph runtime under test: its Python one (mstar.graph), or its Rust one."""',
            '    if request.param == "rust":',
            "        _rust_graph_runtime_or_skip()",
            "    return request.param",
            "", "",
            "def routed(done):",
            '    """The (name, destination) pairs a mark_node_complete hands the worker to route."""',
            "    return {(e.name, e.next_node) for e in done.output_edges}",
        ]

    def _test(self) -> list[str]:
        name = identifier("test_" + self.sc.name.replace("-", "_").lower())
        if self.wrong is not None:
            doc = (f"{self.wrong.call.args['node']}'s completion in {self.wrong.call.key[2]} must "
                   f"route what a correct graph runtime routes.")
        else:
            doc = "Every completion of the recorded run routes what a correct graph runtime routes."
        lines = [f"def {name}(graph_runtime, worker_graphs):", f'    """{doc}"""',
                 "    wg = worker_graphs"]
        calls = self.rec.calls
        if self.wrong is not None:
            end = next(i for i, c in enumerate(calls) if c is self.wrong.call)
            calls = calls[:end + 1]
        # a state the replay never uses again is not made (its creation changes nothing else)
        used = {c.key for c in calls if c.op != "create"}
        last: StateKey | None = None
        for call in calls:
            if call.op == "create" and call.key not in used:
                continue
            lines += self._call(call, last)
            last = call.key
            if self.wrong is not None and call is self.wrong.call:
                lines += ["    # The recording goes on with what mstar did once it had gone wrong; a "
                          "correct",
                          "    # runtime would have gone on otherwise, so the replay ends here."]
                break
        return lines

    def _call(self, c: Call, last: StateKey | None) -> list[str]:
        v = self.names[c.key]
        a, ans = c.args, c.answer
        rank, rid, wg = c.key
        if c.op == "create":
            return ["", f"    # rank {rank}: request {rid} arrives; its state in worker graph {wg}",
                    f"    {v} = WorkerGraphIO(copy.deepcopy(wg[{_q(a['wg'])}].section), "
                    f"wg_id={_q(a['wg'])})"]
        head = [] if c.key == last else ["", f"    # rank {rank}, {rid} in worker graph {wg}"]
        if c.op == "ingest":
            edge = _edge(a["name"], a["dest"], a["persist"], a["new_token"])
            call = f"{v}.ingest_input({edge}" + ("" if a["can_buffer"] else ", can_buffer=False") + ")"
            note = a["what"] + (f", into the {ans['slot']} slot" if ans["ok"] and
                                ans["slot"] != "current" else "")
            line = f"    assert {call}" if ans["ok"] else f"    assert not {call}"
            if len(f"{line}  # {note}") > WIDTH:
                return [*head, f"    # {note}", line]
            return [*head, f"{line}  # {note}"]
        if c.op == "pop":
            return [*head, f"    assert {v}.ready_node_names == {_set(ans['ready'])}",
                    f"    {v}.ready_node_names.discard({_q(a['node'])})  # the scheduler takes it"]
        if c.op == "clear":
            return [*head, f"    {v}.nodes[{_q(a['node'])}].ready_signals.clear()  # its batch "
                           f"consumed its inputs"]
        if c.op == "speculative":
            return [*head, f"    {v}.nodes[{_q(a['node'])}]._speculatively_scheduled = {a['flag']}"]
        if c.op == "stop":
            return [*head, f"    {v}.register_loop_finish_signal({_q(a['loop'])})  # a check_stop "
                           f"said stop"]
        if c.op == "reset":
            return [*head, f"    {v}.clear()  # done: cleared for the request's next pass"]
        assert c.op == "complete"
        return [*head, *self._complete(c, v)]

    def _complete(self, c: Call, v: str) -> list[str]:
        ex = self.judged[id(c)]
        loops = "; ".join(f"loop {lp} {'advances' if w == 'advance' else 'ends'}"
                          for lp, w in c.answer["loops"])
        out = []
        if ex is self.wrong:
            got = _pairs(ex.routed) if ex.routed else "nothing"
            out.append(f"    # mstar-ai {self.version} routes {got} here")
        out.append(f"    done = {v}.mark_node_complete({_q(c.args['node'])})"
                   + (f"  # {loops}" if loops else ""))
        if ex is self.wrong:
            for p in ex.missing:
                out += _literal(f"{ex.route[p].text} must be routed", "    ",
                                f"assert ({_q(p[0])}, {_q(p[1])}) in routed(done), ")
            for p in ex.extra:
                held = ex.hold.get(p)
                why = held.text if held else f"{_pair(p)} (none of the pairs to route)"
                out += _literal(f"{why} must not be routed", "    ",
                                f"assert ({_q(p[0])}, {_q(p[1])}) not in routed(done), ")
        message = "routes " + "; ".join(w.text for w in ex.route.values()) if ex.route else \
            "routes nothing"
        if ex.hold:
            message += "; not " + "; ".join(w.text for w in ex.hold.values())
        return [*out, *_literal(message, "    ", f"assert routed(done) == {_pairs(ex.route)}, ")]


def _mechanism(ex: Expected) -> str:
    """Where the difference comes from in mstar-ai 0.2.1, as far as the recording tells."""
    filtered = {(name, dest) for name, dest in ex.call.answer["filtered"]}
    for p in ex.missing:
        why = ex.route[p]
        if why.kind == "reinject":
            return ("A loop saves one edge per external input *name* "
                    "(Loop.ingest_external_input, mstar/graph/base.py) and routes only the saved "
                    "ones again when it advances.")
        if p in filtered:
            return (f"mstar filtered {_pair(p)} out as a loop-back pair of the loop that ended: "
                    f"a loop filters by (name, destination) pairs of its whole loop-back set "
                    f"(LoopStateRegistry.mark_entity_complete, mstar/graph/base.py), and this "
                    f"forward edge shares its pair with a loop-back.")
    for p in ex.extra:
        held = ex.hold.get(p)
        if held is not None:
            return f"The loop-back {_pair(p)} escapes the end of loop {held.loop}."
    return ""


__all__ = ["ELSEWHERE", "GRAPH_CHECKS", "NEEDS_WORKER", "Exported", "export", "identifier",
           "section_code"]
