"""``simharness runtimes``: the runtimes under test, one line each (`simharness.runtime.registry`)."""

from __future__ import annotations

import argparse

from simharness.commands import common

NAME = "runtimes"
HELP = "list the runtimes under test"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """No arguments."""


def main(args: argparse.Namespace) -> int:
    from simharness.runtime import registry

    for name, target in sorted(registry.available().items()):
        print(f"{name:<20} {registry.describe(target)}")
    return common.EXIT_PASS
