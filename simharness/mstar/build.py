"""Build a scenario from an mstar config and the real model class it names.

`import_config(CONFIG)` reads the config as mstar does (its ``model``, ``model_kwargs`` and
``node_groups``), builds the registered model without weights (`models.build_model`), lets the
model divide its walks by the config (``Model.get_worker_graphs``: this is where BAGEL, for
one, decides whether its CFG-parallel walk exists), and converts what the model's graph-shaped
methods return (``get_graph_walk_graphs``, ``get_partitions``, ``get_partition_topology``) into
a scenario's plain data (`convert`). What the graphs cannot say (which loops end at EOS, which
request shapes users send: input and output modalities) comes from `models.MODEL_DEFAULTS`,
and the result says so; the walks each request shape takes are derived from the model's
conductor code (`derive`).
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simharness.errors import ScenarioError, UsageError
from simharness.graph.ir import CONDUCTOR
from simharness.mstar.convert import WalkConverter, connection
from simharness.mstar.models import MODEL_DEFAULTS, build_model
from simharness.mstar.package import PINNED, default_config_names, resolve_config

#: node-group keys that mean something to placement (mstar's others are its business)
GROUP_KEYS = ("node_names", "ranks", "graph_walks", "tp_size", "sp_size")
DEFAULT_PARTITION = "default"


@dataclass
class Imported:
    """A scenario built from an mstar config, and what the import could not derive."""

    raw: dict[str, Any]
    model: str
    config_name: str
    #: what was decided without the model's code saying it (defaults to edit, stand-ins)
    notes: list[str] = field(default_factory=list)
    #: what was taken from MODEL_DEFAULTS rather than derived: "request kinds", "dynamic loops"
    defaulted: list[str] = field(default_factory=list)
    worker_graphs: int = 0

    def yaml_text(self) -> str:
        head = [f"# Imported by `simharness import-mstar {self.config_name}` from mstar-ai {PINNED}: "
                f"model {self.model!r}.",
                "# graph.walks, graph.partitions and graph.streams are the model's own graphs; "
                "placement is the config's node_groups."]
        head += [f"# note: {n}" for n in self.notes]
        text = yaml.safe_dump(self.raw, sort_keys=False, default_flow_style=None, width=100)
        marker = ("  # DEFAULT, EDIT ME: which request kinds users send and how long EOS loops run are "
                  "simharness's defaults for this model; each kind's walks are what the model's "
                  "conductor code picks for its modalities.\n")
        text = text.replace("\n  requests:\n", "\n" + marker + "  requests:\n", 1)
        return "\n".join(head) + "\n" + text


def read_config(path: Path) -> dict[str, Any]:
    from simharness.scenario.reading import read_yaml

    cfg = read_yaml(path)
    if not isinstance(cfg.get("model"), str):
        raise ScenarioError("model", "expected the registered name of an mstar model", source=str(path))
    if not isinstance(cfg.get("node_groups"), list):
        raise ScenarioError("node_groups", "expected a list of node groups (an mstar config lists "
                                           "its node_groups)", source=str(path))
    return cfg


class ModelFailure(UsageError):
    """mstar's own model code failed on the model as built: dividing it by its config
    (`stage` ``divide``) or giving its walks (``walks``)."""

    def __init__(self, message: str, stage: str) -> None:
        super().__init__(message)
        self.stage = stage


def with_options(options: dict[str, Any] | None, where: str) -> str:
    """`` (with --set model.k=v)`` / `` (with graph.mstar_options {k: v})``: the options that
    were applied to the model's config, for a message about a failure they may have caused."""
    if not options:
        return ""
    if where == "model":
        return " (with --set " + ", ".join(f"model.{k}={v!r}" for k, v in options.items()) + ")"
    return f" (with {where} {{" + ", ".join(f"{k}: {v!r}" for k, v in options.items()) + "})"


@dataclass
class ImportedGraph:
    """A scenario's ``graph`` built from a registered model (see `import_graph`)."""

    graph: dict[str, Any]
    notes: list[str]
    defaulted: list[str]
    worker_graphs: int


def import_graph(model_name: str, config_path: Path | None = None,
                 model_kwargs: dict[str, Any] | None = None,
                 options: dict[str, Any] | None = None, where: str = "model") -> ImportedGraph:
    """The scenario ``graph`` (walks, partitions, streams, request kinds) of a registered model,
    after it read `config_path` as mstar does (without a config: as the model is by default).
    `where`: the key path `options` were given under (see `build_model`)."""
    # mstar's modules print (a missing flash_attn, an odd head_dim); stdout may be the scenario.
    with contextlib.redirect_stdout(sys.stderr):
        built = build_model(model_name, model_kwargs or {}, options, where)
        model = built.model
        worker_graphs = []
        given = with_options(options, where)
        if config_path is not None:
            try:
                worker_graphs = model.get_worker_graphs(str(config_path))
            except Exception as exc:
                raise ModelFailure(f"{config_path}: mstar itself cannot divide model {model_name!r} "
                                   f"by this config{given} ({type(exc).__name__}: {exc})", "divide") from None
        try:
            walks = model.get_graph_walk_graphs()
            partitions = model.get_partitions()
            topology = model.get_partition_topology()
        except Exception as exc:  # mstar's code, on a model built without weights
            # A model such as bagel sets up its walks while it reads its config.
            why = "; this model may need a config: name one in graph.mstar_config" if (
                config_path is None) else ""
            raise ModelFailure(f"mstar model {model_name!r} cannot give its graph walks{given} "
                               f"({type(exc).__name__}: {exc}){why}", "walks") from None
    defaults = MODEL_DEFAULTS.get(model_name)

    notes: list[str] = []
    if built.stubbed:
        notes.append(f"stand-ins for {', '.join(built.stubbed)} (not installed; the graph code "
                     f"does not use them) while importing the model")
    graph: dict[str, Any] = {}
    raw_walks: dict[str, Any] = {}
    for walk, root in walks.items():
        conv = WalkConverter(walk)
        raw_walks[walk] = conv.section(root)
        notes.extend(conv.notes)
    defaulted: list[str] = []
    dynamic = defaults.dynamic_loops if defaults else {}
    used_dynamic = _mark_dynamic(raw_walks, dynamic)
    if used_dynamic:
        defaulted.append("dynamic loops")

    part_walks = _partitions(partitions, walks)
    if list(part_walks) != [DEFAULT_PARTITION]:
        graph["partitions"] = part_walks
    if topology.connections:
        graph["streams"] = [connection(c) for c in topology.connections]
    graph["walks"] = raw_walks
    with contextlib.redirect_stdout(sys.stderr):
        kinds, kind_notes = _request_kinds(model, defaults, walks, part_walks, partitions)
    notes.extend(kind_notes)
    generic = any(n.startswith("request kinds: generic") for n in kind_notes)
    defaulted.append("request kinds (generic)" if generic else "request shapes")
    graph["requests"] = {}
    for kind, spec in kinds.items():
        graph["requests"][kind] = _kind(spec, walks, topology, part_walks, used_dynamic, dynamic)
    if defaults and defaults.note:
        notes.append(defaults.note)
    return ImportedGraph(graph, notes, defaulted, len(worker_graphs))


def import_config(config: str, options: dict[str, Any] | None = None) -> Imported:
    """A whole scenario from an mstar config: the model's graph and the config's placement."""
    path = resolve_config(config)
    cfg = read_config(path)
    name = path.stem
    g = import_graph(cfg["model"], path, cfg.get("model_kwargs") or {}, options, "model")
    raw: dict[str, Any] = {
        "name": name,
        "description": f"mstar-ai {PINNED} default config {name} (model {cfg['model']}), imported from "
                       f"the model's own graphs",
        "seed": 0,
        "graph": g.graph,
        "placement": _placement(cfg),
        "runtime": "mstar-python",
        "workload": [{"request": list(g.graph["requests"]), "count": 2 * len(g.graph["requests"]),
                      "concurrency": 2}],
    }
    return Imported(raw, cfg["model"], name, g.notes, g.defaulted, g.worker_graphs)


def _partitions(partitions: list[Any], walks: dict[str, Any]) -> dict[str, list[str]]:
    order = list(walks)
    out: dict[str, list[str]] = {}
    for part in partitions:
        out[part.name] = [w for w in order if w in part.graph_walks]
    return out


def _mark_dynamic(raw_walks: dict[str, Any], dynamic: dict[str, Any]) -> dict[str, str]:
    """Add ``stop`` to the loops `dynamic` names; return loop -> walk for those found."""
    found: dict[str, str] = {}

    def visit(sec: dict[str, Any], walk: str) -> None:
        if "loop" in sec:
            lp = sec["loop"]
            if lp["name"] in dynamic:
                lp["stop"] = {"by": list(dynamic[lp["name"]].by)}
                found[lp["name"]] = walk
            visit(lp["body"], walk)
        for key in ("sequential", "parallel"):
            for child in sec.get(key, []):
                visit(child, walk)

    for walk, root in raw_walks.items():
        visit(root, walk)
    return found


def _request_kinds(model: Any, defaults: Any, walks: dict[str, Any], part_walks: dict[str, list[str]],
                   partitions: list[Any]) -> tuple[dict[str, Any], list[str]]:
    """Request kinds: per default request shape, the walks the model's conductor code picks
    (`derive`); without shapes (or none derivable), a generic kind per walk. Returns the kinds
    and notes on what could not be derived."""
    from simharness.mstar.derive import DeriveError, derive_steps

    notes: list[str] = []
    out: dict[str, Any] = {}
    persisted_by = {w: _persisted(root) for w, root in walks.items()}
    for kind, shape in (defaults.requests if defaults else {}).items():
        try:
            steps = derive_steps(model, shape.inputs, shape.outputs, persisted_by)
        except DeriveError as exc:
            notes.append(f"request kind {kind!r} ({'+'.join(shape.inputs)} -> "
                         f"{'+'.join(shape.outputs)}): the model's conductor code gave no walk "
                         f"sequence ({exc}); left out")
            continue
        out[kind] = steps[DEFAULT_PARTITION] if list(part_walks) == [DEFAULT_PARTITION] else steps
    if out:
        return out, notes
    notes.append("request kinds: generic (no request shapes for this model: one kind per walk, "
                 "or each partition's initial walk): edit them")
    if len(part_walks) == 1:
        return {w: [w] for w in next(iter(part_walks.values()))}, notes
    generic: dict[str, Any] = {}
    for part in partitions:
        ws = part_walks[part.name]
        if part.producer_partitions and len(ws) == 1:
            generic[part.name] = [{"walk": ws[0], "until": "final_chunk"}]
        elif part.initial_walk:
            generic[part.name] = [part.initial_walk]
    return {"request": generic}, notes


def _steps_walks(steps: list[Any]) -> list[str]:
    return [s if isinstance(s, str) else s["walk"] for s in steps]


def _kind(spec: Any, walks: dict[str, Any], topology: Any, part_walks: dict[str, list[str]],
          dynamic_found: dict[str, str], dynamic: dict[str, Any]) -> dict[str, Any]:
    """A request kind: its walks, the client inputs they need (derived), and its loop draws."""
    parts = {next(iter(part_walks)): spec} if isinstance(spec, list) else spec
    inputs: list[str] = []
    stops: dict[str, Any] = {}
    for part, steps in parts.items():
        streamed = {c.edge_name for c in topology.connections if c.to_partition == part}
        persisted: set[str] = set()
        for walk in _steps_walks(steps):
            io = walks[walk].get_inputs_outputs()
            for name, _dest in sorted(io.ext_inputs):
                if name not in streamed and name not in persisted and name not in inputs:
                    inputs.append(name)
            persisted |= _persisted(walks[walk])
            for loop, w in dynamic_found.items():
                if w == walk:
                    lo, hi = dynamic[loop].iterations
                    stops[loop] = {"uniform": [lo, hi]}
    out: dict[str, Any] = {}
    if isinstance(spec, list):
        out["walks"] = spec
    else:
        out["partitions"] = spec
    if inputs:
        out["inputs"] = inputs
    if stops:
        out["stops"] = stops
    return out


def _persisted(root: Any) -> set[str]:
    out = {e.name for n in root.get_nodes().values() for e in n.outputs if e.persist}
    for lp in root.get_loops().values():
        out |= {e.name for e in lp.outputs + lp.accumulated_outputs if e.persist}
    return out


def _placement(cfg: dict[str, Any]) -> dict[str, Any]:
    groups = [{k: g[k] for k in GROUP_KEYS if k in g} for g in cfg["node_groups"]]
    out: dict[str, Any] = {}
    if cfg.get("max_concurrent_requests") is not None:
        out["max_concurrent_requests"] = cfg["max_concurrent_requests"]
    out["node_groups"] = groups
    return out


__all__ = ["CONDUCTOR", "Imported", "import_config", "default_config_names", "resolve_config"]
