"""What a run's trace says, laid out for pictures: extra passes, messages, strays, times.

The HTML report, the Perfetto trace and the console all tell the same story, so they read it
from here. Nothing is decided twice: extra and missing forwards come from the `forwards` check's
own pass-by-pass comparison (`ForwardsCheck.per_pass`), stray loop-backs from the `loop_exit`
check, each replayed over the recorded events. This module only rearranges what the checks and
the trace already know.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from simharness import events as ev
from simharness.checks.base import RunContext, RunSetup, rid_order
from simharness.checks.forwards import ForwardsCheck
from simharness.checks.loop_exit import LoopExitCheck
from simharness.run import RunReport
from simharness.trace import Recorder

#: (walk, node, rank, request)
Key = tuple[str, str, int, str]


@dataclass
class Message:
    """Signals one forward sent to another rank, or into a sibling worker graph on its rank."""

    rid: str
    walk: str
    pass_no: int
    src_rank: int
    src_node: str
    src_wg: str
    dst_rank: int
    #: the destination worker graph for a sibling hand-over; "" for a peer message
    dst_wg: str
    t_send: float
    #: when the receiving rank took it in; None when it never did
    t_recv: float | None
    #: (signal name, destination node) per signal
    signals: list[tuple[str, str]]
    #: "peer" (another rank, or itself over the message path) or "sibling" (same rank)
    kind: str
    #: a loop-back sent after its loop's end (the `loop_exit` check flagged it)
    stray: bool = False
    #: what the receiver did with each signal: current, next, parked, rejected
    outcomes: list[str] = field(default_factory=list)
    #: index of the sending Forward in the event list
    src_index: int = -1

    @property
    def label(self) -> str:
        names = sorted({n for n, _ in self.signals})
        return ", ".join(names)


@dataclass
class Story:
    report: RunReport
    #: every Forward, in trace order, with its index in the event list
    forwards: list[tuple[int, ev.Forward]]
    #: event index -> (position among its key's forwards in its pass, 1-based; expected count)
    pass_of: dict[int, tuple[int, int]]
    #: event indices of forwards beyond what the graph implies
    extra: set[int]
    #: key -> how many forwards are missing (expected minus observed, when positive)
    missing: dict[Key, int]
    messages: list[Message]
    #: (t, rank, rid, what, reason) of every input dropped or parked for good
    dropped: list[tuple[float, int, str, str, str]]
    #: (t, rank, rid, signal names, worker graph) of every input parked by a finished loop
    parked: list[tuple[float, int, str, str, str]]
    #: the Stalled events (hangs)
    stalls: list[ev.Stalled]
    end_t: float
    #: the command line that made the run, when known: a page's rerun line keeps its flags
    command: list[str] | None = None
    #: the Perfetto trace written beside the page (its file name), when one is
    trace_file: str | None = None

    @property
    def ranks(self) -> list[int]:
        return list(range(self.report.result.layout.num_ranks))


def _replay_checks(report: RunReport) -> tuple[ForwardsCheck, LoopExitCheck]:
    # The recorder dispatches to the checks' on_<Event> handlers, as during the run.
    setup = RunSetup(report.scenario, report.result.layout)
    fwd, lex = ForwardsCheck(setup), LoopExitCheck(setup)
    recorder = Recorder((fwd, lex), keep=False, digest=False)
    for e in report.result.events:
        recorder.emit(e)
    return fwd, lex


def _sig_id(sig: Any) -> tuple:
    # A producer numbers its signals in order: (rank, seq) with name and destination is one copy,
    # and stays so across the real backend's wire format.
    return (sig.name, sig.dest, sig.src_rank, sig.seq)


def build_story(report: RunReport, command: list[str] | None = None) -> Story:
    events = report.result.events
    fwd, lex = _replay_checks(report)
    ctx = RunContext(report.scenario, report.result.layout, report.result.outcomes)
    expected, totals = fwd.expected(ctx)
    # The check's own pass-by-pass comparison: how many forwards each completed pass allows,
    # and how many it lacks. A hung pass has none (it is liveness's).
    allowed: dict[tuple[Key, int], int] = {}
    missing: dict[Key, int] = {}
    for key, p, got, want in fwd.per_pass(ctx):
        allowed[(key, p)] = len(want)
        if len(got) < len(want):
            missing[key] = missing.get(key, 0) + len(want) - len(got)
    # A repeated walk is compared in total: a forward is extra past the walk's whole expectation.
    done_passes = {(rid, w, p) for rid, done in fwd.passes_done.items() for w, p in done}

    forwards: list[tuple[int, ev.Forward]] = []
    seen: dict[tuple[Key, int], int] = defaultdict(int)
    pass_of: dict[int, tuple[int, int]] = {}
    extra: set[int] = set()
    for i, e in enumerate(events):
        if type(e) is not ev.Forward:
            continue
        forwards.append((i, e))
        key = (e.walk, e.node, e.rank, e.rid)
        seen[(key, e.pass_no)] += 1
        k = seen[(key, e.pass_no)]
        by_pass = expected.get(key, {})
        n_exp = len(by_pass.get(e.pass_no, by_pass.get(-1, [])))
        pass_of[i] = (k, n_exp)
        limit = allowed.get((key, e.pass_no))
        if limit is not None:
            if k > limit:
                extra.add(i)
        elif key in totals and (e.rid, e.walk, e.pass_no) in done_passes and k > n_exp:
            extra.add(i)

    stray_routes: set[tuple[int, tuple]] = set()
    for e, _loop, stray in lex.routed:
        for sig, where in stray:
            stray_routes.add((id(e), (_sig_id(sig), where)))

    messages: list[Message] = []
    pending: dict[tuple, Message] = {}
    dropped: list[tuple[float, int, str, str, str]] = []
    parked: list[tuple[float, int, str, str, str]] = []
    stalls: list[ev.Stalled] = []
    for i, e in enumerate(events):
        t = type(e)
        if t is ev.Forward:
            by_dest: dict[tuple[str, int, str], Message] = {}
            for sig, where in e.routes:
                if where.startswith("rank:"):
                    dst, wg, kind = int(where[5:]), "", "peer"
                elif where.startswith("local:") and where[6:] != e.wg:
                    dst, wg, kind = e.rank, where[6:], "sibling"
                else:
                    continue
                m = by_dest.get((kind, dst, wg))
                if m is None:
                    m = by_dest[(kind, dst, wg)] = Message(
                        e.rid, e.walk, e.pass_no, e.rank, e.node, e.wg, dst, wg, e.t,
                        e.t if kind == "sibling" else None, [], kind, src_index=i)
                    messages.append(m)
                m.signals.append((sig.name, sig.dest))
                if (id(e), (_sig_id(sig), where)) in stray_routes:
                    m.stray = True
                if kind == "peer":
                    pending[(_sig_id(sig), dst)] = m
                else:
                    m.outcomes.append("current")
        elif t is ev.Delivered:
            for sig, wg, outcome in e.outcomes:
                m = pending.pop((_sig_id(sig), e.rank), None)
                if m is not None:
                    if m.t_recv is None:
                        m.t_recv = e.t
                    m.outcomes.append(outcome)
                if outcome == "parked":
                    parked.append((e.t, e.rank, e.rid, sig.name, wg))
        elif t is ev.Dropped:
            names = ", ".join(s.name for s in e.signals) or e.what
            dropped.append((e.t, e.rank, e.rid, names, e.reason))
        elif t is ev.Stalled:
            stalls.append(e)
    end_t = events[-1].t if events else 0.0
    return Story(report, forwards, pass_of, extra, missing, messages, dropped, parked, stalls, end_t,
                 command)


def violation_time(v: Any, story: Story) -> float:
    """When a violation happened, for a marker on a timeline: its own time (`Violation.t`) where
    its check could say; else, for one that names a node, that node's first forward beyond what
    the graph implies there, or its last forward (the forwards and expect checks keep no times);
    else the request's removal from its rank, its end, or the end of the run."""
    if v.t is not None:
        return v.t
    events = story.report.result.events
    if v.node is not None:
        match = [(i, e) for i, e in story.forwards
                 if e.rid == v.request and e.node == v.node and (v.rank is None or e.rank == v.rank)
                 and (v.walk is None or e.walk == v.walk)]
        extra = [e for i, e in match if i in story.extra]
        if extra:
            return extra[0].t
        if match:
            return match[-1][1].t
    for e in events:
        if type(e) is ev.Removed and e.rid == v.request and (v.rank is None or e.rank == v.rank):
            return e.t
    for e in events:
        if type(e) is ev.RequestEnded and e.rid == v.request:
            return e.t
    return story.end_t


def chosen_request(story: Story) -> str | None:
    """The request the message diagram follows: the first with a stray message, else the first
    that hung, else the first with a violation, else the first request."""
    strays = sorted({m.rid for m in story.messages if m.stray}, key=rid_order)
    if strays:
        return strays[0]
    if story.stalls:
        return sorted((s.rid for s in story.stalls), key=rid_order)[0]
    flagged = sorted({v.request for v in story.report.violations if v.request}, key=rid_order)
    if flagged:
        return flagged[0]
    rids = sorted(story.report.result.outcomes, key=rid_order)
    return rids[0] if rids else None


def utilisation(story: Story) -> dict[int, float]:
    """Busy share of each rank over the run: the union of its batches' intervals over the end time."""
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for e in story.report.result.events:
        if type(e) is ev.BatchStarted:
            spans[e.rank].append((e.t, e.t + e.duration))
    out = {}
    end = story.end_t or 1.0
    for r in story.ranks:
        busy, cur_s = 0.0, 0.0
        cur_e: float | None = None  # the span being merged: cur_s..cur_e
        for s, f in sorted(spans.get(r, [])):
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    busy += cur_e - cur_s
                cur_s, cur_e = s, f
            else:
                cur_e = max(cur_e, f)
        if cur_e is not None:
            busy += cur_e - cur_s
        out[r] = min(1.0, busy / end) if end > 0 else 0.0
    return out


def replay_command(report: RunReport) -> str:
    """The one line that reruns this run exactly."""
    sc = report.scenario
    src = str(sc.source) if getattr(sc, "source", None) else f"{sc.name}.yaml"
    backend = "" if report.backend == "sim" else f" --backend {report.backend}"
    return f"simharness run {src} --runtime {report.runtime} --seed {sc.seed}{backend}"
