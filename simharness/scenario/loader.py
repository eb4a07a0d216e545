"""Load a scenario: read the file, apply ``--set`` overrides, parse the sections, freeze, validate.

The loader works in passes, each in its own module:

1. reading (`simharness.scenario.reading`): a regular file of bounded size, YAML with limits on
   nesting, alias expansion, key types and duplicate keys; the fingerprint;
2. section parsing (`graph_sections` for ``graph:``, `sections` for the rest): plain data to the
   model's frozen records, every default taken from the model itself;
3. validation (`simharness.scenario.validate`): passes over the frozen `Scenario` for what needs
   the whole of it (edges, cycles, streams, inputs never sent, the cost of the run).

Validation happens here and only here. Every error names the file, the key path and what was
expected (`ScenarioError`); the CLI turns it into one line and exit code 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from simharness import fields as f
from simharness.errors import ScenarioError
from simharness.scenario import sources
from simharness.scenario.graph_sections import (
    parse_node_facts,
    parse_partitions,
    parse_requests,
    parse_streams,
    parse_walks,
)
from simharness.scenario.model import Scenario, build_walk_facts
from simharness.scenario.overrides import apply_overrides
from simharness.scenario.reading import MAX_DEPTH, depth, fingerprint, read_yaml
from simharness.scenario.sections import (
    MAX_SEED,
    parse_corpus,
    parse_expect,
    parse_faults,
    parse_kv,
    parse_limits,
    parse_network,
    parse_placement,
    parse_runtime,
    parse_schedule,
    parse_workload,
)
from simharness.scenario.validate import validate
from simharness.wording import hint

__all__ = ["fingerprint", "load_scenario", "parse_scenario", "read_yaml"]

TOP_KEYS = (
    "name", "description", "seed", "graph", "placement", "runtime", "workload", "network",
    "payloads", "expect", "limits", "kv", "schedule", "faults", "corpus",
)
DEFAULT_RUNTIME = "mstar-python"


def load_scenario(path: str | Path, overrides: Sequence[str] = (), *,
                  allow_large: bool = False, raw: dict[str, Any] | None = None) -> Scenario:
    """Read, override, validate and freeze one scenario file.

    `allow_large` lets through a run whose estimated size is above the limits of
    `simharness.scenario.validate.check_cost` (``--allow-large``). `raw` is the file as
    `read_yaml` read it, when the caller has read it already: the file is not read again.
    """
    if raw is None:
        raw = read_yaml(path)
    raw, overridden = apply_overrides(raw, overrides)
    default_name = Path(path).stem
    try:
        return parse_scenario(raw, source=str(path), default_name=default_name,
                              allow_large=allow_large)
    except ScenarioError as err:
        raise attribute(err, overridden).with_source(str(path)) from None


def attribute(err: ScenarioError, overridden: Sequence[tuple[str, str]]) -> ScenarioError:
    """`err`, saying which ``--set`` (key path, as typed) of `overridden` it is about: one that
    set the key in error or a key under it, or the key under which the error was found (a
    misspelt section, ``--set grpah.walks=1``, is refused at ``grpah``). The last such
    ``--set`` is the one that counts, as it is the one applied last."""
    for key_path, text in reversed(overridden):
        if (err.path == key_path or err.path.startswith((key_path + ".", key_path + "["))
                or (err.path and key_path.startswith((err.path + ".", err.path + "[")))):
            shown = text if len(text) <= 80 else text[:77] + "..."
            err.message += f" (set by --set {shown})"
            break
    return err


def _check_payload_names(payloads: dict[str, int], facts: dict) -> None:
    """Every key of ``payloads`` names a signal of some walk: a misspelt one would leave the
    signal at its default size without a word."""
    signals = sorted({name for wf in facts.values() for node in wf.nodes.values()
                      for name in (*node.inputs, *(e.name for e in node.outputs))}
                     | {e.name for wf in facts.values() for lp in wf.loops.values()
                        for e in (*lp.outputs, *lp.accumulated_outputs)})
    for k in payloads:
        if k not in signals:
            raise ScenarioError(f.join("payloads", k), f"no edge or input of any walk is named "
                                                       f"{k!r}{hint(k, signals)}")


def parse_scenario(raw: dict[str, Any], source: str = "<memory>", default_name: str = "scenario",
                   base_dir: str | Path | None = None, *, allow_large: bool = False) -> Scenario:
    """Validate plain data (as read from YAML) into a frozen `Scenario`.

    `base_dir` is where relative paths inside the scenario (``placement.mstar_config``) are
    read from: by default the scenario file's folder, or the working directory.
    """
    if base_dir is None:
        src = Path(source)
        base_dir = src.parent if src.is_file() else Path.cwd()
    if depth(raw) > MAX_DEPTH:
        # Data built in code or by --set can nest deeper than a file may; refuse it the same way.
        raise ScenarioError("", f"nesting deeper than {MAX_DEPTH} levels")
    top = f.mapping(raw, "", TOP_KEYS, required=("graph", "placement", "workload"))
    name = f.name(top.get("name", default_name), "name", "a scenario name")
    description = f.string(top.get("description", ""), "description")
    seed = f.integer(top.get("seed", 0), "seed", minimum=0, maximum=MAX_SEED)

    # graph: the walks first; their facts are computed once, here, and handed to the Scenario.
    graph = f.mapping(top["graph"], "graph", ("nodes", "walks", "requests", "partitions", "streams",
                                              "mstar_model", "mstar_config", "mstar_options"))
    notes: list[str] = []
    resolved_graph = None
    graph_key = next((key for key in sources.GRAPH_SOURCES if key in graph), None)
    if graph_key is not None:
        # The walks come from elsewhere: mstar's own model code (simharness.mstar.reference).
        graph, model_notes = sources.resolve_graph(graph_key, graph, top["placement"], Path(base_dir))
        resolved_graph = graph
        notes.extend(model_notes)
    elif "walks" not in graph:
        raise ScenarioError("graph.walks", "missing required key (or name a model: graph.mstar_model)")
    walks = parse_walks(graph["walks"], notes)
    partitions = parse_partitions(graph.get("partitions"), walks)
    connections = parse_streams(graph.get("streams", []), partitions)
    facts = build_walk_facts(walks, partitions, connections)
    nodes = parse_node_facts(graph.get("nodes", {}), facts)
    requests = parse_requests(graph.get("requests"), walks, partitions, facts)

    placement, resolved = parse_placement(top["placement"], facts, Path(base_dir), notes)
    payloads_raw = top.get("payloads", {})
    payloads = {
        f.name(k, f.join("payloads", str(k)), "a signal name"): f.size(v, f.join("payloads", str(k)))
        for k, v in f.mapping(payloads_raw, "payloads", f.any_keys(payloads_raw)).items()
    }
    _check_payload_names(payloads, facts)
    corpus = parse_corpus(top["corpus"]) if "corpus" in top else None
    scenario = Scenario(
        name=name,
        description=description,
        seed=seed,
        walks=walks,
        nodes=nodes,
        requests=requests,
        placement=placement,
        runtime=parse_runtime(top.get("runtime", DEFAULT_RUNTIME)),
        workload=parse_workload(top["workload"], requests),
        network=parse_network(top.get("network", {})),
        payloads=payloads,
        expect=parse_expect(top.get("expect", {}), facts, requests),
        limits=parse_limits(top.get("limits", {})),
        partitions=partitions,
        connections=connections,
        kv=parse_kv(top.get("kv", {})),
        source=source,
        fingerprint=fingerprint({**raw, **({} if resolved is None else {"placement": resolved}),
                                 **({} if resolved_graph is None else {"graph": resolved_graph})}),
        raw=raw,
        schedule=parse_schedule(top.get("schedule", {}), placement.num_ranks),
        faults=parse_faults(top.get("faults", []), placement.num_ranks),
        notes=tuple(notes),
        walk_facts=facts,
        corpus=corpus,
    )
    more = validate(scenario, implicit_requests=graph.get("requests") is None,
                    allow_large=allow_large)
    return msgspec.structs.replace(scenario, notes=(*notes, *more)) if more else scenario
