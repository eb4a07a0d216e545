"""``--set KEY=VALUE`` overrides applied to the raw scenario before validation.

KEY is a key path as error messages print it (``placement.max_concurrent_requests``,
``workload[1].concurrency``, ``graph.walks.image_gen_cfg.sequential[0].loop.max_iters``). VALUE
is read as a YAML scalar or flow value, so ``3``, ``true``, ``[1, 2]`` and ``{a: 1}`` all work.
Index N of a list with N items appends an item. Under a list, a dotted key of digits is an index
too (``workload.0.count`` is ``workload[0].count``).
The overridden data then goes through the same validation as the file; the original data is
never modified in place.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from simharness.errors import ScenarioError
from simharness.scenario.reading import MAX_DEPTH, read_value
from simharness.wording import plural

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_key_path(key: str) -> list[str | int]:
    tokens: list[str | int] = []
    pos = 0
    expect_dot = False
    while pos < len(key):
        if expect_dot:
            # After a key or [N] comes a dot or [N]: `workload[0]count` is not `workload[0].count`.
            if key[pos] == ".":
                pos += 1
            elif key[pos] != "[":
                raise ScenarioError(key, f"not a key path: expected '.' or '[' before {key[pos:]!r}",
                                    source="--set")
        m = _TOKEN.match(key, pos)
        if not m:
            raise ScenarioError(key, "not a key path (use keys separated by dots, [N] for list items)",
                                source="--set")
        tokens.append(m.group(1) if m.group(1) is not None else _list_index(m.group(2), key))
        pos = m.end()
        if len(tokens) > MAX_DEPTH:
            raise ScenarioError(key[:60] + "...", f"key path deeper than {MAX_DEPTH} levels",
                                source="--set")
        expect_dot = True
    if not tokens:
        raise ScenarioError(key, "empty key path", source="--set")
    return tokens


def _list_index(digits: str, key: str) -> int:
    """The list index written as `digits` (``[N]``, or ``.N`` under a list), refused when it is
    too long to be one: ``int`` of thousands of digits is slow, and no list is that long."""
    if len(digits) > 9:
        raise ScenarioError(key, f"list index {digits[:12]}... is too large", source="--set")
    return int(digits)


def apply_overrides(
    raw: dict[str, Any], overrides: Sequence[str]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Return a copy of `raw` with every override applied, and the (key path, text) applied; the
    key path as errors print it (``workload[0].count`` for ``workload.0.count``)."""
    if not overrides:
        return raw, []
    data = copy.deepcopy(raw)
    applied: list[tuple[str, str]] = []
    for text in overrides:
        if "=" not in text:
            raise ScenarioError(text, "expected KEY=VALUE", source="--set")
        key, value_text = text.split("=", 1)
        key = key.strip()
        tokens = parse_key_path(key)
        value = read_value(value_text, key) if value_text.strip() else ""
        applied.append((_assign(data, tokens, value, key), text))
    return data, applied


def _assign(data: Any, tokens: list[str | int], value: Any, key: str) -> str:
    """Set `value` at `tokens`; return the key path it was set at, as errors print it."""
    here: Any = data
    walked = ""
    for i, tok in enumerate(tokens):
        last = i == len(tokens) - 1
        if isinstance(tok, str) and isinstance(here, list) and tok.isascii() and tok.isdigit():
            # `workload.0.count`: under a list a key of digits can only be an index, so it is
            # taken as `workload[0].count` (a mapping keeps such a key as a name)
            tok = _list_index(tok, key)
        if isinstance(tok, int):
            if not isinstance(here, list):
                raise ScenarioError(key, f"{walked or 'the scenario'} is not a list", source="--set")
            if tok > len(here) or (tok == len(here) and not last):
                raise ScenarioError(key, f"{walked} has {plural(len(here), 'item')}, no index {tok}",
                                    source="--set")
            if last:
                # Index N of a list of N items appends: `--set workload[2]={...}` adds a phase.
                if tok == len(here):
                    here.append(value)
                else:
                    here[tok] = value
            else:
                here = here[tok]
            walked += f"[{tok}]"
        else:
            if not isinstance(here, dict):
                raise ScenarioError(key, f"{walked or 'the scenario'} is not a mapping", source="--set")
            if last:
                here[tok] = value
            else:
                # Creating missing mappings lets `--set limits.request_timeout_s=30` work on a
                # file that has no `limits` section; validation still rejects unknown keys.
                here = here.setdefault(tok, {})
            walked = f"{walked}.{tok}" if walked else tok
    return walked
