"""A Chrome trace-event file of a run that shows the bug in Perfetto (ui.perfetto.dev).

Layout of the file (the JSON object format, ``{"traceEvents": [...]}``, times in microseconds):

* one process per rank, named ``rank N`` (pid N+1: viewers treat pid 0 as the idle process), and
  one more, ``run``, for run-wide counters and violations that name no rank;
* on each rank a track per node: one complete slice (``ph: X``) per batch, named after the node,
  its request(s) and loop counter, with ``args`` request, walk, pass, loop counter and the
  forward's number among those the graph implies (``forward 50 of 49``). A forward beyond what
  the graph implies is named ``EXTRA ...`` and coloured red;
* an ``inbox`` track per rank: one short slice per message taken in, and a flow arrow
  (``ph: s``/``f``) from the sending batch to it for every message between ranks and every
  hand-over into a sibling worker graph; a loop-back sent after its loop's end is a flow in
  category ``stray`` and its slice is red;
* an instant event (``ph: i``) per violation at its time, on the rank it names;
* counters (``ph: C``): messages queued for each rank (sent, not yet taken in) and requests in
  flight (admitted, not ended).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from simharness import events as ev
from simharness.fileio import write_text
from simharness.report.story import Story, build_story, violation_time

US = 1e6
#: the inbox track's thread id on every rank (node tracks are 1..n)
INBOX_TID = 999
VIOLATION_TID = 998


def pid_of(rank: int) -> int:
    return rank + 1


def trace_events(story: Story) -> list[dict[str, Any]]:
    report = story.report
    events = report.result.events
    out: list[dict[str, Any]] = []
    ranks = story.ranks
    run_pid = len(ranks) + 1
    tracks: dict[tuple[int, str], int] = {}
    tracks_on_rank: dict[int, int] = {}

    # Batches: one slice per batch, with every forward it made.
    per_batch: dict[tuple[int, int], list[tuple[int, ev.Forward]]] = defaultdict(list)
    for i, f in story.forwards:
        per_batch[(f.rank, f.batch)].append((i, f))
    #: forward index -> a time inside its batch's slice (us), where its flows start: a viewer
    #: binds a flow start to the slice that encloses it, and a slice's very first instant is
    #: ambiguous when events share a timestamp
    slice_start: dict[int, float] = {}
    for e in events:
        if type(e) is not ev.BatchStarted:
            continue
        tid = tracks.get((e.rank, e.node))
        if tid is None:  # a node's track number: the next free one on its rank
            tid = tracks[(e.rank, e.node)] = tracks_on_rank[e.rank] = tracks_on_rank.get(e.rank, 0) + 1
        fwds = per_batch.get((e.rank, e.batch), [])
        extra = any(i in story.extra for i, _ in fwds)
        counters = [f.counter for _, f in fwds]
        name = f"{e.node} {','.join(e.rids)}"
        if len(set(counters)) == 1 and counters[0] is not None:
            name += f" #{counters[0]}"
        if extra:
            name = "EXTRA " + name
        args: dict[str, Any] = {"walk": e.walk, "batch": e.batch, "requests": list(e.rids)}
        if len(fwds) == 1:
            i, f = fwds[0]
            k, n = story.pass_of.get(i, (0, 0))
            args.update({"request": f.rid, "pass": f.pass_no, "loop_counter": f.counter,
                         "forward": f"{k} of {n}", "extra": i in story.extra})
        elif fwds:
            args["forwards"] = [{"request": f.rid, "pass": f.pass_no, "loop_counter": f.counter,
                                 "forward": "{} of {}".format(*story.pass_of.get(i, (0, 0))),
                                 "extra": i in story.extra} for i, f in fwds]
        ts = e.t * US
        slice_ev: dict[str, Any] = {"name": name, "cat": "extra" if extra else e.walk, "ph": "X", "ts": ts,
                    "dur": max(e.duration * US, 0.001), "pid": pid_of(e.rank), "tid": tid, "args": args}
        if extra:
            slice_ev["cname"] = "terrible"
        out.append(slice_ev)
        for i, _f in fwds:
            slice_start[i] = ts + min(0.5, slice_ev["dur"] / 2)

    # Messages: a slice on the receiver's inbox track and a flow arrow to it.
    inbox_end: dict[int, float] = defaultdict(lambda: -1.0)
    queued: list[tuple[float, int, int]] = []  # (t us, rank, +1/-1)
    for n, m in enumerate(story.messages):
        if m.t_recv is None:
            queued.append((m.t_send * US, m.dst_rank, +1))
            continue
        src_tid = tracks.get((m.src_rank, m.src_node))
        if src_tid is None or m.src_index not in slice_start:
            continue
        ts = max(m.t_recv * US, inbox_end[m.dst_rank] + 0.001)
        inbox_end[m.dst_rank] = ts + 1.0
        what = "sibling" if m.kind == "sibling" else f"rank {m.src_rank}"
        label = f"{'STRAY ' if m.stray else ''}{m.label} from {m.src_node}@{what} ({m.rid})"
        recv: dict[str, Any] = {
            "name": label, "cat": "stray" if m.stray else "message", "ph": "X", "ts": ts,
            "dur": 1.0, "pid": pid_of(m.dst_rank), "tid": INBOX_TID,
            "args": {"request": m.rid, "walk": m.walk, "pass": m.pass_no, "from_rank": m.src_rank,
                     "from_node": m.src_node, "to_wg": m.dst_wg or None,
                     "signals": [f"{a}→{b}" for a, b in m.signals], "outcomes": m.outcomes,
                     "stray_loop_back": m.stray}}
        if m.stray:
            recv["cname"] = "terrible"
        out.append(recv)
        cat = "stray" if m.stray else "message"
        out.append({"name": m.label, "cat": cat, "ph": "s", "id": n + 1, "ts": slice_start[m.src_index],
                    "pid": pid_of(m.src_rank), "tid": src_tid})
        out.append({"name": m.label, "cat": cat, "ph": "f", "bp": "e", "id": n + 1, "ts": ts + 0.5,
                    "pid": pid_of(m.dst_rank), "tid": INBOX_TID})
        if m.kind == "peer":
            queued.append((m.t_send * US, m.dst_rank, +1))
            queued.append((m.t_recv * US, m.dst_rank, -1))

    # Counters: messages queued per rank, requests in flight.
    depth: dict[int, int] = defaultdict(int)
    for ts, rank, step in sorted(queued, key=lambda x: (x[0], x[2])):
        depth[rank] += step
        out.append({"name": "messages queued", "ph": "C", "ts": ts, "pid": pid_of(rank),
                    "args": {"messages": depth[rank]}})
    in_flight = 0
    for e in events:
        if type(e) in (ev.Admitted, ev.RequestEnded):
            in_flight += 1 if type(e) is ev.Admitted else -1
            out.append({"name": "requests in flight", "ph": "C", "ts": e.t * US, "pid": run_pid,
                        "args": {"requests": in_flight}})

    # Violations: an instant marker at the time of the event each is about.
    for v in report.violations:
        pid = pid_of(v.rank) if v.rank is not None and 0 <= v.rank < len(ranks) else run_pid
        where = " ".join(x for x in (v.request, v.walk, v.node) if x)
        out.append({"name": f"violation: {v.check} {where}", "cat": "violation", "ph": "i", "s": "p",
                    "ts": violation_time(v, story) * US, "pid": pid, "tid": VIOLATION_TID,
                    "args": {"check": v.check, "request": v.request, "walk": v.walk, "node": v.node,
                             "rank": v.rank, "message": v.message}})
    for s in story.stalls:
        out.append({"name": f"hang {s.rid}", "cat": "hang", "ph": "i", "s": "g", "ts": s.t * US,
                    "pid": run_pid, "tid": VIOLATION_TID, "args": {"request": s.rid, "walk": s.walk,
                                                                    "reason": s.reason}})

    # Names and order of processes and tracks.
    for rank in ranks:
        pid = pid_of(rank)
        out.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"rank {rank}"}})
        out.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": rank}})
        out.append({"name": "thread_name", "ph": "M", "pid": pid_of(rank), "tid": INBOX_TID,
                    "args": {"name": "inbox"}})
        out.append({"name": "thread_name", "ph": "M", "pid": pid_of(rank), "tid": VIOLATION_TID,
                    "args": {"name": "violations"}})
    for (rank, node), tid in tracks.items():
        out.append({"name": "thread_name", "ph": "M", "pid": pid_of(rank), "tid": tid,
                    "args": {"name": node}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": pid_of(rank), "tid": tid,
                    "args": {"sort_index": tid}})
    out.append({"name": "process_name", "ph": "M", "pid": run_pid, "args": {"name": "run"}})
    out.append({"name": "process_sort_index", "ph": "M", "pid": run_pid, "args": {"sort_index": run_pid}})
    out.append({"name": "thread_name", "ph": "M", "pid": run_pid, "tid": VIOLATION_TID,
                "args": {"name": "violations"}})
    return out


def write_perfetto(report_or_story: Any, path: str | Path) -> None:
    """Write the trace-event file for a run (a `RunReport`, or a `Story` built from one)."""
    import json

    story = report_or_story if isinstance(report_or_story, Story) else build_story(report_or_story)
    sc = story.report.scenario
    doc = {"traceEvents": trace_events(story), "displayTimeUnit": "ms",
           "otherData": {"scenario": sc.name, "runtime": story.report.runtime,
                         "backend": story.report.backend, "seed": sc.seed,
                         "trace_digest": story.report.trace_digest}}
    write_text(path, json.dumps(doc, separators=(",", ":")))
