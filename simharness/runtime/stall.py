"""What a hung request waits for on one rank: the per-rank half of a stall report.

Both drivers build `Stalled` events from this: the simpy engine reads every rank's state in
process, the real backend asks each rank process for it over the wire. Pure: it only reads the
rank's runtime state.
"""

from __future__ import annotations

from collections.abc import Callable

from simharness import events as ev
from simharness.runtime.protocol import RankRuntimeProtocol, StallPosition, WorkerGraphState

#: (node, walk, rid, state) -> (why the engine holds the node, the inputs it waits for)
GateDetail = Callable[[str, str, str, WorkerGraphState], tuple[str, tuple[str, ...]]]


def blocked_nodes(
    rank: int, runtime: RankRuntimeProtocol, gate_detail: GateDetail, rid: str, position: StallPosition,
) -> list[ev.BlockedNode]:
    """The nodes of `rid`'s current walks (``position.walks``, one per unfinished partition) on
    this rank that hold something, are queued or gated.

    For a worker graph that has not reported done (``position.pending``) and holds nothing at
    all, every node is listed, so the report still says where the request is missing.
    """
    rs = runtime.requests.get(rid)
    if rs is None:
        return []
    current = set(position.walks)
    pending = {wg for wg, _ in position.pending}
    blocked: list[ev.BlockedNode] = []
    for wg_id, st in rs.states.items():
        if st.spec.walk not in current:
            continue
        rows = []
        for node, ns in st.spec.nodes.items():
            cur, nxt = st.inputs(node), st.next_inputs(node)
            missing = tuple(i for i in ns.inputs if i not in cur)
            closed, waits = ("", ()) if missing else gate_detail(node, st.spec.walk, rid, st)
            rows.append(ev.BlockedNode(
                rank, wg_id, node, st.counter(node), tuple(cur.values()), tuple(nxt.values()),
                missing, closed, waits, node in st.ready))
        interesting = [b for b in rows if b.held or b.held_next or b.queued or b.gate]
        if not interesting and wg_id in pending:
            interesting = rows
        blocked.extend(interesting)
    return blocked
