"""A Chrome / Perfetto trace of a run: one process per rank, one track per node.

Open the file at https://ui.perfetto.dev (or chrome://tracing). Each batch is a complete event
(``ph: X``) on its rank's track for the node, labelled with the request ids it served.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from simharness import events as ev


def write_perfetto(events: Iterable[Any], path: str | Path) -> None:
    out: list[dict[str, Any]] = []
    tracks: dict[tuple[int, str], int] = {}
    for e in events:
        if type(e) is ev.BatchStarted:
            tid = tracks.setdefault((e.rank, e.node), len(tracks) + 1)
            out.append({"name": f"{e.node} {','.join(e.rids)}", "cat": e.walk, "ph": "X",
                        "ts": e.t * 1e6, "dur": e.duration * 1e6, "pid": e.rank, "tid": tid,
                        "args": {"walk": e.walk, "requests": list(e.rids), "batch": e.batch}})
        elif type(e) is ev.Stalled:
            out.append({"name": f"hang {e.rid}", "ph": "i", "s": "g", "ts": e.t * 1e6, "pid": 0,
                        "tid": 0})
    for (rank, node), tid in tracks.items():
        out.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": node}})
    ranks = sorted({rank for rank, _ in tracks})
    for rank in ranks:
        out.append({"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank}"}})
    Path(path).write_text(json.dumps({"traceEvents": out}), encoding="utf-8")
