"""``simharness layout``: how a scenario's walks split into worker graphs, and where they run."""

from __future__ import annotations

import argparse
import sys

from simharness.commands import common
from simharness.wording import plural

NAME = "layout"
HELP = "show how a scenario's walks split into worker graphs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario YAML file")
    common.set_argument(p)


def main(args: argparse.Namespace) -> int:
    from simharness.placement.layout import Layout
    from simharness.scenario.loader import load_scenario

    scenario = load_scenario(args.scenario, args.overrides, allow_large=args.allow_large)
    for note in scenario.notes:  # what run says about the layout, layout says too
        print(f"note: {note}", file=sys.stderr)
    print(f"{scenario.name}: {plural(len(scenario.walks), 'walk')} on "
          f"{plural(scenario.placement.num_ranks, 'rank')}")
    for line in Layout.build(scenario).describe():
        print(line)
    return common.EXIT_PASS
