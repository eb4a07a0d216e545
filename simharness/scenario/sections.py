"""Section parsers outside ``graph:``: placement, runtime, workload, network, expect, limits, kv,
schedule, faults and the corpus block.

Part of the loader's second pass (see `simharness.scenario.graph_sections` for the graph). Every
default is read from the model's records with `fields.default`; every number is finite and
bounded, with its unit named when it is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simharness import fields as f
from simharness.errors import ScenarioError
from simharness.faults import FaultSpec
from simharness.faults import kind as fault_kind
from simharness.faults import names as fault_names
from simharness.graph.analysis import WalkFacts
from simharness.graph.divide import group_of_nodes
from simharness.scenario import sources
from simharness.scenario.lockstep import check_lockstep_groups
from simharness.scenario.model import (
    CorpusMeta,
    Expect,
    KvConfig,
    Limits,
    MovedDelivery,
    Network,
    NodeGroup,
    Phase,
    Placement,
    RequestKind,
    RuntimeChoice,
    Schedule,
)
from simharness.scenario.reading import read_yaml
from simharness.wording import hint, plural

#: Keys of a fuzz corpus case's ``corpus:`` block (metadata; it does not change the run).
CORPUS_KEYS = ("signature", "check", "key", "runtime", "against", "status", "seed", "example",
               "trace_digest", "against_trace_digest", "nodes", "ranks", "note", "verdict")
CORPUS_STATUSES = ("open", "fixed")
TRANSPORTS = ("shm", "ipc", "tcp", "rdma")
#: Most ranks a placement may use (mstar's worker_0..worker_N-1); a larger rank is a typo.
MAX_RANKS = 4096
#: Most requests in one phase, whatever --allow-large says (the cost check comes on top).
MAX_REQUESTS_HARD = 10**9
MAX_SEED = 2**64 - 1


def parse_placement(
    raw: Any, facts: dict[str, WalkFacts], base_dir: Path, notes: list[str]
) -> tuple[Placement, dict[str, Any] | None]:
    """The placement, and (for ``mstar_config``) what was read from the config file, so that
    the scenario's fingerprint covers it."""
    if isinstance(raw, dict) and "mstar_config" in raw:
        return _mstar_config(raw, facts, base_dir, notes)
    m = f.mapping(raw, "placement", ("node_groups", "max_concurrent_requests", "mstar_config"),
                  required=("node_groups",))
    return _node_groups(m, "placement", facts, notes), None


def _mstar_config(
    raw: dict[str, Any], facts: dict[str, WalkFacts], base_dir: Path, notes: list[str]
) -> tuple[Placement, dict[str, Any]]:
    """``placement: {mstar_config: PATH}``: read an mstar config YAML as mstar writes it.

    Its ``node_groups`` and ``max_concurrent_requests`` mean what they mean to mstar; its other
    keys (``model``, ``max_seq_len``, ``resources``, ...) are mstar's business and are ignored.
    Errors inside it name the config file and the key path within it.
    """
    f.mapping(raw, "placement", ("mstar_config",))
    rel = f.string(raw["mstar_config"], "placement.mstar_config")
    path = Path(rel) if Path(rel).is_absolute() else base_dir / rel
    if not path.exists() and "/" not in rel:
        path = sources.shipped_config(rel) or path
    try:
        cfg = read_yaml(path, what="mstar config file")  # the same limits as a scenario
    except ScenarioError as err:
        if err.path:
            raise
        # Missing, a directory, /dev/zero, not YAML: said under the key that names the file,
        # which already says "mstar config file".
        msg = err.message.removeprefix("mstar config file ").replace(" mstar config file", "")
        sep = " " if msg.startswith(("not found", "is ")) else ": "
        where_hint = ""
        if msg == "not found":
            shipped = [] if "/" in rel else sources.shipped_config_names()
            where_hint = (f"{hint(rel.removesuffix('.yaml'), shipped)} (paths are relative to the "
                          f"scenario file; a bare name is a config shipped with mstar-ai)")
        raise ScenarioError("placement.mstar_config",
                            f"mstar config file {rel!r}{sep}{msg}{where_hint}") from None
    try:
        if "node_groups" not in cfg:
            raise ScenarioError("node_groups", "missing required key (an mstar config lists its "
                                               "node_groups)")
        placement = _node_groups(cfg, "", facts, notes, config=rel)
    except ScenarioError as err:
        raise err.with_source(str(path)) from None
    resolved = {"mstar_config": rel, "node_groups": cfg["node_groups"],
                "max_concurrent_requests": cfg.get("max_concurrent_requests")}
    return placement, resolved


def _node_groups(m: dict[str, Any], prefix: str, facts: dict[str, WalkFacts],
                 notes: list[str], config: str | None = None) -> Placement:
    """``node_groups`` and ``max_concurrent_requests`` of `m`, whose key path is `prefix`.

    From an mstar config file (`config`, its name as written), a ``graph_walks`` entry naming a
    walk the scenario does not model is ignored with a note, and a node name that is a node of
    none of its walks is kept with a note (an mstar config places the nodes of walks the scenario
    may not model; such a name places nothing);
    without (the scenario's own placement) either is an error, as a typo would be: a misspelt
    node would otherwise stay unplaced where the user meant it and run where some other group
    puts it. A rank that ends up hosting no node of any walk gets a note either way.
    """
    known_nodes = list(dict.fromkeys(n.name for wf in facts.values() for n in wf.nodes.values()))
    groups_path = f.join(prefix, "node_groups")
    groups_raw = f.sequence(m["node_groups"], groups_path, non_empty=True)
    groups: list[NodeGroup] = []
    for i, g in enumerate(groups_raw):
        path = f.join(groups_path, i)
        gm = f.mapping(g, path, ("node_names", "ranks", "graph_walks", "tp_size", "sp_size"),
                       required=("node_names", "ranks"))
        names = f.name_list(gm["node_names"], f.join(path, "node_names"), "a node name", non_empty=True)
        _check_node_names(names, f.join(path, "node_names"), known_nodes, notes, config)
        ranks_raw = f.sequence(gm["ranks"], f.join(path, "ranks"), non_empty=True)
        ranks = tuple(f.integer(r, f.join(f.join(path, "ranks"), j), minimum=0,
                                maximum=MAX_RANKS - 1, unit="rank numbers")
                      for j, r in enumerate(ranks_raw))
        if len(set(ranks)) != len(ranks):
            dup = next(r for r in ranks if ranks.count(r) > 1)
            raise ScenarioError(f.join(f.join(path, "ranks"), ranks.index(dup, ranks.index(dup) + 1)),
                                f"rank {dup} is listed twice")
        walks = None
        if "graph_walks" in gm:
            if gm["graph_walks"] == [] and config is None:
                raise ScenarioError(f.join(path, "graph_walks"), "expected a non-empty list (leave "
                                    "graph_walks out to place the group's nodes in every walk)")
            walks = f.name_list(gm["graph_walks"], f.join(path, "graph_walks"), "a walk name")
            unknown = [w for w in walks if w not in facts]
            if unknown and config is None:
                j = walks.index(unknown[0])
                raise ScenarioError(f.join(f.join(path, "graph_walks"), j),
                                    f"unknown walk {unknown[0]!r}{hint(unknown[0], facts)} "
                                    f"(walks: {', '.join(facts)})")
            if unknown:
                notes.append(f"{config}: {path}.graph_walks: {plural(len(unknown), 'walk')} "
                             f"{', '.join(repr(w) for w in unknown)} not in this scenario; ignored")
                walks = tuple(w for w in walks if w in facts)
        tp = f.integer(gm.get("tp_size", f.default(NodeGroup, "tp_size")), f.join(path, "tp_size"),
                       minimum=1, maximum=MAX_RANKS)
        sp = f.integer(gm.get("sp_size", f.default(NodeGroup, "sp_size")), f.join(path, "sp_size"),
                       minimum=1, maximum=MAX_RANKS)
        if len(ranks) % (tp * sp):
            raise ScenarioError(f.join(path, "ranks"),
                                f"{plural(len(ranks), 'rank')} cannot be split into instances of "
                                f"tp_size*sp_size = {tp * sp}")
        groups.append(NodeGroup(names, ranks, walks, tp, sp, path=path))
    _check_rank_gap(groups, groups_path)
    for walk, wf in facts.items():
        for node in wf.nodes.values():
            if not any(node.name in g.node_names and (g.graph_walks is None or walk in g.graph_walks)
                       for g in groups):
                raise ScenarioError(groups_path,
                                    f"node {node.name!r} of walk {walk!r} ({node.path}) is not "
                                    f"placed: no node group lists it for that walk")
    check_lockstep_groups(groups, facts, groups_path)
    _note_idle_ranks(groups, facts, notes)
    mcr = m.get("max_concurrent_requests")
    return Placement(
        tuple(groups),
        None if mcr is None else f.integer(mcr, f.join(prefix, "max_concurrent_requests"), minimum=1,
                                           maximum=MAX_REQUESTS_HARD, unit="requests"),
    )


def _check_node_names(names: tuple[str, ...], path: str, known: list[str],
                      notes: list[str], config: str | None) -> None:
    """Every name of a node group is a node of some walk: an error in the scenario's own
    placement, a note in an mstar config file (`config`)."""
    unknown = [n for n in names if n not in known]
    if not unknown:
        return
    if config is None:
        j = names.index(unknown[0])
        raise ScenarioError(f.join(path, j),
                            f"unknown node {unknown[0]!r}: no walk of this scenario has a node of "
                            f"that name{hint(unknown[0], known)} (nodes: {', '.join(known)})")
    # Kept as the config wrote them (they place nothing here): the placement mirrors the file.
    # No "did you mean" here: most such names are nodes of walks the scenario leaves out
    # (bagel's vit_encoder), which a suggestion (vae_decoder) would call typos on every run.
    one = len(unknown) == 1
    notes.append(f"{config}: {path}: {'node' if one else 'nodes'} "
                 f"{', '.join(repr(n) for n in unknown)} {'belongs' if one else 'belong'} to no walk "
                 f"this scenario models, so {'it places' if one else 'they place'} nothing here")


def _check_rank_gap(groups: list[NodeGroup], groups_path: str) -> None:
    """Ranks are 0..N-1 without gaps; a gap names the rank missing and the ranks typed above it."""
    all_ranks = sorted({r for g in groups for r in g.ranks})
    # The first gap, found without building range(max rank): a mistyped rank is cheap to refuse.
    gap = next((i for i, r in enumerate(all_ranks) if r != i), None)
    if gap is None:
        return
    above = [r for r in all_ranks if r > gap]
    # Point at the first place a rank above the gap is written: most likely the typo.
    where = next(f.join(f.join(g.path, "ranks"), j) for g in groups
                 for j, r in enumerate(g.ranks) if r == above[0])
    raise ScenarioError(where,
                        f"rank {above[0]} leaves a gap: ranks must be 0..N-1 (mstar names workers "
                        f"worker_0..worker_N-1), and rank {gap} is used by no group "
                        f"(ranks used: {_rank_list(all_ranks)})")


def _rank_list(ranks: list[int]) -> str:
    """Ranks as text, shortened for a long list: ``0, 1, 2, ..., 4095``."""
    shown = ranks if len(ranks) <= 8 else [*ranks[:6], "...", ranks[-1]]
    return ", ".join(str(r) for r in shown)


def _note_idle_ranks(groups: list[NodeGroup], facts: dict[str, WalkFacts], notes: list[str]) -> None:
    """A rank that hosts no node of any walk (every group on it lists only nodes that later
    groups take, or walks it is not used for) runs nothing: say so, naming it."""
    spec = [(g.node_names, g.graph_walks) for g in groups]
    busy: set[int] = set()
    for walk, wf in facts.items():
        for idx in group_of_nodes([n.name for n in wf.nodes.values()], walk, spec).values():
            busy.update(groups[idx].ranks)
    idle = [r for r in sorted({r for g in groups for r in g.ranks}) if r not in busy]
    if idle:
        one = len(idle) == 1
        notes.append(f"{'rank' if one else 'ranks'} {_rank_list(idle)} {'hosts' if one else 'host'} "
                     f"no node of any walk: {'it runs' if one else 'they run'} nothing in this "
                     f"scenario")


def parse_runtime(raw: Any) -> RuntimeChoice:
    if isinstance(raw, str):
        return RuntimeChoice(f.name(raw, "runtime", "a runtime name"))
    m = f.mapping(raw, "runtime", ("name", "options"), required=("name",))
    options = f.mapping(m.get("options", {}), "runtime.options", f.any_keys(m.get("options")))
    return RuntimeChoice(f.name(m["name"], "runtime.name", "a runtime name"), dict(options))


def parse_workload(raw: Any, requests: dict[str, RequestKind]) -> tuple[Phase, ...]:
    phases = []
    for i, item in enumerate(f.sequence(raw, "workload", non_empty=True)):
        path = f.join("workload", i)
        m = f.mapping(item, path, ("request", "count", "concurrency"), required=("request", "count"))
        rp = f.join(path, "request")
        if isinstance(m["request"], list):
            kinds = f.name_list(m["request"], rp, "a request kind", non_empty=True)
            paths = [f.join(rp, j) for j in range(len(kinds))]
        else:
            kinds = (f.name(m["request"], rp, "a request kind"),)
            paths = [rp]
        for kind, kpath in zip(kinds, paths, strict=True):
            if kind not in requests:
                raise ScenarioError(kpath, f"unknown request kind {kind!r}{hint(kind, requests)} "
                                            f"(kinds: {', '.join(requests)})")
        count = f.integer(m["count"], f.join(path, "count"), minimum=0, maximum=MAX_REQUESTS_HARD,
                          unit="requests")
        conc = f.integer(m.get("concurrency", 1), f.join(path, "concurrency"), minimum=1,
                         maximum=MAX_REQUESTS_HARD, unit="requests in flight")
        phases.append(Phase(kinds, count, conc))
    return tuple(phases)


def parse_network(raw: Any) -> Network:
    m = f.mapping(raw, "network", ("transport", "latency_us", "bandwidth_gbps"))
    transport = f.string(m.get("transport", f.default(Network, "transport")), "network.transport")
    if transport not in TRANSPORTS:
        raise ScenarioError("network.transport", f"expected one of {', '.join(TRANSPORTS)}, "
                                                 f"got {f.describe(transport)}{hint(transport, TRANSPORTS)}")
    return Network(
        transport,
        f.number(m.get("latency_us", f.default(Network, "latency_us")), "network.latency_us",
                 minimum=0, maximum=10_000_000, unit="microseconds"),
        # Below 1 Mbit/s every transfer of a real tensor takes minutes: a typo, not a network.
        f.number(m.get("bandwidth_gbps", f.default(Network, "bandwidth_gbps")),
                 "network.bandwidth_gbps", minimum=0.001, maximum=1_000_000, unit="Gbit/s"),
    )


def parse_expect(raw: Any, facts: dict[str, WalkFacts], requests: dict[str, RequestKind]) -> Expect:
    m = f.mapping(raw, "expect", ("forwards_per_request", "per_request_kind"))
    fpr = _walk_counts(m.get("forwards_per_request", {}), "expect.forwards_per_request", facts)
    per_kind: dict[str, dict[str, dict[str, int]]] = {}
    pk = m.get("per_request_kind", {})
    for kind, body in f.mapping(pk, "expect.per_request_kind", f.any_keys(pk)).items():
        path = f.join("expect.per_request_kind", kind)
        if kind not in requests:
            raise ScenarioError(path, f"unknown request kind {kind!r}{hint(kind, requests)} "
                                            f"(kinds: {', '.join(requests)})")
        per_kind[kind] = _walk_counts(body, path, facts)
        takes = list(dict.fromkeys(st.walk for steps in requests[kind].partitions.values() for st in steps))
        for walk in per_kind[kind]:
            if walk not in takes:  # never checked: a typo or a kind's walks changed since
                raise ScenarioError(f.join(path, walk), f"request kind {kind!r} takes no walk "
                                                        f"{walk!r} (its walks: {', '.join(takes)})")
    return Expect(fpr, per_kind)


def _walk_counts(raw: Any, base: str, facts: dict[str, WalkFacts]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for walk, counts in f.mapping(raw, base, f.any_keys(raw)).items():
        path = f.join(base, walk)
        if walk not in facts:
            raise ScenarioError(path, f"unknown walk {walk!r}{hint(walk, facts)} (walks: {', '.join(facts)})")
        out[walk] = {}
        for node, n in f.mapping(counts, path, f.any_keys(counts)).items():
            if node not in facts[walk].nodes:
                nodes = list(facts[walk].nodes)
                raise ScenarioError(f.join(path, node), f"walk {walk!r} has no node {node!r}"
                                                        f"{hint(node, nodes)} (nodes: {', '.join(nodes)})")
            out[walk][node] = f.integer(n, f.join(path, node), minimum=0, maximum=10**12,
                                        unit="forwards")
    return out


def parse_kv(raw: Any) -> KvConfig:
    m = f.mapping(raw, "kv", ("bytes_per_token",))
    return KvConfig(f.size(m.get("bytes_per_token", f.default(KvConfig, "bytes_per_token")),
                           "kv.bytes_per_token"))


def parse_limits(raw: Any) -> Limits:
    m = f.mapping(raw, "limits", ("request_timeout_s",))
    return Limits(f.number(m.get("request_timeout_s", f.default(Limits, "request_timeout_s")),
                           "limits.request_timeout_s", positive=True, maximum=f.MAX_SECONDS,
                           unit="seconds"))


def parse_schedule(raw: Any, num_ranks: int) -> Schedule:
    m = f.mapping(raw, "schedule", ("service_jitter", "link_jitter_us", "shuffle_ties", "deliveries"))
    jitter = f.number(m.get("service_jitter", f.default(Schedule, "service_jitter")),
                      "schedule.service_jitter", minimum=0, unit="a fraction of the service time")
    if jitter >= 1:
        raise ScenarioError("schedule.service_jitter", f"expected a fraction below 1 (service "
                                                       f"times stay positive), got {jitter:g}")
    return Schedule(
        service_jitter=jitter,
        link_jitter_us=f.number(m.get("link_jitter_us", f.default(Schedule, "link_jitter_us")),
                                "schedule.link_jitter_us", minimum=0, maximum=10_000_000,
                                unit="microseconds"),
        shuffle_ties=f.boolean(m.get("shuffle_ties", f.default(Schedule, "shuffle_ties")),
                               "schedule.shuffle_ties"),
        deliveries=_deliveries(m.get("deliveries", []), num_ranks),
    )


#: a named endpoint's id in a delivery record (`runtime.messages`)
_ENDPOINT_IDS = {"conductor": -1, "client": -2}
DELIVERY_KEYS = ("from", "to", "nth", "message", "at_s", "order")


def _deliveries(raw: Any, num_ranks: int) -> tuple[MovedDelivery, ...]:
    """``schedule.deliveries``: the moved deliveries of a searched schedule, each as its search
    wrote it."""
    out = []
    seen: set[tuple[int, int, int]] = set()
    for i, item in enumerate(f.sequence(raw, "schedule.deliveries")):
        path = f.join("schedule.deliveries", i)
        m = f.mapping(item, path, DELIVERY_KEYS, required=DELIVERY_KEYS)
        src, dst = (_delivery_endpoint(m[k], f.join(path, k), num_ranks) for k in ("from", "to"))
        d = MovedDelivery(
            src=src, dst=dst,
            nth=f.integer(m["nth"], f.join(path, "nth"), minimum=1, maximum=10**9, unit="messages"),
            kind=f.string(m["message"], f.join(path, "message")),
            at_s=f.number(m["at_s"], f.join(path, "at_s"), minimum=0, maximum=f.MAX_SECONDS,
                          unit="seconds"),
            order=f.integer(m["order"], f.join(path, "order"), minimum=1, maximum=10**9))
        if d.id in seen:
            raise ScenarioError(path, f"the same message (nth {d.nth} from {m['from']} to {m['to']}) "
                                      f"is listed twice")
        seen.add(d.id)
        out.append(d)
    return tuple(out)


def _delivery_endpoint(value: Any, path: str, num_ranks: int) -> int:
    if isinstance(value, str) and value in _ENDPOINT_IDS:
        return _ENDPOINT_IDS[value]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < num_ranks:
        return value
    raise ScenarioError(path, f"expected a rank 0..{num_ranks - 1}, conductor or client, "
                              f"got {f.describe(value)}")


def delivery_entry(d: MovedDelivery) -> dict[str, Any]:
    """A moved delivery as ``schedule.deliveries`` lists it (the inverse of the parser)."""
    names = {v: k for k, v in _ENDPOINT_IDS.items()}
    return {"from": names.get(d.src, d.src), "to": names.get(d.dst, d.dst), "nth": d.nth,
            "message": d.kind, "at_s": d.at_s, "order": d.order}


def parse_faults(raw: Any, num_ranks: int) -> tuple[FaultSpec, ...]:
    """The ``faults:`` list: each entry read by its kind (`simharness.faults`)."""
    kinds = fault_names()
    out = []
    for i, item in enumerate(f.sequence(raw, "faults")):
        path = f.join("faults", i)
        if not isinstance(item, dict):
            raise ScenarioError(path, f"expected a mapping with a kind, got {f.describe(item)}")
        if "kind" not in item:
            raise ScenarioError(f.join(path, "kind"), f"missing required key (one of "
                                                      f"{', '.join(kinds)})")
        name = item["kind"]
        if name not in kinds:
            raise ScenarioError(f.join(path, "kind"), f"expected one of {', '.join(kinds)}, "
                                                      f"got {f.describe(name)}{_hint_of(name, kinds)}")
        kind = fault_kind(name)
        m = f.mapping(item, path, kind.keys, required=kind.keys[:2])
        out.append(kind.parse(m, path, num_ranks))
    return tuple(out)


def parse_corpus(raw: Any) -> CorpusMeta:
    """A corpus case's metadata block: the one reader of it (the loader, the corpus, a sweep's
    expectations all come here)."""
    m = f.mapping(raw, "corpus", CORPUS_KEYS, required=("signature", "runtime", "status"))
    signature = f.string(m["signature"], "corpus.signature")
    runtime = f.name(m["runtime"], "corpus.runtime", "a runtime name")
    against = None if m.get("against") is None else f.name(m["against"], "corpus.against",
                                                             "a runtime name")
    if m["status"] not in CORPUS_STATUSES:
        raise ScenarioError("corpus.status", f"expected one of {', '.join(CORPUS_STATUSES)}, "
                                             f"got {f.describe(m['status'])}"
                                             f"{_hint_of(m['status'], CORPUS_STATUSES)}")
    counts = {key: f.integer(m[key], f.join("corpus", key), minimum=0, maximum=MAX_SEED)
              for key in ("seed", "example", "nodes", "ranks") if key in m}
    # Texts, or absent: a date or a number here (YAML reads `2020-01-01` as a date) would be
    # printed, compared and written back as something else.
    texts = {key: None if m.get(key) is None else f.string(m[key], f.join("corpus", key))
             for key in ("check", "key", "trace_digest", "against_trace_digest", "note")}
    return CorpusMeta(signature, runtime, m["status"], check=texts["check"], key=texts["key"],
                      trace_digest=texts["trace_digest"], note=texts["note"] or "",
                      against=against, against_trace_digest=texts["against_trace_digest"],
                      verdict=_verdict(m.get("verdict")), **counts)


def _verdict(raw: Any) -> dict[str, Any] | None:
    """A case's recorded verdict (`simharness.explore.verdict`): what replay last found; a
    mapping of plain values, or absent."""
    if raw is None:
        return None
    m = f.mapping(raw, "corpus.verdict", ("mstar", "faults", "stack", "stack_seed", "stack_run", "profiles",
                                               "text"),
                  required=("mstar", "faults"))
    out: dict[str, Any] = {}
    for k, v in m.items():
        if k == "profiles":
            p = f.mapping(v, "corpus.verdict.profiles", list(v) if isinstance(v, dict) else ())
            out[k] = {name: f.string(sig, f.join("corpus.verdict.profiles", name))
                      for name, sig in p.items()}
        else:
            out[k] = (v if isinstance(v, int) and not isinstance(v, bool)
                      else f.string(v, f.join("corpus.verdict", k)))
    return out


def _hint_of(value: Any, choices: tuple[str, ...]) -> str:
    """`hint` for a value that may not be a string (then there is nothing to suggest)."""
    return hint(value, choices) if isinstance(value, str) else ""
