"""``simharness import-mstar``: write a scenario from an mstar config and the model's own graphs.

The import is `simharness.mstar.build`'s (mstar-ai, imported only when the command runs); this
module owns the verb's arguments, splits ``--set`` between the model's config and the written
scenario, refuses an output it cannot write before the import's work, and checks that what it
writes loads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simharness.commands import common
from simharness.errors import ScenarioError, UsageError
from simharness.wording import plural

NAME = "import-mstar"
HELP = "write a scenario from an mstar config and the model's own graphs"
DESCRIPTION = ("Build a scenario from mstar's own model code: the config's model, created "
               "without weights, gives its walks, partitions and streams; the config gives "
               "the node groups. Request kinds and dynamic-loop lengths, which the model "
               "decides at run time, are marked defaults to edit.")
EPILOG = ("CONFIG is a config file or the name of a config shipped with mstar-ai "
          "(e.g. bagel_cfg_parallel). Exit codes: 0 written, 2 bad input or usage, "
          f"{common.EXIT_CODES_COMMON}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="mstar config YAML, or the name of one in mstar's default_configs")
    p.add_argument("-o", "--output", metavar="SCENARIO.yaml",
                   help="where to write the scenario (default: <CONFIG's name>.yaml in the "
                        "current directory; '-' prints it to stdout)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="model.FIELD=VALUE sets a field of the model's config class (e.g. "
                        "model.num_timesteps=11); any other key sets a key of the written "
                        "scenario (e.g. workload[0].count=10); repeatable")
    p.add_argument("--force", action="store_true", help="replace an existing output file")


def main(args: argparse.Namespace) -> int:
    from simharness.fileio import write_text
    from simharness.mstar.build import import_config
    from simharness.scenario.loader import attribute, parse_scenario
    from simharness.scenario.overrides import apply_overrides
    from simharness.scenario.reading import read_value

    options: dict[str, object] = {}
    scenario_sets: list[str] = []
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--set {item}: expected KEY=VALUE")
        key = key.strip()
        if key.startswith("model."):
            # read as a scenario's --set value is: the same YAML limits, one line on an error
            options[key[len("model."):]] = read_value(value, key) if value.strip() else ""
        else:
            scenario_sets.append(item)
    target = args.output or f"{Path(args.config).stem}.yaml"
    if target != "-":
        # before the import's work: a path that cannot be written is refused now, not after it
        common.check_output(target, "-o")
        if Path(target).exists() and not args.force:
            raise UsageError(f"{target} exists; pass --force to replace it (nothing was written)")
    try:
        imported = import_config(args.config, options)
    except ScenarioError as err:
        raise (err.with_source("--set") if err.path.startswith("model.") else err) from None
    raw, applied = apply_overrides(imported.raw, scenario_sets)
    imported.raw = raw
    # What is written must load: check it here, not at the user's first run.
    try:
        parse_scenario(raw, source=target, default_name=Path(target).stem,
                       base_dir=Path(target).parent if target != "-" else Path.cwd())
    except ScenarioError as err:
        raise attribute(err, applied).with_source(f"{target} (as imported)") from None
    text = imported.yaml_text()
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    if target == "-":
        sys.stdout.write(text)
    else:
        common.writing(Path(target), "-o", lambda: write_text(target, text))
        print(f"wrote {target}: model {imported.model!r}, {plural(len(raw['graph']['walks']), 'walk')}, "
              f"{plural(imported.worker_graphs, 'worker graph')}"
              + (f"; defaults to edit: {', '.join(imported.defaulted)}" if imported.defaulted else ""),
              file=sys.stderr)
    return common.EXIT_PASS
