"""The run's HTML page: one self-contained page, pictures embedded, no network.

A page says what the console says (the console text is on it, word for word) and shows what the
console cannot: the forwards table with extra and missing passes coloured, every violation with
the command that replays it, the per-rank timeline, the message diagram of one request, the
wait-for graph of a hang, utilisation per rank. The page is the list of sections in
`simharness.report.sections`, built with the kit in `simharness.report.page`. The pages of
compare, confirm, fuzz and replay are here too for now; each shows the same sections for each
run it holds (`run_sections`).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Collection
from html import escape
from typing import Any

from simharness.checks.base import rid_order
from simharness.report import sections
from simharness.report.page import console, img, outcome, page
from simharness.report.story import Story, build_story
from simharness.run import RunReport
from simharness.wording import plural

#: the run page's sections that compare's and confirm's pages say their own way, for all runs at once
OWN_SECTIONS = ("parameters", "forwards", "console")
console_section = console


def run_sections(story: Story, leave_out: Collection[str] = ()) -> list[str]:
    """The run page's sections for `story` that apply to it, but those whose id is in `leave_out`
    (a page that says them its own way for several runs: parameters, forwards, console)."""
    return [sections.render(s, story) for s in sections.SECTIONS
            if s.id not in leave_out and s.applies(story)]


def run_page(report: RunReport, command: list[str] | None = None, story: Story | None = None) -> str:
    """The page of one run. `command`: the command line that made it (its rerun lines keep its
    flags); `story`: the run's story, when already built (it is the same for any command)."""
    if story is None:
        story = build_story(report, command)
    elif story.command != command:
        story = dataclasses.replace(story, command=command)
    sc = report.scenario
    return page(f"simharness · {sc.name} · {report.runtime} · {report.backend} · seed {sc.seed}",
                run_sections(story))


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
    outcomes = "".join(f"<td>{outcome(r.outcome)}</td>" for r in cmp.reports)
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
            f'<tr><td class="l" colspan="2">outcome</td>{outcomes}<td></td></tr>'
            f'<tr><td class="l" colspan="2">violations</td>{viol}<td></td></tr></table></section>']
    for r in cmp.reports:
        if r.violations:
            body.append(f'<h2>Arm {escape(r.runtime)}</h2>')
            body.extend(run_sections(build_story(r, command), leave_out=OWN_SECTIONS))
    body.append(console(buf.getvalue()))
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
        body.append(f"<h2>{escape(label)}</h2>")
        body.extend(run_sections(build_story(rep, command), leave_out=OWN_SECTIONS))
    body.append(console_section(console))
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
            f'{outcome("fail" if s["failures"] else "pass")}</p>'
            f'<p>Reproduce: <code>{escape(s["reproduce"])}</code></p></section>',
            f'<section id="cases"><h2>Cases found</h2>{cases}</section>',
            f'<section id="coverage"><h2>Coverage ({escape(s["coverage"]["reached"])} features)</h2>'
            f'{img(plots.coverage_chart(s["coverage"]), "coverage per feature", "coverage-chart")}</section>',
            console_section(console)]
    return page(f"simharness fuzz · {s['runtime']} · seed {s['seed']}", body)


def replay_page(results: list[tuple[Any, RunReport | None]]) -> str:
    rows = "".join(
        f'<tr><td class="l"><code>{escape(str(r.path))}</code></td><td class="l">{escape(r.status)}</td>'
        f'<td class="l">{escape(r.runtime)}</td><td class="l {"pass" if r.ok else "fail"}">'
        f'{"ok" if r.ok else "DIVERGED"}</td><td class="l">{escape(r.message)}</td></tr>'
        for r, _ in results)
    body = [f'<section id="parameters"><h2>Parameters and outcome</h2><p>{plural(len(results), "case")}: '
            f'{outcome("pass" if all(r.ok for r, _ in results) else "fail")}</p><table><tr>'
            f'<th class="l">case</th><th class="l">status</th><th class="l">runtime</th>'
            f'<th class="l">replay</th><th class="l">message</th></tr>{rows}</table></section>']
    for r, rep in results:
        if rep is None:
            continue
        body.append(f"<h2>{escape(str(r.path))}</h2>")
        story = build_story(rep, ["simharness", "replay", str(r.path)])
        body.extend(run_sections(story, leave_out=("parameters",)))
    return page("simharness replay", body)
