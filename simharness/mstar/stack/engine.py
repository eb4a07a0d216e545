"""The engine behind mstar's real ``EngineManager``: the scenario's fake nodes, no tensor math.

``EngineManager.build`` (worker/engine_manager.py:25-99) loads submodules and builds a real
``Engine``; in a stack run it returns mstar's own ``EngineManager`` around a `FakeEngine`. What
the worker, the ``MicroScheduler`` and ``_postprocess_batch`` call on an engine:

=====================================  =========================================================
call (caller)                          here
=====================================  =========================================================
get_max_batch_size(node, walk)         the scenario's ``max_batch`` (micro_scheduler.py:537-541)
check_ready(node, rid, info)           FULL_ADMIT_OK: no resource gate
prepare_inputs / finalize_batch        nothing
exec_and_postprocess(batch)            one tiny tensor per declared output name of the node in
                                       that walk, per request (outputs are routed by name)
check_stop_for_batch(batch, outputs)   the scenario's stop rule: a dynamic loop ends after the
                                       iteration at which its drawn length is reached
                                       (`rng.draw_stop`, as our fake nodes draw it)
the plan-thread and offload calls      "cannot" answers: no pre-planning, nothing to offload
=====================================  =========================================================

How long a forward takes is the driver's business (`FakeNodes.duration`, the scenario's
``service_ms`` and ``per_request_ms``); the engine only produces outputs and stop decisions.
"""

from __future__ import annotations

from typing import Any

import torch
from mstar.engine.resources.step import FULL_ADMIT_OK

from simharness.rng import draw_stop
from simharness.runtime.fake_nodes import FakeNodes
from simharness.scenario.model import Scenario


class FakeEngine:
    def __init__(self, node_names: set[str], scenario: Scenario, nodes: FakeNodes) -> None:
        self.node_names = set(node_names)
        self.scenario = scenario
        self.nodes = nodes
        self.requests: set[str] = set()
        self._value = 0
        #: (node, walk) -> the output names the node declares there, in order, once each
        self._outputs: dict[tuple[str, str], tuple[str, ...]] = {}
        #: (node, walk) -> the dynamic loops this node's check_stop may end, innermost first
        self._stops: dict[tuple[str, str], tuple[str, ...]] = {}
        #: walk -> streamed output name -> the partition it streams to
        self._streams: dict[str, dict[str, str]] = {}
        for walk, facts in scenario.walk_facts.items():
            part = scenario.partition_of[walk]
            self._streams[walk] = {c.edge: c.dst for c in scenario.connections if c.src == part}
            for name, node in facts.nodes.items():
                self._outputs[(name, walk)] = tuple(dict.fromkeys(e.name for e in node.outputs))
                self._stops[(name, walk)] = tuple(
                    lp.name for lp in reversed(facts.loops_of.get(name, ()))
                    if lp.stop is not None and (lp.stop.by is None or name in lp.stop.by))

    # -- scheduling ---------------------------------------------------------------------------

    def get_max_batch_size(self, node_name: str, graph_walk: str) -> int | None:
        return self.nodes.max_batch(node_name, graph_walk)

    def check_ready(self, node_name: str, request_id: str, request_info: Any) -> Any:
        return FULL_ADMIT_OK

    # -- the step -----------------------------------------------------------------------------

    def prepare_inputs(self, batch: Any) -> None:
        pass

    def exec_and_postprocess(self, batch: Any) -> dict[str, dict[str, list[torch.Tensor]]]:
        names = self._outputs.get((batch.node_name, batch.graph_walk), ())
        streams = self._streams.get(batch.graph_walk, {})
        out: dict[str, dict[str, list[torch.Tensor]]] = {}
        for rid in batch.request_ids:
            kind = self.scenario.requests.get(
                batch.per_request_info[rid].step_metadata.get("kind", ""))
            per: dict[str, list[torch.Tensor]] = {}
            for name in names:
                target = streams.get(name)
                if target is not None and kind is not None and target not in kind.partitions:
                    # A stream into a partition the request does not run (a text-only request
                    # has no Talker): the model produces nothing for it, an empty edge.
                    per[name] = []
                    continue
                self._value += 1
                per[name] = [torch.tensor([self._value], dtype=torch.int64)]
            out[rid] = per
        return out

    def finalize_batch(self, batch: Any) -> None:
        pass

    def check_stop_for_batch(self, batch: Any, outputs: dict[str, Any]) -> dict[str, set[str]]:
        loops = self._stops.get((batch.node_name, batch.graph_walk), ())
        if not loops:
            return {}
        stops: dict[str, set[str]] = {}
        seed = self.scenario.seed
        for rid in batch.request_ids:
            if not outputs.get(rid):
                continue
            info = batch.per_request_info[rid]
            meta = info.step_metadata
            kind = self.scenario.requests.get(meta.get("kind", ""))
            for loop in loops:
                dist = kind.stops.get(loop) if kind is not None else None
                it = info.dynamic_loop_iter_counts.get(loop)
                if dist is None or it is None:
                    continue
                n = draw_stop(seed, rid, info.partition_name, meta.get("pass", 0), loop, dist)
                if it + 1 >= n:
                    stops.setdefault(rid, set()).add(loop)
        return stops

    # -- pre-planning (mstar's plan thread, which the stack does not run) ----------------------

    def can_pre_plan(self, node_name: str) -> bool:
        return False

    def reserve_replay_slot(self, batch: Any) -> None:
        return None

    def pre_plan_for_batch(self, batch: Any) -> bool:
        return False

    def preplan_is_stale(self, batch: Any) -> bool:
        return False

    def reset_pre_plan_for_batch(self, batch: Any = None) -> None:
        pass

    # -- resources and offload ----------------------------------------------------------------

    def evictable(self, node_name: str) -> bool:
        return False

    def is_offloaded(self, node_name: str, request_id: str) -> bool:
        return False

    def offload_request(self, node_name: str, request_id: str) -> int:
        return 0

    def reload_request(self, node_name: str, request_id: str) -> bool:
        return True

    def reclaimable(self, node_name: str, request_id: str, affected_resources: Any = None) -> int:
        return 0

    def add_request(self, request_id: str, resource_configs: Any = None) -> None:
        self.requests.add(request_id)

    def remove_request(self, request_id: str) -> None:
        self.requests.discard(request_id)

    def warmup(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


__all__ = ["FakeEngine"]
