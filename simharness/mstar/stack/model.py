"""`ScenarioModel`: an mstar ``Model`` whose graphs and conductor plan come from a scenario.

mstar's conductor asks its model for the walks (``get_graph_walk_graphs``), the partitions and
their stream connections, which nodes may run tensor-parallel, and, per request and partition,
the inputs of each pass (``get_initial_forward_pass_args``, ``get_partition_forward_pass_args``).
A real model decides those from its modalities and its sampler; this one from the scenario, the
way our conductor model decides them (`runtime.conductor`):

* the walks are our IR converted to mstar's graph classes (`convert.to_mstar`), streaming edges
  as ``StreamingGraphEdge`` toward the connection's partition;
* a request kind's steps per partition are walked in order, each ``times`` times; a step that
  repeats until its stream's final chunk is self-triggered (no inputs: the StreamBuffer on the
  worker triggers it), and the conductor ends the partition when the pass that consumed the
  final chunk says so;
* the inputs of a pass are the walk's start inputs (`graph.analysis.WalkFacts.start_inputs` and
  the kind's walk-start pairs): a loop-back seed as a signal-only edge (BAGEL's empty latents),
  anything else with the tensors the request holds under that name (the client's inputs and
  what earlier passes persisted: mstar keeps both in the request's ``persist_signals``);
* the pass number rides in the step metadata, so the fake engine's stop rule draws the same
  dynamic-loop length our model draws (`rng.draw_stop`).

mstar pickles the model into every worker (conductor.py:437); this one pickles as a key into the
runs of this process (`register`), so each worker's copy is the same scenario.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

from mstar.conductor.request_info import (
    DEFAULT_PARTITION,
    CurrentForwardConductorMetadata,
    PartitionDefinition,
)
from mstar.distributed.base import ShardingConfig
from mstar.graph.base import GraphEdge
from mstar.model.base import ForwardPassArgs, Model
from mstar.streaming.topology import Connection, PartitionTopology

from simharness.mstar.convert import to_chunk_policy, to_mstar
from simharness.mstar.package import graph_module
from simharness.placement.layout import Layout
from simharness.scenario.model import Scenario

#: key -> live model, for unpickling (a worker's copy names its run's model by key)
_LIVE: weakref.WeakValueDictionary[int, ScenarioModel] = weakref.WeakValueDictionary()
_KEYS = itertools.count()
#: the output-token cap of a request kind that sets none
NO_CAP = 10**9


def _revive(key: int) -> ScenarioModel:
    return _LIVE[key]


class ScenarioModel(Model):
    """The scenario as mstar's model (see the module docstring)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.scenario: Scenario = layout.scenario
        self.key = next(_KEYS)
        _LIVE[self.key] = self
        sc = self.scenario
        #: walk -> (streamed edge name -> the partition it streams to)
        self._streams: dict[str, dict[str, str]] = {}
        for walk in sc.walks:
            part = sc.partition_of[walk]
            self._streams[walk] = {c.edge: c.dst for c in sc.connections if c.src == part}

    def __reduce__(self) -> tuple[Any, ...]:
        return (_revive, (self.key,))

    # -- graphs -----------------------------------------------------------------------------

    def get_graph_walk_graphs(self) -> dict[str, Any]:
        g = graph_module()
        return {walk: to_mstar(section, g, self._streams[walk])
                for walk, section in self.scenario.walks.items()}

    def get_partitions(self) -> list[PartitionDefinition]:
        sc = self.scenario
        if not sc.connections and list(sc.partitions) == [DEFAULT_PARTITION]:
            return super().get_partitions()
        return [PartitionDefinition(name=name, graph_walks=set(walks), initial_walk=None,
                                    producer_partitions=sorted({c.src for c in sc.connections
                                                                if c.dst == name}))
                for name, walks in sc.partitions.items()]

    def get_partition_topology(self) -> PartitionTopology:
        sc = self.scenario
        if not sc.connections and list(sc.partitions) == [DEFAULT_PARTITION]:
            return super().get_partition_topology()
        return PartitionTopology(
            partitions=list(sc.partitions),
            connections=[Connection(from_partition=c.src, to_partition=c.dst, edge_name=c.edge,
                                    chunk_policy_factory=to_chunk_policy(c.policy))
                         for c in sc.connections])

    def get_default_sharding_config(self) -> ShardingConfig:
        groups = self.scenario.placement.node_groups
        tp = sorted({n for g in groups if g.tp_size > 1 for n in g.node_names})
        sp = sorted({n for g in groups if g.sp_size > 1 for n in g.node_names})
        return ShardingConfig(groups=[], tp_enabled_nodes=tp, sp_enabled_nodes=sp, shard_dim={})

    def get_max_output_tokens(self, **model_kwargs: Any) -> int:
        kind = self.scenario.requests.get(model_kwargs.get("kind", ""))
        cap = kind.max_output_tokens if kind is not None else None
        return NO_CAP if cap is None else cap

    # -- the conductor's plan -----------------------------------------------------------------

    def get_initial_forward_pass_args(self, partition_name: str, input_modalities: list[str],
                                      output_modalities: list[str], input_signals: dict[str, Any],
                                      model_kwargs: dict[str, Any] | None = None) -> ForwardPassArgs:
        kind_name = (model_kwargs or {})["kind"]
        steps = self.scenario.requests[kind_name].partitions.get(partition_name)
        state = {"kind": kind_name, "step": 0, "repeat": 0, "pass": 0}
        walk = steps[0].walk if steps else self.scenario.partitions[partition_name][0]
        metadata = CurrentForwardConductorMetadata(
            graph_walk=walk, is_prefill=True, input_modalities=list(input_modalities),
            output_modalities=list(output_modalities), kwargs=dict(state))
        if not steps:
            # the partition takes no part in this request (a text-only request has no Talker)
            return ForwardPassArgs(full_metadata=metadata, inputs=[], unpersist_tensors=[],
                                   request_done=True, step_metadata=state)
        return self._pass(metadata, steps[0], state, input_signals)

    def get_partition_forward_pass_args(self, partition_name: str, partition_metadata: Any,
                                        persist_signals: dict[str, Any],
                                        incoming_connections: Any = None) -> ForwardPassArgs:
        md = partition_metadata
        state = {k: md.kwargs[k] for k in ("kind", "step", "repeat", "pass")}
        kind = self.scenario.requests[state["kind"]]
        steps = kind.partitions[partition_name]
        state["pass"] += 1
        state["repeat"] += 1
        step = steps[state["step"]]
        md.is_prefill = False
        if step.until_final:
            # The pass that consumed the stream's final chunk ends the partition (the conductor
            # does, from the worker's report); until then the StreamBuffer triggers each pass.
            return ForwardPassArgs(full_metadata=md, inputs=[], unpersist_tensors=[],
                                   step_metadata=state)
        if state["repeat"] >= step.times:
            state["step"] += 1
            state["repeat"] = 0
        if state["step"] >= len(steps):
            return ForwardPassArgs(full_metadata=md, inputs=[], unpersist_tensors=[],
                                   request_done=True, step_metadata=state)
        return self._pass(md, steps[state["step"]], state, persist_signals)

    def _pass(self, metadata: Any, step: Any, state: dict[str, Any],
              signals: dict[str, Any]) -> ForwardPassArgs:
        """The forward-pass arguments that open a pass of `step`'s walk."""
        metadata.graph_walk = step.walk
        if step.until_final:  # self-triggered by its stream
            return ForwardPassArgs(full_metadata=metadata, inputs=[], unpersist_tensors=[],
                                   step_metadata=state)
        return ForwardPassArgs(full_metadata=metadata,
                               inputs=self.start_inputs(state["kind"], step.walk, signals),
                               unpersist_tensors=[], step_metadata=state)

    def start_inputs(self, kind_name: str, walk: str, signals: dict[str, Any]) -> list[Any]:
        """What the conductor sends at a pass's start, as our conductor model sends it."""
        sc = self.scenario
        facts = sc.walk_facts[walk]
        start = set(facts.start_inputs)
        start |= {p for p in sc.requests[kind_name].start_pairs
                  if p[1] in facts.nodes and p[0] not in facts.stream_inputs}
        out = []
        for name, dest in sorted(start):
            edge = GraphEdge(next_node=dest, name=name)
            if (name, dest) not in facts.seeds and name in signals:
                edge.tensor_info = list(signals[name])
            out.append(edge)
        return out

    # -- what the engine would need (the stack's engine is fake) ----------------------------

    def get_node_resources(self) -> list[Any]:
        return []

    def process_prompt(self, prompt: Any, input_modalities: Any, output_modalities: Any,
                       tensors: Any = None, prompt_parts: Any = None, **kwargs: Any) -> dict[str, Any]:
        return {}

    def postprocess(self, output: Any, modality: Any, request_kwargs: Any = None) -> bytes:
        return b""

    def get_submodule(self, node_name: str, device: Any = "cpu", tp_group: Any = None,
                      autocast_dtype: Any = None, sp_group: Any = None) -> None:
        return None


__all__ = ["NO_CAP", "ScenarioModel"]
