"""The frozen `Scenario` object that flows through the whole harness.

A scenario is read once (`simharness.scenario.loader.load_scenario`) and never changed afterwards.
It holds the model of the model (walks built from the graph IR and per-node facts), the placement
in mstar's own terms (node groups), the runtime to test, the workload, the network and payload
sizes, and the user's own expectations.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from msgspec import Struct, field
from msgspec.structs import force_setattr

from simharness.faults.base import FaultSpec
from simharness.graph.analysis import WalkFacts
from simharness.graph.ir import Section
from simharness.records import compared_without, shown_without


@compared_without("path")
class ScriptStep(Struct, frozen=True):
    """A scripted fake-node behaviour at one loop counter.

    ``wait_for_walk_start``: at this counter the node's engine gate (mstar ``check_ready``) holds
    it until each named input in its current slot is the copy the conductor sent when the walk
    started. This is how a node that reads its loop counter and (re)initialises from the walk's
    start is modelled.
    """

    at_counter: int
    wait_for_walk_start: tuple[str, ...]
    path: str = ""


class WalkCost(Struct, frozen=True):
    """Cost and batch cap of a node in one walk (prefill and decode differ), and how many tokens
    one forward adds to the node's KV cache (a prompt's length in a prefill, 1 in a decode)."""

    service_ms: float = 1.0
    per_request_ms: float = 0.0
    max_batch: int | None = None
    tokens: int = 1


class NodeFacts(Struct, frozen=True):
    """Fake-node behaviour: cost of one batch, batch cap, per-walk overrides, scripted gates,
    and the KV cache label of a KV-cache node (its pages must be pulled to a rank before the
    node can run there, as mstar's ``check_ready`` requires)."""

    #: the cost in every walk without an override
    base: WalkCost = WalkCost()
    per_walk: Mapping[str, WalkCost] = field(default_factory=dict)
    script: tuple[ScriptStep, ...] = ()
    kv_label: str | None = None

    def cost(self, walk: str) -> WalkCost:
        return self.per_walk.get(walk, self.base)


class ChunkPolicySpec(Struct, frozen=True):
    """A StreamBuffer's chunk policy (mstar ``mstar/streaming/chunk_policy.py``).

    ``sliding_window``: ready at `window` items, pops `window`, advances `stride`.
    ``left_context``: the first pop takes `chunk` items and advances ``chunk - context``; later
    pops take ``chunk + context`` and advance `chunk`.
    ``fixed``: pops and advances `chunk`; with `continue_after_done` it keeps producing empty
    chunks after the producer is done and never marks a chunk final.
    """

    kind: str
    window: int = 1
    stride: int = 1
    chunk: int = 1
    context: int = 0
    continue_after_done: bool = False


@compared_without("path")
class Connection(Struct, frozen=True):
    """A stream between partitions: edges named `edge` from `src` feed consumers in `dst`."""

    src: str
    dst: str
    edge: str
    policy: ChunkPolicySpec
    path: str = ""


class Step(Struct, frozen=True):
    """One entry of a partition's walk sequence: `walk` run `times` times, or, with
    `until_final`, again and again until the pass that consumed its stream's final chunk."""

    walk: str
    times: int = 1
    until_final: bool = False


class Dist(Struct, frozen=True):
    """A per-request draw: ``fixed`` n, or ``uniform`` integers in [low, high]."""

    kind: str
    low: int
    high: int

    def draw(self, rng) -> int:
        if self.kind == "fixed" or self.low == self.high:
            return self.low
        return int(rng.integers(self.low, self.high + 1))


class RequestKind(Struct, frozen=True):
    """What a request of this kind does: per partition, the walks it takes in order; what the
    client supplies; how many iterations its dynamic loops run (drawn per request); and the
    conductor's cap on output tokens."""

    name: str
    partitions: Mapping[str, tuple[Step, ...]]
    inputs: tuple[str, ...] = ()
    stops: Mapping[str, Dist] = field(default_factory=dict)
    max_output_tokens: int | None = None
    #: (signal, node) pairs the conductor sends at the start of each walk that has the node, as
    #: mstar's initial forward-pass arguments may seed any input of any node
    start_pairs: tuple[tuple[str, str], ...] = ()

    @property
    def walks(self) -> tuple[str, ...]:
        """Every walk the kind names, partitions in order (repeats listed once per step)."""
        return tuple(st.walk for steps in self.partitions.values() for st in steps)


@compared_without("path")
class NodeGroup(Struct, frozen=True):
    """One entry of mstar's ``node_groups``; its index in the list is the group id."""

    node_names: tuple[str, ...]
    ranks: tuple[int, ...]
    graph_walks: tuple[str, ...] | None = None
    tp_size: int = 1
    sp_size: int = 1
    path: str = ""

    @property
    def instance_size(self) -> int:
        return self.tp_size * self.sp_size

    @property
    def instances(self) -> tuple[tuple[int, ...], ...]:
        """Rank blocks of one lockstep instance each; more than one means data-parallel replicas."""
        k = self.instance_size
        return tuple(self.ranks[i : i + k] for i in range(0, len(self.ranks), k))


class Placement(Struct, frozen=True):
    node_groups: tuple[NodeGroup, ...]
    max_concurrent_requests: int | None = None

    @property
    def num_ranks(self) -> int:
        return 1 + max(r for g in self.node_groups for r in g.ranks)


class RuntimeChoice(Struct, frozen=True):
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)


class Phase(Struct, frozen=True):
    """A closed-loop phase: `count` requests, at most `concurrency` in flight.

    `kinds` are the request kinds, taken in turn (request i of the phase is ``kinds[i % n]``).
    Phases run one after the other: the next starts when every request of this one has ended.
    """

    kinds: tuple[str, ...]
    count: int
    concurrency: int

    def kind_of(self, i: int) -> str:
        """The kind of the phase's `i`-th request (counting from 0 within the phase)."""
        return self.kinds[i % len(self.kinds)]


class Network(Struct, frozen=True):
    transport: str = "shm"
    latency_us: float = 10.0
    bandwidth_gbps: float = 100.0


class Limits(Struct, frozen=True):
    #: The API server's per-request budget (mstar ``--timeout``, default 600 s), in simulated time.
    request_timeout_s: float = 600.0


class Expect(Struct, frozen=True):
    #: walk -> node -> forwards per request on each rank that runs the node.
    forwards_per_request: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: request kind -> walk -> node -> forwards per request of that kind.
    per_request_kind: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)


class KvConfig(Struct, frozen=True):
    #: bytes of KV cache per token (all layers, one label), what a pull moves per token
    bytes_per_token: int = 56 * 1024


class MovedDelivery(Struct, frozen=True):
    """One delivery a searched schedule moved (``schedule.deliveries``, `engine.deliveries`): the
    `nth` message (from 1, in send order) from endpoint `src` to `dst` (a rank, or -1 for the
    conductor and -2 for the client), of type `kind`, arrives at `at_s` seconds of simulated time
    (its nominal arrival if that is later), the `order`-th moved delivery of its run (moved
    deliveries due at one instant arrive in this order, after everything else of that instant)."""

    src: int
    dst: int
    nth: int
    kind: str
    at_s: float
    order: int

    @property
    def id(self) -> tuple[int, int, int]:
        return (self.src, self.dst, self.nth)


class Schedule(Struct, frozen=True):
    """Schedule perturbations the protocol permits, all drawn from the scenario's seed.

    ``service_jitter``: each batch's service time is scaled by a factor drawn uniformly from
    ``[1 - j, 1 + j]``. ``link_jitter_us``: each message gets an extra latency drawn from
    ``[0, j]`` microseconds, never overtaking an earlier message on the same link (FIFO per
    sender-receiver pair holds). ``shuffle_ties``: messages that reach a rank together from
    different senders are handled in a seeded order (each sender's own order kept), and ready
    (node, walk) pairs tied in the round-robin are picked in a seeded order.

    ``deliveries``: the messages a schedule search moved (`MovedDelivery`), replayed exactly;
    every other message arrives at its nominal time. Within what the transport permits: a moved
    message still never overtakes an earlier one of its link.
    """

    service_jitter: float = 0.0
    link_jitter_us: float = 0.0
    shuffle_ties: bool = False
    deliveries: tuple[MovedDelivery, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.service_jitter or self.link_jitter_us or self.shuffle_ties)


class CorpusMeta(Struct, frozen=True):
    """A fuzz corpus case's ``corpus:`` block: the failure it was recorded with and under which
    runtime (`simharness.explore.corpus` replays it). Metadata: it changes neither the run nor
    the fingerprint. Keys the block leaves out are None (``note``: empty)."""

    signature: str
    runtime: str
    #: ``open`` (must still fail this way) or ``fixed`` (must pass)
    status: str
    check: Any = None
    key: Any = None
    seed: int | None = None
    example: int | None = None
    nodes: int | None = None
    ranks: int | None = None
    trace_digest: Any = None
    note: Any = ""
    #: a differential case's second runtime (the oracle); None for a case of the checks
    against: Any = None
    #: ... and the trace digest of its run
    against_trace_digest: Any = None
    #: the verdict replay last recorded (`simharness.explore.verdict`): mstar, faults, stack, text
    verdict: Any = None


@compared_without("source", "fingerprint", "raw", "notes", "walk_facts", "corpus")
@shown_without("raw", "walk_facts")
class Scenario(Struct, frozen=True, dict=True):
    name: str
    description: str
    seed: int
    walks: Mapping[str, Section]
    nodes: Mapping[str, NodeFacts]
    requests: Mapping[str, RequestKind]
    placement: Placement
    runtime: RuntimeChoice
    workload: tuple[Phase, ...]
    network: Network
    payloads: Mapping[str, int]
    expect: Expect
    limits: Limits
    #: partition -> its walks (one partition "default" holding every walk unless declared)
    partitions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    connections: tuple[Connection, ...] = ()
    kv: KvConfig = field(default_factory=KvConfig)
    source: str = "<memory>"
    #: sha256 of the canonical scenario (the seed excluded): identifies the layout and load.
    fingerprint: str = ""
    #: The validated plain-data form, for writing a scenario back out (fuzz cases, reports).
    raw: Mapping[str, Any] = field(default_factory=dict)
    schedule: Schedule = field(default_factory=Schedule)
    #: the injected faults, each its kind's record (`simharness.faults`)
    faults: tuple[FaultSpec, ...] = ()
    #: what the loader accepted as mstar does but the user should know (printed as notes)
    notes: tuple[str, ...] = ()
    #: walk -> its facts; computed once (by the loader, which needs them to check the sections
    #: that name nodes and loops) and carried here. Left empty, they are built from the walks.
    walk_facts: Mapping[str, WalkFacts] = field(default_factory=dict)
    #: a corpus case's ``corpus:`` block; None for any other scenario
    corpus: CorpusMeta | None = None

    def __post_init__(self) -> None:
        if not self.walk_facts and self.walks:
            force_setattr(self, "walk_facts",
                          build_walk_facts(self.walks, self.partitions, self.connections))

    @cached_property
    def partition_of(self) -> dict[str, str]:
        return {w: p for p, walks in self.partitions.items() for w in walks}

    @cached_property
    def gated_nodes(self) -> frozenset[str]:
        """Nodes an engine gate may hold: a scripted gate, or a KV-cache label."""
        return frozenset(n for n, f in self.nodes.items() if f.script or f.kv_label)

    @cached_property
    def dynamic_nodes(self) -> frozenset[str]:
        """Nodes inside a dynamic loop (their ``check_stop`` may end it)."""
        return frozenset(n for wf in self.walk_facts.values()
                         for n, loops in wf.loops_of.items() if any(lp.stop for lp in loops))

    def stream_inputs(self, walk: str) -> frozenset[str]:
        """Edge names that stream into `walk` (its partition's incoming connections)."""
        return _streamed_into(self.partition_of.get(walk, DEFAULT_PARTITION), self.connections)

    def node_facts(self, node: str) -> NodeFacts:
        return self.nodes.get(node, DEFAULT_NODE_FACTS)

    def payload_bytes(self, signal: str) -> int:
        return self.payloads.get(signal, DEFAULT_PAYLOAD_BYTES)

    @property
    def total_requests(self) -> int:
        return sum(p.count for p in self.workload)


def build_walk_facts(
    walks: Mapping[str, Section], partitions: Mapping[str, tuple[str, ...]],
    connections: tuple[Connection, ...],
) -> dict[str, WalkFacts]:
    """Each walk's facts, with the stream inputs its partition's incoming connections feed."""
    part_of = {w: p for p, ws in partitions.items() for w in ws}
    return {name: WalkFacts(name, root,
                            _streamed_into(part_of.get(name, DEFAULT_PARTITION), connections))
            for name, root in walks.items()}


def _streamed_into(partition: str, connections: tuple[Connection, ...]) -> frozenset[str]:
    """Edge names that stream into `partition` (its incoming connections)."""
    return frozenset(c.edge for c in connections if c.dst == partition)


DEFAULT_NODE_FACTS = NodeFacts()
DEFAULT_PARTITION = "default"
#: A signal with no size in `payloads` is a small tensor (one token id, a flag).
DEFAULT_PAYLOAD_BYTES = 64
