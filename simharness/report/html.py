"""The run's HTML page: one self-contained page, pictures embedded, no network.

A page says what the console says (the console text is on it, word for word) and shows what the
console cannot: the forwards table with extra and missing passes coloured, every violation with
the command that replays it, the per-rank timeline, the message diagram of one request, the
wait-for graph of a hang, utilisation per rank. The page is the list of sections in
`simharness.report.sections`, built with the kit in `simharness.report.page`. Every other
command's page lives with its command (`simharness.commands`) and shows the same sections for
each run it holds (`run_sections`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from simharness.report import sections
from simharness.report.page import page
from simharness.report.story import Story, build_story
from simharness.run import RunReport


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
