"""The sections of a run's page: each one a `Section`, the page a list of them (`SECTIONS`).

A section has an ``id`` (its element's id), a ``title`` (its heading), ``applies(story)``
(whether the run has anything for it: the wait-for graph only for a hang) and ``html(story)``
(what goes under the heading). Everything a section draws comes from the run's `Story`, so a
picture cannot disagree with a verdict; ``story.command`` is the command line that made the run,
for the rerun lines. A new section is one new file with one class, added to the page with
`register` (a section of another package's, or of a test) or listed in `SECTIONS` (a shipped
one). The run page shows every section; the pages of compare, confirm and replay show the ones
about a run's events for each run they hold (`simharness.report.html.run_sections`).
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Callable
from html import escape
from typing import Any, Protocol

from simharness.checks.base import rid_order
from simharness.report.page import img, outcome
from simharness.report.story import Story, replay_command, utilisation, violation_time
from simharness.report.summary import collect_forwards, forward_order, request_counts
from simharness.run import RunReport
from simharness.wording import plural


class Section(Protocol):
    """One section of a run's page."""

    #: the section element's id, unique on a page
    id: str

    @property
    def title(self) -> str | Callable[[Story], str]:
        """Its heading; a function of the story where the heading counts something."""
        ...

    def applies(self, story: Story) -> bool:
        """Whether the run has anything to show here (a section that does not apply is left out)."""
        ...

    def html(self, story: Story) -> str:
        """What goes under the heading."""
        ...


def render(section: Section, story: Story) -> str:
    """`section` as a ``<section>`` element: its heading, then its html."""
    title = section.title(story) if callable(section.title) else section.title
    return f'<section id="{escape(section.id)}"><h2>{escape(title)}</h2>{section.html(story)}</section>'


def rerun_line(report: RunReport, command: list[str] | None = None) -> str:
    """The line that reruns `report`'s run: its command (its --set overrides kept) when known,
    else one built from the scenario's file, runtime and seed."""
    if command:
        from simharness.report.console import rerun_command

        return rerun_command(report.scenario.seed, command)
    return replay_command(report)


def console_text(report: RunReport, command: list[str] | None = None) -> str:
    from simharness.report.console import render as render_console

    buf = io.StringIO()
    render_console(report, buf, command=command)
    return buf.getvalue()


class Parameters:
    """The run's scenario, runtime, seed, fingerprint and digest, its outcome and its rerun line."""

    id = "parameters"
    title = "Parameters and outcome"

    def applies(self, story: Story) -> bool:
        return True

    def html(self, story: Story) -> str:
        report = story.report
        sc = report.scenario
        rows = [("scenario", sc.name), ("file", str(sc.source)), ("runtime", report.runtime),
                ("backend", report.backend), ("seed", str(sc.seed)), ("fingerprint", sc.fingerprint),
                ("trace digest", report.trace_digest),
                ("requests", ", ".join(f"{k} {v}" for k, v in request_counts(report).items())),
                ("simulated time" if report.backend == "sim" else "run time",
                 f"{report.result.sim_time_s:.3f} s"),
                ("rerun", rerun_line(report, story.command))]
        items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
        return (f'<p>Outcome: {outcome(report.outcome)} ({plural(len(report.violations), "violation")})'
                f'</p><dl class="params">{items}</dl>')


class Forwards:
    """Forwards per (walk, node, rank) per request: extra passes red, missing ones yellow."""

    id = "forwards"
    title = "Forwards per request"

    def applies(self, story: Story) -> bool:
        return True

    def html(self, story: Story) -> str:
        report = story.report
        counts = collect_forwards(report.result.events)
        extra_keys: set[tuple] = set()
        for i, f in story.forwards:
            if i in story.extra:
                extra_keys.add((f.walk, f.node, f.rank, f.rid))
        expected: dict[tuple, int] = {}
        for i, f in story.forwards:
            expected[(f.walk, f.node, f.rank, f.rid)] = story.pass_of[i][1]
        rows: dict[tuple[str, str, int], dict[str, int]] = defaultdict(dict)
        for (walk, node, rank, rid), c in counts.items():
            rows[(walk, node, rank)][rid] = len(c)
        for (walk, node, rank, rid) in story.missing:
            rows[(walk, node, rank)].setdefault(rid, 0)
        rids = sorted({r for row in rows.values() for r in row} | set(report.result.outcomes), key=rid_order)
        order = forward_order(report.scenario)
        keys = sorted(rows, key=lambda k: order((k[0], k[1], k[2], "")))
        head = "".join(f"<th>{escape(r)}</th>" for r in rids)
        body = []
        for k in keys:
            cells = []
            for rid in rids:
                n = rows[k].get(rid)
                key = (*k, rid)
                if key in extra_keys:
                    cls, tip = "extra", f"extra: expected {expected.get(key, '?')}"
                elif key in story.missing:
                    cls, tip = "missing", f"missing {story.missing[key]}"
                else:
                    cls, tip = "", ""
                attr = f' class="{cls}" title="{escape(tip)}"' if cls else ""
                cells.append(f"<td{attr}>{'-' if n is None else n}</td>")
            body.append(f'<tr><td class="l">{escape(k[0])}</td><td class="l">{escape(k[1])}</td>'
                        f"<td>{k[2]}</td>{''.join(cells)}</tr>")
        ends = report.result.outcomes
        if any(ends.get(rid, "completed") != "completed" for rid in rids):
            # a request that did not complete has passes missing from its column: mark it
            marks = "".join(
                "<td>ok</td>" if ends.get(rid) == "completed" else
                f'<td class="missing" title="passes after this point never ran">'
                f'{escape(ends.get(rid, "-"))}</td>' for rid in rids)
            body.append(f'<tr><td class="l" colspan="3"><b>request ended</b></td>{marks}</tr>')
        return ('<p class="caption">Red: more forwards than the graph implies (extra passes); '
                'yellow: fewer (missing passes), and a request that hung or timed out (its passes '
                'after that never ran).</p><div style="overflow-x:auto">'
                f'<table><tr><th class="l">walk</th><th class="l">node</th><th>rank</th>{head}</tr>'
                + "".join(body) + "</table></div>")


class Violations:
    """Every violation, grouped as the console groups them, when it first happened, and the
    command that reruns it."""

    id = "violations"

    def title(self, story: Story) -> str:
        n = len(story.report.violations)
        return f"Violations ({n})" if n else "Violations"

    def applies(self, story: Story) -> bool:
        return True

    def html(self, story: Story) -> str:
        from simharness.report.console import _rids_text, fold_key, group_violations, where_text

        report = story.report
        if not report.violations:
            return '<p class="pass">None: every check holds.</p>'
        from simharness.checks import causes_and_symptoms

        rerun = rerun_line(report, story.command)
        parts = [f"<p>Rerun: <code>{escape(rerun)}</code></p>"]
        trace = story.trace_file
        if trace:
            parts.append(
                f'<p>Trace: <a href="{escape(trace)}">{escape(trace)}</a>, written beside this page. '
                f'Open it at <a href="https://ui.perfetto.dev">ui.perfetto.dev</a> ("Open trace '
                f'file"): one process per rank (<code>rank N</code>), a track per node, and each '
                f'violation an instant on its rank\'s <code>violations</code> track at the time '
                f'given below. Or query it with Perfetto\'s <code>trace_processor</code>: '
                f'<code>SELECT ts, name FROM slice WHERE name LIKE \'violation:%\' ORDER BY ts</code>.</p>')
        causes, effects = causes_and_symptoms(report.violations)
        # when each card's violations first happened: of the very violations the card folds
        first_time: dict[tuple, float] = {}
        for v in report.violations:
            key = fold_key(v)
            t = violation_time(v, story)
            if t is not None and (key not in first_time or t < first_time[key]):
                first_time[key] = t

        headlines = {fold_key(v): v.headline for v in report.violations if v.headline}

        def cards(found: list[Any]) -> None:
            for (check, walk, node, rank, text), rids in group_violations(found):
                who = _rids_text(rids)
                where = where_text(walk, node, rank)
                t = first_time.get((check, walk, node, rank, text))
                track = f"rank {rank} › violations" if rank is not None else "run › violations"
                when = (f" · first at t={t:.3f} s (trace: {track}, ts {t * 1e6:.0f} µs)"
                        if t is not None else "")
                head = headlines.get((check, walk, node, rank, text))
                body = (f'{escape(head)}<details><summary>the whole explanation</summary>'
                        f'{escape(text)}</details>' if head else escape(text))
                parts.append(f'<div class="violation"><b>{escape(check)}</b> {escape(who)} {escape(where)}'
                             f'<span class="caption">{escape(when)}</span><br>{body}</div>')

        cards(causes)
        if effects:
            parts.append(f'<p>Symptoms, explained by the violations above ({len(effects)}):</p>'
                         '<div style="margin-left:1.5em">')
            cards(effects)
            parts.append("</div>")
        return "".join(parts)


class Timeline:
    """One bar per batch per rank, coloured by request; extra passes and hangs marked."""

    id = "timeline-section"
    title = "Timeline"

    def applies(self, story: Story) -> bool:
        return True

    def html(self, story: Story) -> str:
        from simharness.report import plots

        return (f'<p class="caption">Each bar is one batch on one rank; colour is the request. A red '
                f'outline and triangle mark a pass beyond what the graph implies; a dashed red line '
                f'a hang.</p>{img(plots.timeline(story), "per-rank timeline of forwards", "timeline")}')


class Messages:
    """The messages between ranks of one request, as a sequence diagram."""

    id = "messages-section"
    title = "Messages of one request"

    def applies(self, story: Story) -> bool:
        return True

    def html(self, story: Story) -> str:
        from simharness.report import plots

        svg, caption = plots.message_diagram(story)
        return (f'<p class="caption">{escape(caption)}. Ranks are lanes; an arrow is a message from '
                f'the sending forward to the receiving rank; red arrows are loop-backs sent after '
                f'the loop ended.</p>{img(svg, "message diagram", "messages")}')


class WaitFor:
    """The first hang's wait-for graph: who each blocked node waits for."""

    id = "waitfor-section"
    title = "Wait-for graph"

    def applies(self, story: Story) -> bool:
        return bool(story.stalls)

    def html(self, story: Story) -> str:
        from simharness.report import plots

        svg = plots.wait_for_graph(story)
        assert svg is not None  # a hang, so a graph (`applies`)
        return (f'<p class="caption">Each blocked node points at the node (or the conductor) it waits '
                f'for; the label is the missing input.</p>'
                f'{img(svg, "wait-for graph of the hang", "waitfor")}')


class Utilisation:
    """The share of the run each rank spent busy."""

    id = "utilisation"
    title = "Utilisation per rank"

    def applies(self, story: Story) -> bool:
        return True

    def html(self, story: Story) -> str:
        from simharness.report import plots

        share = utilisation(story)
        rows = "".join(f'<tr><td class="l">rank {r}</td><td>{share[r] * 100:.1f}%</td></tr>'
                       for r in sorted(share))
        return (f'<table><tr><th class="l">rank</th><th>busy</th></tr>{rows}</table>'
                + img(plots.utilisation_chart(story), "utilisation per rank", "utilisation-chart"))


class Console:
    """What ``simharness run`` printed for the run, word for word."""

    id = "console"
    title = "Console output"

    def applies(self, story: Story) -> bool:
        return True

    def html(self, story: Story) -> str:
        return f"<pre>{escape(console_text(story.report, story.command))}</pre>"


#: A run's page, in order.
SECTIONS: list[Section] = [Parameters(), Forwards(), Violations(), Timeline(), Messages(), WaitFor(),
                           Utilisation(), Console()]


def register(section: Section, before: str | None = "console") -> None:
    """Add `section` to the run page, before the section whose id is `before` (None: last)."""
    if any(s.id == section.id for s in SECTIONS):
        raise ValueError(f"the run page already has a section {section.id!r}")
    at = next((i for i, s in enumerate(SECTIONS) if s.id == before), len(SECTIONS))
    SECTIONS.insert(at, section)


def unregister(ident: str) -> None:
    """Take the section whose id is `ident` off the run page."""
    SECTIONS[:] = [s for s in SECTIONS if s.id != ident]
