"""Scenario-level reduction after Hypothesis's shrink: delete whole walks, kinds, ranks, faults.

Hypothesis shrinks the choices a strategy drew, so it removes what was drawn last more easily
than what was drawn first: a failure that lives in the second walk keeps the first walk, which
it does not need, and a failing case of six nodes stays at six. This pass works on the scenario
itself (delta debugging on its plain data), greedily: it tries each deletion below, keeps one
when the scenario still fails with the same signature (`still_fails`), and starts over until
no deletion is kept or the deadline passes. A candidate the loader refuses is simply skipped.

* a walk (and the kinds', placement's and node costs' references to it);
* a node of a walk, one of two or more stages or parallel members: what was sent to it goes to
  the client instead, and the inputs it fed are no longer expected;
* a request kind (with its workload phases), a workload phase;
* a rank of a node group (the ranks renumbered 0..N-1, faults on a removed rank dropped);
* a fault, the schedule perturbations, the admission cap;
* a phase's count and concurrency down to 1.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from typing import Any

from simharness.faults import kind as fault_kind
from simharness.faults import names as fault_names

Raw = dict[str, Any]


def reduce_scenario(raw: Raw, still_fails: Callable[[Raw], bool],
                    deadline: float | None = None, max_calls: int | None = None) -> tuple[Raw, int]:
    """The smallest scenario these deletions reach that `still_fails`, within `deadline` (a
    perf_counter time) and `max_calls` calls of `still_fails`; and the calls made."""
    calls = 0
    best = raw
    progress = True
    while progress:
        progress = False
        for candidate in _candidates(best):
            if deadline is not None and time.perf_counter() >= deadline:
                return best, calls
            if max_calls is not None and calls >= max_calls:
                return best, calls
            calls += 1
            if still_fails(candidate):
                best = candidate
                progress = True
                break
    return best, calls


def _candidates(raw: Raw) -> Iterator[Raw]:
    graph = raw.get("graph", {})
    walks = list(graph.get("walks", {}))
    if len(walks) > 1:
        for w in walks:
            c = _drop_walk(raw, w)
            if c is not None:
                yield c
    for w in walks:
        for name in sorted(_names(graph["walks"][w])):
            c = _drop_node(raw, w, name)
            if c is not None:
                yield c
    kinds = list(graph.get("requests", {}))
    if len(kinds) > 1:
        for k in kinds:
            c = _drop_kinds(raw, {k})
            if c is not None:
                yield c
    phases = raw.get("workload", [])
    if len(phases) > 1:
        for i in range(len(phases)):
            c = copy.deepcopy(raw)
            del c["workload"][i]
            yield c
    for i, ph in enumerate(phases):
        for key in ("count", "concurrency"):
            if isinstance(ph.get(key), int) and ph[key] > 1:
                c = copy.deepcopy(raw)
                c["workload"][i][key] = 1
                yield c
    groups = raw.get("placement", {}).get("node_groups", [])
    for gi, g in enumerate(groups):
        ranks = g.get("ranks", [])
        if len(ranks) > 1 and g.get("tp_size", 1) == 1 and g.get("sp_size", 1) == 1:
            for r in reversed(ranks):
                c = copy.deepcopy(raw)
                c["placement"]["node_groups"][gi]["ranks"] = [x for x in ranks if x != r]
                c = _renumber(c)
                if c is not None:
                    yield c
    for i in range(len(raw.get("faults", []))):
        c = copy.deepcopy(raw)
        del c["faults"][i]
        if not c["faults"]:
            del c["faults"]
        yield c
    if "schedule" in raw:
        c = copy.deepcopy(raw)
        del c["schedule"]
        yield c
    if "max_concurrent_requests" in raw.get("placement", {}):
        c = copy.deepcopy(raw)
        del c["placement"]["max_concurrent_requests"]
        yield c


def _kind_walks(kind: Any) -> list[str] | None:
    if isinstance(kind, list):
        return kind
    if isinstance(kind, dict) and isinstance(kind.get("walks"), list):
        return kind["walks"]
    return None  # the partitions form: left alone


def _drop_walk(raw: Raw, walk: str) -> Raw | None:
    c = copy.deepcopy(raw)
    graph = c["graph"]
    del graph["walks"][walk]
    empty = set()
    for name, kind in graph.get("requests", {}).items():
        seq = _kind_walks(kind)
        if seq is None:
            return None
        seq[:] = [w for w in seq if w != walk]
        if not seq:
            empty.add(name)
    kept = _drop_kinds(c, empty) if empty else c
    if kept is None:
        return None
    return _tidy(kept)


def _drop_kinds(raw: Raw, names: set[str]) -> Raw | None:
    c = copy.deepcopy(raw)
    requests = c["graph"].get("requests", {})
    for n in names:
        requests.pop(n, None)
    if not requests:
        return None
    phases = [p for p in c.get("workload", []) if p.get("request") not in names]
    if not phases:
        return None
    c["workload"] = phases
    return c


def _names(tree: Any) -> set[str]:
    return {d["node"] for d in _node_dicts(tree)}


def _node_dicts(tree: Any) -> Iterator[dict[str, Any]]:
    if isinstance(tree, dict):
        if isinstance(tree.get("node"), str):
            yield tree
        for v in tree.values():
            yield from _node_dicts(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from _node_dicts(v)


def _remove_from_lists(tree: Any, name: str) -> bool:
    """Remove the node `name` from the sequential or parallel list holding it (one of two or
    more stages or members); False if it is nowhere removable."""
    if isinstance(tree, dict):
        return any(_remove_from_lists(v, name) for v in tree.values())
    if isinstance(tree, list):
        for i, item in enumerate(tree):
            if isinstance(item, dict) and item.get("node") == name and len(tree) > 1:
                del tree[i]
                return True
        return any(_remove_from_lists(v, name) for v in tree)
    return False


def _drop_node(raw: Raw, walk: str, name: str) -> Raw | None:
    """Delete a node from one walk: what was sent to it goes to the client instead, and the
    inputs it fed are no longer expected."""
    c = copy.deepcopy(raw)
    tree = c["graph"]["walks"][walk]
    fed = [(o.get("name"), o.get("to")) for d in _node_dicts(tree) if d["node"] == name
           for o in d.get("outputs", []) if isinstance(o, dict)]
    if not _remove_from_lists(tree, name):
        return None
    for holder in _output_lists(tree):
        seen = set()
        kept = []
        for o in holder:
            if isinstance(o, dict) and o.get("to") == name:
                o["to"] = "client"
            key = (o.get("name"), o.get("to")) if isinstance(o, dict) else None
            if key is not None and key in seen:
                continue
            seen.add(key)
            kept.append(o)
        holder[:] = kept
    sent = {(o.get("name"), o.get("to")) for holder in _output_lists(tree) for o in holder
            if isinstance(o, dict)}
    for signal, to in fed:
        if to == name or (signal, to) in sent:
            continue
        for d in _node_dicts(tree):
            if d["node"] == to and signal in d.get("inputs", []):
                d["inputs"] = [x for x in d["inputs"] if x != signal]
    return _tidy(c)


def _output_lists(tree: Any) -> Iterator[list[Any]]:
    """Every ``outputs`` list in a walk's tree (nodes' and loops')."""
    if isinstance(tree, dict):
        if isinstance(tree.get("outputs"), list):
            yield tree["outputs"]
        for k, v in tree.items():
            if k != "outputs":
                yield from _output_lists(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from _output_lists(v)


def _tidy(c: Raw) -> Raw | None:
    """Drop what no remaining walk uses: placed nodes, node costs, client inputs, empty groups."""
    graph = c["graph"]
    nodes = list(_node_dicts(graph["walks"]))
    names = {d["node"] for d in nodes}
    inputs = {x for d in nodes for x in d.get("inputs", []) if isinstance(x, str)}
    for kind in graph.get("requests", {}).values():
        if isinstance(kind, dict) and isinstance(kind.get("inputs"), list):
            kind["inputs"] = [x for x in kind["inputs"] if x in inputs]
    if isinstance(graph.get("nodes"), dict):
        graph["nodes"] = {k: v for k, v in graph["nodes"].items() if k in names}
        if not graph["nodes"]:
            del graph["nodes"]
    walks = set(graph["walks"])
    groups = []
    for g in c.get("placement", {}).get("node_groups", []):
        g["node_names"] = [n for n in g.get("node_names", []) if n in names]
        if "graph_walks" in g:
            g["graph_walks"] = [w for w in g["graph_walks"] if w in walks]
            if not g["graph_walks"]:
                continue
        if g["node_names"]:
            groups.append(g)
    if not groups:
        return None
    c["placement"]["node_groups"] = groups
    return _renumber(c)


def _rank_keys(fault: dict[str, Any]) -> tuple[str, ...]:
    """The keys of a fault whose value may be a rank (its kind's `FaultKind.rank_keys`)."""
    name = fault.get("kind")
    return fault_kind(name).rank_keys if isinstance(name, str) and name in fault_names() else ()


def _renumber(c: Raw) -> Raw | None:
    """Ranks 0..N-1 again after groups or ranks were removed; faults follow their rank."""
    groups = c["placement"]["node_groups"]
    used = sorted({r for g in groups for r in g.get("ranks", []) if isinstance(r, int)})
    new = {old: i for i, old in enumerate(used)}
    for g in groups:
        g["ranks"] = [new.get(r, r) for r in g.get("ranks", [])]
    faults = []
    for fault in c.get("faults", []):
        keep = True
        for key in _rank_keys(fault):
            v = fault.get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                if v in new:
                    fault[key] = new[v]
                else:
                    keep = False
        if keep:
            faults.append(fault)
    if "faults" in c:
        if faults:
            c["faults"] = faults
        else:
            del c["faults"]
    return c
