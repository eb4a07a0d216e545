"""``simharness replay``: run corpus cases again and check each behaves as recorded.

The replay is `simharness.explore.corpus`'s; this module owns the verb's arguments, the line
per case, its page, and what it says of the cases that finished before a signal.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from simharness import interrupts
from simharness.commands import common
from simharness.wording import plural

NAME = "replay"
HELP = "replay a corpus case and check it behaves as recorded"
EPILOG = f"Exit codes: 0 as recorded, 1 diverged, 2 bad input, {common.EXIT_CODES_COMMON}"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("case", nargs="+", help="corpus case YAML file(s)")
    p.add_argument("--update", action="store_true",
                   help="record the new trace digest, and the verdict, of cases that still "
                        "behave as recorded")
    p.add_argument("--json", action="store_true", help="print one JSON object per case")
    common.report_argument(p, "replay.json and report.html", "replay-<case>")


def main(args: argparse.Namespace) -> int:
    from simharness.explore.corpus import replay

    common.check_report_target(args.report)
    worst = common.EXIT_PASS
    done: list[tuple[Any, dict[str, Any]]] = []
    for path in args.case:
        # The report page shows each case's run: the replay's own, its events kept for it.
        try:
            r = replay(path, update=args.update, keep_trace=args.report is not None)
        except KeyboardInterrupt as exc:
            stop = interrupts.as_interrupted(exc)
            stop.partial = [r for r, _ in done]  # the cases replayed before the signal
            raise stop from None
        doc = {"case": str(r.path), "runtime": r.runtime, "against": r.against, "status": r.status,
               "expected": r.expected, "got": r.got, "trace_digest": r.digest,
               "recorded_digest": r.expected_digest, "ok": r.ok, "message": r.message,
               "verdict": r.verdict}
        done.append((r, doc))
        if args.json:
            common.print_json(doc)
        else:
            print(_line(r))
        if not r.ok:
            worst = common.EXIT_FAIL
    if args.report is not None:
        common.emit_report(args.report, f"replay-{Path(args.case[0]).stem}", "replay.json",
                           [doc for _, doc in done], page([(r, r.run) for r, _ in done]))
    return worst


def partial(found: list, args: argparse.Namespace) -> None:
    """The cases replayed before the signal, a line each (on stderr: stdout had them already)."""
    for r in found:
        print(_line(r), file=sys.stderr)


def _line(r: Any) -> str:
    arms = r.runtime if r.against is None else f"{r.runtime} against {r.against}"
    line = f"{'ok ' if r.ok else 'DIVERGED'} {r.path} [{r.status}, {arms}]: {r.message}"
    if r.verdict:
        line += f"\n    verdict: {r.verdict['text']}"
    return line


def page(results: list[tuple[Any, Any]]) -> str:
    """The replay's page: a line per case, then each case's run (the run page without its
    parameters, which the line gives)."""
    from html import escape

    from simharness.report.html import run_sections
    from simharness.report.page import outcome
    from simharness.report.page import page as html_page
    from simharness.report.story import build_story

    rows = "".join(
        f'<tr><td class="l"><code>{escape(str(r.path))}</code></td><td class="l">{escape(r.status)}</td>'
        f'<td class="l">{escape(r.runtime)}</td><td class="l {"pass" if r.ok else "fail"}">'
        f'{"ok" if r.ok else "DIVERGED"}</td><td class="l">{escape(r.message)}</td>'
        f'<td class="l">{escape(r.verdict["text"] if r.verdict else "")}</td></tr>'
        for r, _ in results)
    body = [f'<section id="parameters"><h2>Parameters and outcome</h2><p>{plural(len(results), "case")}: '
            f'{outcome("pass" if all(r.ok for r, _ in results) else "fail")}</p><table><tr>'
            f'<th class="l">case</th><th class="l">status</th><th class="l">runtime</th>'
            f'<th class="l">replay</th><th class="l">message</th><th class="l">verdict</th></tr>{rows}'
            f'</table></section>']
    for r, rep in results:
        if rep is None:
            continue
        body.append(f"<h2>{escape(str(r.path))}</h2>")
        story = build_story(rep, ["simharness", "replay", str(r.path)])
        body.extend(run_sections(story, leave_out=("parameters",)))
    return html_page("simharness replay", body)
