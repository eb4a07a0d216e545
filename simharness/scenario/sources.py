"""Parts of a scenario read from outside it: a model's graph, a shipped config.

A scenario may name an mstar model (``graph: {mstar_model: NAME}``) instead of writing its
walks, and a placement may name a config shipped with mstar-ai (``placement: {mstar_config:
NAME}``). The code that reads those lives in `simharness.mstar`, above the scenario layer, and
imports mstar-ai; the loader reaches it through this table, by name, only when a scenario uses
the key, so that loading any other scenario never imports it and the scenario layer imports
nothing above itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: ``graph.<key>`` -> ``module:function`` filling in the graph's walks, partitions and streams:
#: ``function(graph, placement, base_dir) -> (graph, notes)``
GRAPH_SOURCES = {"mstar_model": "simharness.mstar.reference:resolve_graph"}
#: ``module:function`` finding a config shipped with mstar-ai by name: ``function(name) -> Path | None``
SHIPPED_CONFIG = "simharness.mstar.package:shipped_config"
#: ``module:function`` listing the configs shipped with mstar-ai: ``function() -> list[str]``
SHIPPED_CONFIG_NAMES = "simharness.mstar.package:shipped_config_names"


def _load(target: str) -> Callable[..., Any]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def resolve_graph(key: str, graph: dict[str, Any], placement: Any,
                  base_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The ``graph`` mapping with what `key` names filled in, and the notes of reading it."""
    return _load(GRAPH_SOURCES[key])(graph, placement, base_dir)


def shipped_config(name: str) -> Path | None:
    """The config shipped with mstar-ai under `name`, if mstar-ai is installed and has one."""
    return _load(SHIPPED_CONFIG)(name)


def shipped_config_names() -> list[str]:
    """The names of the configs shipped with mstar-ai (none when it is not installed)."""
    return _load(SHIPPED_CONFIG_NAMES)()


__all__ = ["GRAPH_SOURCES", "SHIPPED_CONFIG", "SHIPPED_CONFIG_NAMES", "resolve_graph",
           "shipped_config", "shipped_config_names"]
