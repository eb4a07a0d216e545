"""The HTML report: one self-contained page per command, pictures embedded, no network.

A page says what the console says (the console text is on it, word for word) and shows what the
console cannot: the forwards table with extra and missing passes coloured, every violation with
the command that replays it, the per-rank timeline, the message diagram of one request, the
wait-for graph of a hang, utilisation per rank; for fuzz, coverage and the cases found. Every
value that comes from a run goes through `html.escape`; the pictures are PNG bytes from
`simharness.report.plots`, inlined as base64 data URIs.
"""

from __future__ import annotations

import base64
import io
from collections import defaultdict
from html import escape
from typing import Any

from simharness.checks.base import rid_order
from simharness.report.story import Story, build_story, replay_command, utilisation, violation_time
from simharness.report.summary import collect_forwards, forward_order
from simharness.run import RunReport
from simharness.wording import plural

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em auto;max-width:1200px;
color:#222;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.15em;border-bottom:1px solid #ddd;
padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ddd;padding:2px 8px;
text-align:right} th{background:#f4f4f4} td.l,th.l{text-align:left}
td.extra{background:#f8c9c9;color:#8b0000;font-weight:bold} td.missing{background:#fde7a8;
font-weight:bold} .pass{color:#137333;font-weight:bold} .fail{color:#b3261e;font-weight:bold}
.violation{border-left:4px solid #b3261e;padding:.3em .8em;margin:.6em 0;background:#fff6f6}
code,pre{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace} pre{background:#f7f7f7;
padding:.6em;overflow-x:auto} img{max-width:100%} .caption{color:#555;font-size:.9em}
dl.params{display:grid;grid-template-columns:max-content auto;gap:2px 12px} dt{font-weight:bold}
dd{margin:0;font-family:ui-monospace,monospace;font-size:12px}
"""


def img(png: bytes, alt: str, ident: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img id="{ident}" alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>\n"
            f"<h1>{escape(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n")


def _outcome(outcome: str) -> str:
    cls = "pass" if outcome == "pass" else "fail"
    return f'<span class="{cls}" id="outcome">{escape(outcome.upper())}</span>'


def console_text(report: RunReport, command: list[str] | None = None) -> str:
    from simharness.report.console import render

    buf = io.StringIO()
    render(report, buf, command=command)
    return buf.getvalue()


def rerun_line(report: RunReport, command: list[str] | None = None) -> str:
    """The line that reruns `report`'s run: its command (its --set overrides kept) when known,
    else one built from the scenario's file, runtime and seed."""
    if command:
        from simharness.report.console import rerun_command

        return rerun_command(report.scenario.seed, command)
    return replay_command(report)


def params_section(report: RunReport, command: list[str] | None = None) -> str:
    sc = report.scenario
    rows = [("scenario", sc.name), ("file", str(sc.source)), ("runtime", report.runtime),
            ("backend", report.backend), ("seed", str(sc.seed)), ("fingerprint", sc.fingerprint),
            ("trace digest", report.trace_digest),
            ("requests", ", ".join(f"{k} {v}" for k, v in _request_counts(report).items())),
            ("simulated time" if report.backend == "sim" else "run time",
             f"{report.result.sim_time_s:.3f} s"),
            ("rerun", rerun_line(report, command))]
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
    return (f'<section id="parameters"><h2>Parameters and outcome</h2><p>Outcome: '
            f'{_outcome(report.outcome)} ({plural(len(report.violations), "violation")})</p>'
            f'<dl class="params">{items}</dl></section>')


def _request_counts(report: RunReport) -> dict[str, int]:
    from simharness.report.summary import request_counts

    return request_counts(report)


def forwards_table(story: Story) -> str:
    """Forwards per (walk, node, rank) per request: extra passes red, missing ones yellow."""
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
    return ('<section id="forwards"><h2>Forwards per request</h2>'
            '<p class="caption">Red: more forwards than the graph implies (extra passes); '
            'yellow: fewer (missing passes).</p><div style="overflow-x:auto">'
            f'<table><tr><th class="l">walk</th><th class="l">node</th><th>rank</th>{head}</tr>'
            + "".join(body) + "</table></div></section>")


def violations_section(story: Story, command: list[str] | None = None) -> str:
    from simharness.report.console import _rids_text, group_violations

    report = story.report
    if not report.violations:
        return ('<section id="violations"><h2>Violations</h2><p class="pass">None: every check '
                'holds.</p></section>')
    rerun = rerun_line(report, command)
    parts = [f'<section id="violations"><h2>Violations ({len(report.violations)})</h2>',
             f"<p>Rerun: <code>{escape(rerun)}</code></p>"]
    first_time: dict[tuple, float] = {}
    for v in report.violations:
        key = (v.check, v.walk, v.node, v.rank)
        first_time.setdefault(key, violation_time(v, story))
    for (check, walk, node, rank, text), rids in group_violations(report.violations):
        who = _rids_text(rids)
        where = " ".join(x for x in (walk or "", f"{node}@{rank}" if node is not None and rank is not None
                                     else (f"rank {rank}" if rank is not None else (node or ""))) if x)
        t = first_time.get((check, walk, node, rank))
        when = f" · first at t={t:.3f} s" if t is not None else ""
        parts.append(f'<div class="violation"><b>{escape(check)}</b> {escape(who)} {escape(where)}'
                     f'<span class="caption">{escape(when)}</span><br>{escape(text)}<br>'
                     f'<span class="caption">rerun: <code>{escape(rerun)}</code></span></div>')
    parts.append("</section>")
    return "".join(parts)


def pictures(story: Story) -> list[str]:
    from simharness.report import plots

    out = [f'<section id="timeline-section"><h2>Timeline</h2>'
           f'<p class="caption">Each bar is one batch on one rank; colour is the request. A red '
           f'outline and triangle mark a pass beyond what the graph implies; a dashed red line '
           f'a hang.</p>{img(plots.timeline(story), "per-rank timeline of forwards", "timeline")}'
           f'</section>']
    png, caption = plots.message_diagram(story)
    out.append(f'<section id="messages-section"><h2>Messages of one request</h2>'
               f'<p class="caption">{escape(caption)}. Ranks are lanes; an arrow is a message from '
               f'the sending forward to the receiving rank; red arrows are loop-backs sent after '
               f'the loop ended.</p>{img(png, "message diagram", "messages")}</section>')
    wf = plots.wait_for_graph(story)
    if wf is not None:
        out.append(f'<section id="waitfor-section"><h2>Wait-for graph</h2><p class="caption">Each '
                   f'blocked node points at the node (or the conductor) it waits for; the label is '
                   f'the missing input.</p>{img(wf, "wait-for graph of the hang", "waitfor")}</section>')
    share = utilisation(story)
    rows = "".join(f'<tr><td class="l">rank {r}</td><td>{share[r] * 100:.1f}%</td></tr>'
                   for r in sorted(share))
    out.append(f'<section id="utilisation"><h2>Utilisation per rank</h2><table><tr><th class="l">'
               f'rank</th><th>busy</th></tr>{rows}</table>'
               + img(plots.utilisation_chart(story), "utilisation per rank", "utilisation-chart")
               + "</section>")
    return out


def run_sections(report: RunReport, command: list[str] | None = None,
                 story: Story | None = None) -> list[str]:
    story = story or build_story(report)
    return [params_section(report, command), forwards_table(story), violations_section(story, command),
            *pictures(story),
            f'<section id="console"><h2>Console output</h2><pre>'
            f'{escape(console_text(report, command))}</pre></section>']


def run_page(report: RunReport, command: list[str] | None = None, story: Story | None = None) -> str:
    sc = report.scenario
    return page(f"simharness · {sc.name} · {report.runtime} · {report.backend} · seed {sc.seed}",
                run_sections(report, command, story))


def compare_page(cmp: Any, command: list[str] | None = None) -> str:
    from simharness.compare import compact
    from simharness.compare import render as render_console

    names = cmp.names
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    rows = []
    for (walk, node), per_arm in cmp.counts.items():
        cells = [compact(arm) for arm in per_arm]
        base = per_arm[0]
        tds = []
        for arm, cell in zip(per_arm, cells, strict=True):
            cls = ""
            if arm != base:
                cls = ' class="extra"' if sum(arm.values()) > sum(base.values()) else ' class="missing"'
            tds.append(f"<td{cls}>{escape(cell)}</td>")
        mark = "≠" if len(set(cells)) > 1 else ""
        rows.append(f'<tr><td class="l">{escape(walk)}</td><td class="l">{escape(node)}</td>'
                    f"{''.join(tds)}<td>{mark}</td></tr>")
    outcome = "".join(f"<td>{_outcome(r.outcome)}</td>" for r in cmp.reports)
    viol = "".join(f"<td>{len(r.violations)}</td>" for r in cmp.reports)
    buf = io.StringIO()
    render_console(cmp, buf)
    body = [f'<section id="parameters"><h2>Parameters and outcome</h2><p>Scenario '
            f'<code>{escape(cmp.scenario.name)}</code>, seed {cmp.scenario.seed}, '
            f'{len(names)} arms: {"<b class=fail>DIFFER</b>" if cmp.differ else "<b class=pass>SAME</b>"}'
            f'</p></section>',
            f'<section id="forwards"><h2>Forwards per request, one column per arm</h2>'
            f'<p class="caption">A cell differing from the first arm ({escape(names[0])}) is red when it '
            f'has more forwards, yellow when fewer.</p><table><tr><th class="l">walk</th>'
            f'<th class="l">node</th>{head}<th></th></tr>{"".join(rows)}'
            f'<tr><td class="l" colspan="2">outcome</td>{outcome}<td></td></tr>'
            f'<tr><td class="l" colspan="2">violations</td>{viol}<td></td></tr></table></section>']
    for r in cmp.reports:
        if r.violations:
            story = build_story(r)
            body.append(f'<h2>Arm {escape(r.runtime)}</h2>')
            body.extend([violations_section(story, command), *pictures(story)])
    body.append(f'<section id="console"><h2>Console output</h2><pre>{escape(buf.getvalue())}</pre></section>')
    return page(f"simharness compare · {cmp.scenario.name} · seed {cmp.scenario.seed}", body)


def confirm_page(sim: RunReport, real: RunReport, a: dict, b: dict, agree: bool, diffs: list[dict],
                 console: str, command: list[str] | None = None) -> str:
    fs = {(f["walk"], f["node"], f["rank"], f["request"]): f["count"] for f in a["forwards"]}
    fr = {(f["walk"], f["node"], f["rank"], f["request"]): f["count"] for f in b["forwards"]}
    rows = []
    for key in sorted(set(fs) | set(fr), key=lambda k: (rid_order(k[3]), k[0], k[1], k[2])):
        x, y = fs.get(key, 0), fr.get(key, 0)
        cls = "" if x == y else (' class="extra"' if y > x else ' class="missing"')
        rows.append(f'<tr><td class="l">{escape(key[3])}</td><td class="l">{escape(key[0])}</td>'
                    f'<td class="l">{escape(key[1])}</td><td>{key[2]}</td><td>{x}</td><td{cls}>{y}</td></tr>')
    verdict = '<b class="pass">AGREE</b>' if agree else '<b class="fail">DISAGREE</b>'
    body = [f'<section id="parameters"><h2>Parameters and outcome</h2><p>Scenario '
            f'<code>{escape(sim.scenario.name)}</code> under {escape(sim.runtime)}, seed '
            f'{sim.scenario.seed}: sim and real {verdict}'
            f' ({plural(len([d for d in diffs if not d.get("note")]), "difference")})</p></section>',
            '<section id="forwards"><h2>Forwards, sim | real</h2><p class="caption">A real count above '
            'the simulation is red, below it yellow.</p><table><tr><th class="l">request</th>'
            '<th class="l">walk</th><th class="l">node</th><th>rank</th><th>sim</th><th>real</th></tr>'
            + "".join(rows) + "</table></section>"]
    for label, rep in (("simulation", sim), ("real processes", real)):
        story = build_story(rep)
        body.append(f"<h2>{escape(label)}</h2>")
        body.extend([violations_section(story, command), *pictures(story)])
    body.append(f'<section id="console"><h2>Console output</h2><pre>{escape(console)}</pre></section>')
    return page(f"simharness confirm · {sim.scenario.name} · seed {sim.scenario.seed}", body)


def fuzz_page(summary: dict[str, Any], console: str) -> str:
    from simharness.explore.report import outcomes_text
    from simharness.report import plots

    s = summary
    failures = "".join(
        f'<tr><td class="l">{escape(f["signature"])}</td><td>{f["count"]}</td><td>{f["nodes"]}</td>'
        f'<td>{f["ranks"]}</td><td class="l">{"known" if f["known"] else "new"}</td>'
        f'<td class="l"><code>{escape(f["case"] or "(not written)")}</code></td>'
        f'<td class="l">{escape(f.get("message", "")[:400])}</td></tr>'
        for f in s["failures"])
    cases = (f'<table><tr><th class="l">signature</th><th>found</th><th>nodes</th><th>ranks</th>'
             f'<th class="l">case</th><th class="l">file</th><th class="l">message</th></tr>{failures}'
             f'</table><p>Replay a case: <code>simharness replay CASE.yaml</code></p>'
             if s["failures"] else '<p class="pass">No failure found.</p>')
    body = [f'<section id="parameters"><h2>Parameters and outcome</h2><p>Runtime '
            f'<code>{escape(s["runtime"])}</code>, seed {s["seed"]}, {plural(s["examples"], "example")} '
            f'({s["examples_per_s"]}/s); outcomes: {escape(outcomes_text(s["outcomes"]))}; '
            f'{_outcome("fail" if s["failures"] else "pass")}</p>'
            f'<p>Reproduce: <code>{escape(s["reproduce"])}</code></p></section>',
            f'<section id="cases"><h2>Cases found</h2>{cases}</section>',
            f'<section id="coverage"><h2>Coverage ({escape(s["coverage"]["reached"])} features)</h2>'
            f'{img(plots.coverage_chart(s["coverage"]), "coverage per feature", "coverage-chart")}</section>',
            f'<section id="console"><h2>Console output</h2><pre>{escape(console)}</pre></section>']
    return page(f"simharness fuzz · {s['runtime']} · seed {s['seed']}", body)


def replay_page(results: list[tuple[Any, RunReport | None]]) -> str:
    rows = "".join(
        f'<tr><td class="l"><code>{escape(str(r.path))}</code></td><td class="l">{escape(r.status)}</td>'
        f'<td class="l">{escape(r.runtime)}</td><td class="l {"pass" if r.ok else "fail"}">'
        f'{"ok" if r.ok else "DIVERGED"}</td><td class="l">{escape(r.message)}</td></tr>'
        for r, _ in results)
    body = [f'<section id="parameters"><h2>Parameters and outcome</h2><p>{plural(len(results), "case")}: '
            f'{_outcome("pass" if all(r.ok for r, _ in results) else "fail")}</p><table><tr>'
            f'<th class="l">case</th><th class="l">status</th><th class="l">runtime</th>'
            f'<th class="l">replay</th><th class="l">message</th></tr>{rows}</table></section>']
    for r, rep in results:
        if rep is None:
            continue
        body.append(f"<h2>{escape(str(r.path))}</h2>")
        body.extend(run_sections(rep, ["simharness", "replay", str(r.path)])[1:])
    return page("simharness replay", body)
