"""A section of the run page added from outside simharness: the busiest rank.

This one module is all a new section takes: `tests/sim/test_report_sections.py` adds it with
`simharness.report.sections.register` and finds it on the page ``simharness run --report``
writes.
"""

from __future__ import annotations

from simharness.report.story import Story, utilisation


class Busiest:
    """Which rank was busiest, and for how much of the run."""

    id = "busiest"
    title = "Busiest rank"

    def applies(self, story: Story) -> bool:
        return len(story.ranks) > 1  # one rank is busiest by default: nothing to say

    def html(self, story: Story) -> str:
        share = utilisation(story)
        rank = max(share, key=lambda r: (share[r], -r))
        return f'<p id="busiest-rank">rank {rank}: busy {share[rank] * 100:.1f}% of the run</p>'
