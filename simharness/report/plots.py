"""The report's pictures, drawn by matplotlib (and networkx for the wait-for graph).

Each function takes a `Story` (or plain data) and returns an SVG document (text), which the page
inlines: a browser zooms vectors, and the page stays one self-contained file. matplotlib is imported here
and only here, inside the functions, so that no command pays for it unless a report is asked
for. Figures are built on the object API (`Figure` + the Agg canvas), never pyplot: no global
state, no display needed.
"""

from __future__ import annotations

import io
from collections import defaultdict
from typing import Any

from simharness.checks.base import rid_order
from simharness.report.story import Message, Story, chosen_request, utilisation
from simharness.report.summary import node_order
from simharness.wording import plural

RED = "#d62728"
#: a delivery a searched schedule moved: in no request's colour
MOVED = "#6a3d9a"
DPI = 100


def _figure(w: float, h: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _svg(fig: Any, salt: str) -> str:
    """The figure as SVG text: text kept as text (a browser's search and zoom reach it), no
    date in the metadata and ids salted per picture, so the same run draws the same bytes and
    two pictures inlined in one page never share an id."""
    from matplotlib import rc_context

    buf = io.StringIO()
    with rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return buf.getvalue()


def _time_label(story: Story) -> str:
    """The time axis of every plot of one run: simulated time, or the wall time of real processes."""
    return "simulated time (s)" if story.report.backend == "sim" else "time (s)"


def _colours(rids: list[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    # the reds are kept for what went wrong (extra passes, hangs): no request is drawn in one
    if len(rids) > 9:
        cmap, skip = colormaps["tab20"], {6, 7}
    else:
        cmap, skip = colormaps["tab10"], {3}
    palette = [cmap(i) for i in range(cmap.N) if i not in skip]
    return {rid: palette[i % len(palette)] for i, rid in enumerate(rids)}


def lanes(story: Story) -> list[tuple[int, str]]:
    """(rank, node) rows of the timeline: rank by rank, nodes in the scenario's order."""
    place = node_order(story.report.scenario)
    first_walk: dict[tuple[int, str], str] = {}
    for _, f in story.forwards:
        first_walk.setdefault((f.rank, f.node), f.walk)
    return sorted(first_walk, key=lambda k: (k[0], place(first_walk[k], k[1]), k[1]))


def timeline(story: Story) -> str:
    """Forwards by (rank, node) over time, coloured by request; extra passes and hangs marked."""
    rows = lanes(story)
    rids = sorted({f.rid for _, f in story.forwards}, key=rid_order)
    colour = _colours(rids)
    fig = _figure(12, 1.2 + 0.42 * max(len(rows), 1))
    ax = fig.add_subplot()
    y_of = {lane: i for i, lane in enumerate(rows)}
    bars: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    extra_pts: list[tuple[float, float, int]] = []
    for i, f in story.forwards:
        y = y_of[(f.rank, f.node)]
        bars[(y, f.rid)].append((f.start, max(f.t - f.start, 1e-6)))
        if i in story.extra:
            extra_pts.append((f.start, f.t - f.start, y))
    for (y, rid), spans in bars.items():
        ax.broken_barh(spans, (y - 0.35, 0.7), facecolors=colour[rid], linewidth=0)
    if extra_pts:
        for s, d, y in extra_pts:
            ax.broken_barh([(s, max(d, 1e-6))], (y - 0.45, 0.9), facecolors="none",
                           edgecolors=RED, linewidth=1.6)
        # every extra pass gets its own mark, on its own row
        ax.scatter([s + d / 2 for s, d, _ in extra_pts], [y - 0.55 for _, _, y in extra_pts],
                   marker="v", s=46, color=RED, zorder=5,
                   label=f"extra pass, beyond what the graph implies ({len(extra_pts)})")
    from matplotlib.lines import Line2D

    hangs = []
    for st in story.stalls:
        ax.axvline(st.t, color=RED, linestyle="--", linewidth=1.4)
        hangs.append(st)
    ax.set_yticks(range(len(rows)), [f"{node} @ rank {r}" for r, node in rows])
    ax.set_ylim(len(rows) - 0.4, -1.0)
    ax.set_xlabel(_time_label(story))
    ax.set_title("forwards by node and rank, coloured by request")
    ax.grid(axis="x", alpha=0.3)
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(color=colour[r], label=r) for r in rids[:20]]
    if extra_pts:
        handles.append(ax.get_legend_handles_labels()[0][-1])
    # a hang is named in the legend, not written on the plot, where labels would collide
    for st in hangs[:8]:
        handles.append(Line2D([], [], color=RED, linestyle="--",
                              label=f"{st.rid} hung at t={st.t:.3f} s ({st.reason})"))
    if len(hangs) > 8:
        handles.append(Line2D([], [], color=RED, linestyle="--", label=f"... {len(hangs) - 8} more hangs"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return _svg(fig, "timeline")


def message_window(story: Story, rid: str) -> tuple[list[Message], float, float, int]:
    """The messages of `rid` to draw, the time window, and how many earlier ones are left out.

    A long loop sends hundreds of messages; the picture shows the end of the story: the last
    iterations before the first stray loop-back (or the hang) and everything after it.
    """
    msgs = sorted((m for m in story.messages if m.rid == rid), key=lambda m: m.t_send)
    if not msgs:
        # no message between ranks: the request's forwards, and what arrived late, set the window
        times = ([t for _, f in story.forwards if f.rid == rid for t in (f.start, f.t)]
                 + [t for t, _r, r, *_ in story.parked + story.dropped if r == rid]
                 + [d.at_s for d in story.report.scenario.schedule.deliveries])
        return [], min(times, default=0.0), max(times, default=1.0), 0
    keep = 48
    first = next((i for i, m in enumerate(msgs) if m.stray), None)
    if first is not None:
        start = max(0, first - 18)
    else:
        start = max(0, len(msgs) - keep)
    shown = msgs[start:]
    t0 = shown[0].t_send
    stall_t = max((s.t for s in story.stalls if s.rid == rid), default=None)
    t1 = max([m.t_recv or m.t_send for m in shown] + [m.t_send for m in shown])
    ends = [f.t for _, f in story.forwards if f.rid == rid and f.start >= t0]
    if ends:
        t1 = max(t1, max(ends))
    if stall_t is not None:
        t1 = max(t1, stall_t)
    # inputs parked or dropped for this request are part of its story, however late
    late = [t for t, _r, r, *_ in story.parked + story.dropped if r == rid]
    if late:
        t1 = max(t1, max(late))
    return shown, t0, t1, start


def message_diagram(story: Story, rid: str | None = None) -> tuple[str, str]:
    """Ranks as lanes, messages of one request as arrows; strays red; parked, dropped marked.

    Returns the PNG and a one-line caption saying what window it shows.
    """
    rid = rid or chosen_request(story)
    fig = _figure(12, 1.6 + 1.1 * max(len(story.ranks), 1))
    ax = fig.add_subplot()
    if rid is None:
        ax.text(0.5, 0.5, "no request", ha="center")
        return _svg(fig, "message_diagram"), "no request"
    shown, t0, t1, skipped = message_window(story, rid)
    span = max(t1 - t0, 1e-6)
    pad = span * 0.02
    # the request's forwards, thin bars on each rank's lane, labelled by node
    for i, f in story.forwards:
        if f.rid != rid or f.t < t0 - pad or f.start > t1 + pad:
            continue
        extra = i in story.extra
        ax.broken_barh([(f.start, max(f.t - f.start, 1e-6))], (f.rank - 0.12, 0.24),
                       facecolors=RED if extra else "#9ecae1",
                       edgecolors=RED if extra else "#3182bd", linewidth=0.6)
        if extra:
            ax.text(f.start, f.rank + 0.3, f"extra {f.node} #{f.counter}", color=RED, fontsize=7)
    seen_sib = False
    for m in shown:
        colour = RED if m.stray else "#444444"
        lw = 1.8 if m.stray else 0.8
        if m.kind == "sibling":
            seen_sib = True
            ax.annotate("", xy=(m.t_send + span * 0.012, m.src_rank - 0.02),
                        xytext=(m.t_send, m.src_rank - 0.02),
                        arrowprops={"arrowstyle": "->", "color": colour, "lw": lw,
                                    "connectionstyle": "arc3,rad=-1.2"})
        elif m.t_recv is not None:
            ax.annotate("", xy=(m.t_recv, m.dst_rank), xytext=(m.t_send, m.src_rank),
                        arrowprops={"arrowstyle": "->", "color": colour, "lw": lw})
        else:
            ax.plot([m.t_send], [m.src_rank], marker="x", color="black")
        if m.stray:
            y = m.dst_rank if m.kind == "peer" else m.src_rank - 0.35
            ax.text((m.t_recv or m.t_send) + span * 0.005, y - 0.12,
                    f"{m.label} → {m.signals[0][1]} after loop end", color=RED, fontsize=7)
    parked = [(t, r) for t, r, p_rid, _n, _wg in story.parked if p_rid == rid]
    dropped = [(t, r) for t, r, d_rid, _n, _why in story.dropped if d_rid == rid]
    if parked:
        ax.scatter(*zip(*parked, strict=True), marker="s", s=40, color="#ff7f0e", zorder=6,
                   label="input parked (its loop is done)")
    if dropped:
        ax.scatter(*zip(*dropped, strict=True), marker="X", s=50, color="black", zorder=6,
                   label="input dropped")
    from matplotlib.lines import Line2D

    # deliveries a searched schedule moved (``schedule.deliveries``): where each arrived, late
    names = {-1: "conductor", -2: "client"}
    moved = [d for d in story.report.scenario.schedule.deliveries
             if d.dst >= 0 and t0 - pad <= d.at_s <= t1 + pad]
    for d in moved:
        # just above the lane, so that what happened on arrival (a parked input) stays visible;
        # the label on the side with room
        ax.scatter([d.at_s], [d.dst - 0.22], marker="D", s=30, color=MOVED, zorder=7)
        right = d.at_s > t0 + 0.6 * span
        ax.text(d.at_s + (-1 if right else 1) * span * 0.008, d.dst - 0.22,
                f"{d.kind} #{d.nth} from {names.get(d.src, f'rank {d.src}')}, held to here",
                color=MOVED, fontsize=7, va="center", ha="right" if right else "left")
    hang_handles = []
    if moved:
        hang_handles.append(Line2D([], [], color=MOVED, marker="D", linestyle="",
                                   label="a delivery the schedule held (schedule.deliveries)"))
    for st in story.stalls:
        if st.rid == rid:
            # named in the legend: a label at the plot's edge would run into the legend
            ax.axvline(st.t, color=RED, linestyle="--")
            hang_handles.append(Line2D([], [], color=RED, linestyle="--",
                                       label=f"{rid} hung at t={st.t:.3f} s ({st.reason})"))

    handles: list[Any] = [Line2D([], [], color="#444444", label="message (arrow: sender → receiver)"),
               Line2D([], [], color=RED, lw=1.8, label="loop-back sent after the loop's end")]
    if seen_sib:
        handles.append(Line2D([], [], color="#444444", marker=r"$\curvearrowright$", linestyle="",
                              label="hand-over to a sibling worker graph (same rank)"))
    from matplotlib.patches import Patch

    handles.append(Patch(color="#9ecae1", label=f"a forward of {rid}"))
    if any(i in story.extra for i, f in story.forwards if f.rid == rid):
        handles.append(Patch(color=RED, label="a forward beyond what the graph implies"))
    handles += [h for h in ax.get_legend_handles_labels()[0] if h not in handles]
    handles += hang_handles
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_yticks(story.ranks, [f"rank {r}" for r in story.ranks])
    ax.set_ylim(max(story.ranks, default=0) + 0.7, -0.8)
    ax.set_xlim(t0 - pad, t1 + pad)
    ax.set_xlabel(_time_label(story))
    ax.set_title(f"messages of request {rid}")
    ax.grid(axis="x", alpha=0.3)
    caption = (f"request {rid}: {plural(len(shown), 'message')} from t={t0:.3f} s to t={t1:.3f} s"
               + (f" ({plural(skipped, 'earlier message')} not drawn)" if skipped else ""))
    return _svg(fig, "message_diagram"), caption


def wait_for_graph(story: Story) -> str | None:
    """The first hang's wait-for graph: each blocked node points at who it waits for, each edge
    naming every input it waits for from there; node names in boxes that fit them, colours in a
    legend."""
    if not story.stalls:
        return None
    import networkx as nx
    from matplotlib.patches import Patch

    st = story.stalls[0]
    facts = story.report.scenario.walk_facts.get(st.walk)
    g = nx.DiGraph()
    blocked_at = {b.node: f"{b.node}@{b.rank}" for b in st.blocked}
    names: dict[tuple[str, str], list[str]] = defaultdict(list)
    for b in st.blocked:
        me = f"{b.node}@{b.rank}"
        g.add_node(me, kind="gated" if b.gate else "blocked")
        waits: list[tuple[str, str]] = []
        if b.gate:
            waits += [("conductor (walk start)", name) for name in (b.gate_waits or ("?",))]
        for name in b.missing:
            prods = facts.producers(name, b.node) if facts else []
            waits += [(blocked_at.get(p, p), name) for p in prods or ["nobody"]]
        for other, name in waits:
            g.add_edge(me, other)
            if name not in names[(me, other)]:
                names[(me, other)].append(name)  # one edge, every input it stands for
    fig = _figure(9, 5.5)
    ax = fig.add_subplot()
    ax.set_axis_off()
    if g.number_of_nodes() == 0:
        ax.text(0.5, 0.5, "no node holds or waits for anything", ha="center")
        return _svg(fig, "wait_for_graph")
    pos = nx.circular_layout(sorted(g.nodes)) if g.number_of_nodes() > 2 else nx.spring_layout(g, seed=0)
    fills = {"gated": "#fdd0a2", "blocked": "#fee391"}
    other = "#deebf7"
    nx.draw_networkx_edges(g, pos, ax=ax, node_size=3200, arrowsize=16, edge_color="#555555",
                           connectionstyle="arc3,rad=0.08")
    for n in g.nodes:
        x, y = pos[n]
        ax.text(x, y, n, ha="center", va="center", fontsize=8, zorder=3,
                bbox={"boxstyle": "round,pad=0.4", "fc": fills.get(g.nodes[n].get("kind"), other),
                      "ec": "#777777"})
    nx.draw_networkx_edge_labels(g, pos, ax=ax, label_pos=0.35, font_size=7,
                                 edge_labels={e: ", ".join(v) for e, v in names.items()},
                                 bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                                       "alpha": 0.85})
    ax.margins(0.18)
    ax.legend(handles=[Patch(fc=fills["gated"], ec="#777777", label="held by its engine gate"),
                       Patch(fc=fills["blocked"], ec="#777777", label="waits for an input"),
                       Patch(fc=other, ec="#777777", label="what it waits for (not blocked)")],
              loc="lower left", fontsize=8, frameon=False)
    ax.set_title(f"wait-for graph: {st.rid} in {st.walk} (pass {st.pass_no}) at t={st.t:.3f} s; "
                 f"an arrow points at whom a node waits for, labelled with the inputs")
    return _svg(fig, "wait_for_graph")


def utilisation_chart(story: Story) -> str:
    share = utilisation(story)
    fig = _figure(6, 0.8 + 0.45 * max(len(share), 1))
    ax = fig.add_subplot()
    ranks = sorted(share)
    ax.barh([f"rank {r}" for r in ranks], [share[r] * 100 for r in ranks], color="#3182bd")
    for i, r in enumerate(ranks):
        ax.text(share[r] * 100 + 1, i, f"{share[r] * 100:.0f}%", va="center", fontsize=8)
    ax.set_xlim(0, 110)
    ax.invert_yaxis()
    ax.set_xlabel("busy share of the run (%)")
    ax.set_title("utilisation per rank")
    return _svg(fig, "utilisation_chart")


def coverage_chart(coverage: dict[str, Any]) -> str:
    """Fuzz coverage: how many examples reached each feature of each area (grey: never)."""
    items = [(area, name, int(v)) for area, feats in coverage.items() if isinstance(feats, dict)
             for name, v in feats.items()]
    fig = _figure(8, 0.6 + 0.22 * max(len(items), 1))
    ax = fig.add_subplot()
    labels = [f"{area}: {name}" for area, name, _ in items]
    top = max([n for _, _, n in items] + [1])
    ax.barh(labels, [n if n else top * 0.02 for _, _, n in items],
            color=["#31a354" if n else "#d9d9d9" for _, _, n in items])
    for i, (_a, _n, n) in enumerate(items):
        ax.text((n or top * 0.02) + top * 0.01, i, str(n) if n else "never", va="center", fontsize=7)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("examples that reached the feature")
    ax.set_title("coverage per feature")
    return _svg(fig, "coverage_chart")
