"""A verb added from outside simharness: ``simharness fingerprint SCENARIO`` prints the scenario's
name, fingerprint and seed, --set overrides applied.

This one module is all a new verb takes: `tests/sim/test_commands.py` adds it with
`simharness.commands.register` and runs it through `simharness.cli.main`, which builds its
parser, refuses its bad input in one line and gives its exit code like any shipped verb's.
"""

from __future__ import annotations

import argparse

from simharness.commands import common

NAME = "fingerprint"
HELP = "print a scenario's fingerprint"
DESCRIPTION = "Print a scenario's name, fingerprint and seed, with its --set overrides applied."
EPILOG = f"Exit codes: 0 printed, 2 bad input or usage, {common.EXIT_CODES_COMMON}"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario YAML file")
    common.set_argument(p, allow_large=False)
    p.add_argument("--json", action="store_true", help="print {name, fingerprint, seed} on stdout")


def main(args: argparse.Namespace) -> int:
    from simharness.scenario.loader import load_scenario

    sc = load_scenario(args.scenario, args.overrides)
    if args.json:
        common.print_json({"name": sc.name, "fingerprint": sc.fingerprint, "seed": sc.seed})
    else:
        print(f"{sc.name} {sc.fingerprint} seed {sc.seed}")
    return common.EXIT_PASS
