"""``graph: {mstar_model: NAME}``: a scenario whose graph is read from mstar's code at load time.

Instead of a copy of the walks (which an mstar upgrade can leave behind), a scenario may name the
registered model, and optionally the config it reads and options for its config class::

    graph:
      mstar_model: bagel
      mstar_config: bagel_cfg_parallel    # default: placement.mstar_config, if there is one
      mstar_options: {num_timesteps: 11}  # fields of the model's config class
      nodes: {LLM: {service_ms: 85}}      # the scenario's own keys still apply
      requests: {t2i: {walks: [prefill_text, image_gen_cfg], inputs: [text_inputs]}}

The walks, partitions and streams come from the model (`build.import_graph`); ``nodes`` and
``requests`` are the scenario's when given (the model's marked defaults otherwise). The loader
fingerprints what was read, so a scenario whose model changed gets a new fingerprint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simharness.errors import ScenarioError, UsageError

#: keys of ``graph`` that such a scenario may set itself
OWN_KEYS = ("nodes", "requests")
FROM_MODEL = ("walks", "partitions", "streams")
REFERENCE_KEYS = ("mstar_model", "mstar_config", "mstar_options")


def resolve_graph(graph: dict[str, Any], placement: Any, base_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The ``graph`` mapping with the model's walks filled in, and the import's notes."""
    from simharness.mstar.build import ModelFailure, import_graph, read_config
    from simharness.mstar.package import resolve_config

    for key in FROM_MODEL:
        if key in graph:
            raise ScenarioError(f"graph.{key}", "comes from the model named by graph.mstar_model; "
                                                "remove it (or remove mstar_model and write the walks)")
    model = graph["mstar_model"]
    if not isinstance(model, str) or not model:
        raise ScenarioError("graph.mstar_model", f"expected the registered name of an mstar model, "
                                                 f"got {model!r}")
    config = graph.get("mstar_config")
    if config is None and isinstance(placement, dict):
        config = placement.get("mstar_config")
    options = graph.get("mstar_options", {})
    if not isinstance(options, dict):
        raise ScenarioError("graph.mstar_options", "expected a mapping of config-class fields")
    key = "graph.mstar_config" if "mstar_config" in graph else "placement.mstar_config"
    cfg_path = None
    model_kwargs: dict[str, Any] = {}
    try:
        if config is not None:
            if not isinstance(config, str) or not config:
                raise ScenarioError(key, f"expected a config path or a shipped config's name, got {config!r}")
            candidate = Path(config) if Path(config).is_absolute() else base_dir / config
            try:
                cfg_path = candidate if candidate.is_file() else resolve_config(config)
            except UsageError as err:
                if "neither a config file" not in str(err):
                    raise  # mstar-ai missing: not this key's fault
                raise ScenarioError(key, str(err)) from None
            cfg = read_config(cfg_path)
            if cfg["model"] != model:
                raise ScenarioError(key, f"config {config!r} is for model {cfg['model']!r}, not "
                                         f"{model!r} (graph.mstar_model)")
            model_kwargs = cfg.get("model_kwargs") or {}
        imported = import_graph(model, cfg_path, model_kwargs, options, "graph.mstar_options")
    except ModelFailure as err:
        # mstar's code failed on the model as configured: blame the options when there are
        # any, else the config it could not be divided by, else the model
        path = ("graph.mstar_options" if options else key if err.stage == "divide"
                else "graph.mstar_model")
        raise ScenarioError(path, str(err)) from None
    except UsageError as err:
        raise ScenarioError("graph.mstar_model", str(err)) from None
    out = dict(imported.graph)
    for key in OWN_KEYS:
        if key in graph:
            out[key] = graph[key]
    notes = [f"graph.mstar_model {model}: {n}" for n in imported.notes
             if "requests" not in graph or not n.startswith("request kinds")]
    return out, notes
