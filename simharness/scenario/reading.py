"""Reading a scenario file: the first pass of the loader, and the only one that touches the disk.

A scenario is plain YAML read with limits, because a hostile or mistyped file must be refused
quickly and cheaply rather than parsed without end:

* only a regular file is read (a directory, a named pipe or ``/dev/zero`` is refused before it is
  opened), and at most `MAX_FILE_BYTES` of it;
* collections nest at most `MAX_DEPTH` levels (PyYAML composes recursively, and so do deepcopy
  and the checks after it);
* the document, with every alias expanded, has at most `MAX_NODES` nodes (an "alias bomb" is a
  few lines that expand to billions of nodes when anything walks it, such as the fingerprint);
* a key is a scalar (a list or a mapping used as a key is refused, as is a duplicate key);
* an integer has at most `MAX_INT_DIGITS` digits.

`--set` values go through the same reader (`read_value`), so a file and an override are held to
the same limits. `fingerprint` identifies the canonical scenario.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from simharness.errors import ScenarioError
from simharness.fields import describe

#: Largest scenario file read (the shipped ones are a few KiB); PyYAML's Python parser reads about
#: 1 MB a second, libyaml several times that.
MAX_FILE_BYTES = 1024 * 1024
#: Deepest nesting of mappings and lists (a deep walk of nested loops needs about 20).
MAX_DEPTH = 100
#: Most nodes in the document with aliases expanded (the largest shipped scenario has ~1,000).
MAX_NODES = 200_000
#: Longest integer literal: beyond it the number is a typo, not a count.
MAX_INT_DIGITS = 30


class _Limited(yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """Composing and constructing with limits: refuses duplicate keys, non-scalar keys, deep
    nesting and long integers. The events it composes come from a parser mixed in below."""

    def _init_limited(self) -> None:
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        # The composer recurses once per level; refusing deep nesting here keeps Python's own
        # recursion limit (and a traceback) out of reach.
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(
                    None, None, f"nesting deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _PythonLoader(_Limited, yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """Events from PyYAML's pure-Python scanner and parser."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        self._init_limited()


if yaml.__with_libyaml__:
    class _LibyamlLoader(_Limited, yaml.cyaml.CParser):
        """Events from libyaml, PyYAML's C scanner and parser (about six times faster on a
        scenario). Only the events: libyaml's own composer would recurse in C without the
        depth limit, so composing stays in `_Limited`, ahead of `CParser` in the method order."""

        def __init__(self, stream: str) -> None:
            yaml.cyaml.CParser.__init__(self, stream)
            self._init_limited()

    _LimitedLoader: type[_Limited] = _LibyamlLoader
else:  # PyYAML built without libyaml: the same documents and limits, more slowly
    _LimitedLoader = _PythonLoader


def _construct_mapping(loader: _Limited, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        mark = key_node.start_mark
        if not isinstance(key_node, yaml.ScalarNode):
            kind = "a list" if isinstance(key_node, yaml.SequenceNode) else "a mapping"
            raise yaml.constructor.ConstructorError(
                None, None, f"{kind} cannot be a key (line {mark.line + 1})", mark)
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (line {mark.line + 1})", mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


def _construct_int(loader: _Limited, node: yaml.ScalarNode) -> Any:
    digits = sum(c.isdigit() for c in node.value)
    if digits > MAX_INT_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {digits} digits (at most {MAX_INT_DIGITS})", node.start_mark)
    return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)


_Limited.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Limited.add_constructor("tag:yaml.org,2002:int", _construct_int)


class TooLarge(ValueError):
    """The document expands past `MAX_NODES`; `key` is the key path where it does."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _expanded_size(root: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes under `root` with every alias expanded, counted without expanding anything.

    An alias is the same node object as its anchor, so a memo by identity gives each node's
    expanded size once; depth is already bounded by `MAX_DEPTH`.
    """
    key = id(root)
    if key not in memo:
        memo[key] = 1  # the safe loader cannot build a recursive alias; be safe anyway
        if isinstance(root, yaml.SequenceNode):
            memo[key] = 1 + sum(_expanded_size(c, memo) for c in root.value)
        elif isinstance(root, yaml.MappingNode):
            memo[key] = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo)
                                for k, v in root.value)
    return memo[key]


def _check_size(root: yaml.Node) -> None:
    memo: dict[int, int] = {}
    n = _expanded_size(root, memo)
    if n <= MAX_NODES:
        return
    # Name the deepest mapping key that is still too large: that is where the aliases pile up.
    path, node = "", root
    while isinstance(node, yaml.MappingNode):
        big = [(k, v) for k, v in node.value
               if isinstance(k, yaml.ScalarNode) and memo[id(v)] > MAX_NODES]
        if not big:
            break
        k, node = big[0]
        path = f"{path}.{k.value}" if path else str(k.value)
    raise TooLarge(path, f"expands to {memo[id(node)]:,} nodes with its aliases (at most "
                         f"{MAX_NODES:,}); is an alias repeated many times?")


#: What libyaml reads otherwise than PyYAML's Python parser (found by a differential fuzz of the
#: two): a tab (libyaml takes it as separating space where the Python parser refuses it), a tag
#: (a bare ``!`` is '' to libyaml, None to the other) and a block scalar header followed by a
#: comment without a space (``|#``: libyaml reads '', the other refuses). A text with any of them
#: is read by the Python parser alone, so that a scenario means the same with or without libyaml.
_PYTHON_ONLY = re.compile(r"[\t!]|[|>][0-9+-]*#")


def parse_text(text: str) -> Any:
    """YAML text to plain data within the limits; raises `yaml.YAMLError` or `ValueError`."""
    if _LimitedLoader is _PythonLoader or _PYTHON_ONLY.search(text):
        return _parse(_PythonLoader, text)
    try:
        return _parse(_LimitedLoader, text)
    except (yaml.YAMLError, UnicodeEncodeError):
        if _LimitedLoader is _PythonLoader:
            raise
        # libyaml's messages are terser than PyYAML's (no offending character, no token found),
        # and a lone surrogate (an undecodable byte of a --set value) fails its UTF-8 encoding
        # before it parses: a text that fails is read again by the Python parser, for its error.
        return _parse(_PythonLoader, text)


def _parse(loader_class: type[_Limited], text: str) -> Any:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"not valid YAML{where}: {problem}"


def read_bytes(path: str | Path, what: str = "scenario file") -> bytes:
    """The bytes of a regular file of at most `MAX_FILE_BYTES`, or a `ScenarioError`."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ScenarioError("", f"{what} not found", source=str(path)) from None
    except OSError as exc:
        raise ScenarioError("", f"cannot read {what}: {exc.strerror}", source=str(path)) from None
    if stat.S_ISDIR(st.st_mode):
        raise ScenarioError("", f"is a directory, not {_a(what)}", source=str(path))
    if not stat.S_ISREG(st.st_mode):
        # A named pipe would block the read forever, /dev/zero would never end.
        raise ScenarioError("", f"is not a regular file (a pipe, device or socket); give "
                                f"{_a(what)} on disk", source=str(path))
    if st.st_size > MAX_FILE_BYTES:
        raise ScenarioError("", f"{what} is {st.st_size:,} bytes, more than the "
                                f"{MAX_FILE_BYTES:,} bytes {_a(what)} may have", source=str(path))
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ScenarioError("", f"cannot read {what}: {exc.strerror}", source=str(path)) from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError("", f"{what} grew past {MAX_FILE_BYTES:,} bytes while being read",
                            source=str(path))
    return data


def read_yaml(path: str | Path, what: str = "scenario file") -> dict[str, Any]:
    """A YAML file whose top level is a mapping, read within the limits above."""
    data = read_bytes(path, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError("", f"cannot read {what}: not UTF-8 text (byte {exc.start})",
                            source=str(path)) from None
    try:
        raw = parse_text(text)
    except yaml.YAMLError as exc:
        raise ScenarioError("", _yaml_problem(exc), source=str(path)) from None
    except TooLarge as exc:
        raise ScenarioError(exc.key, str(exc), source=str(path)) from None
    except (ValueError, RecursionError) as exc:
        raise ScenarioError("", f"not a usable scenario: {exc}", source=str(path)) from None
    if not isinstance(raw, dict):
        raise ScenarioError("", f"expected a mapping at the top level, got {describe(raw)}",
                            source=str(path))
    return raw


def read_value(text: str, key: str) -> Any:
    """A ``--set`` value: a YAML scalar or flow value, read within the same limits as a file."""
    if len(text) > MAX_FILE_BYTES:
        raise ScenarioError(key, f"value of {len(text):,} characters is too long", source="--set")
    try:
        return parse_text(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(key, f"cannot read value {_clip(text)}: {_yaml_problem(exc)}",
                            source="--set") from None
    except (ValueError, RecursionError) as exc:
        raise ScenarioError(key, f"cannot use value {_clip(text)}: {exc}", source="--set") from None


def _a(what: str) -> str:
    return f"an {what}" if what[0] in "aeiou" or what.startswith("mstar") else f"a {what}"


def _clip(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def depth(data: Any) -> int:
    """How deep `data` nests (iteratively: it may be deeper than Python's recursion allows)."""
    deepest = 0
    stack = [(data, 1)]
    seen: set[int] = set()
    while stack:
        item, d = stack.pop()
        if isinstance(item, dict | list):
            if id(item) in seen:
                continue
            seen.add(id(item))
            deepest = max(deepest, d)
            if d > MAX_DEPTH:
                return d
            stack.extend((v, d + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def fingerprint(raw: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of the scenario, leaving out seed and prose."""
    core = {k: v for k, v in raw.items() if k not in ("seed", "name", "description", "corpus")}
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
