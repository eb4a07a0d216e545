"""``simharness export-test``: write a corpus case as a standalone pytest module in mstar's terms.

The recording and the module's text are `simharness.mstar.export`'s (mstar-ai is imported only
when the command runs); this module owns the verb's arguments, refuses an output it must not
write before the work (a missing folder, a file that exists without ``--force``), writes the
module atomically and says what it will do on the installed mstar-ai.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simharness.commands import common
from simharness.errors import UsageError

NAME = "export-test"
HELP = "write a corpus case as a standalone pytest module that drives mstar's own code"
DESCRIPTION = ("Write CASE as one pytest module that needs only pytest and mstar-ai (torch too for "
               "a stream's). A finding of mstar's graph objects: the case is replayed under the "
               "mstar-graph runtime, recording every call into them; the module builds the walks "
               "with mstar's graph classes and division, replays the calls and asserts what a "
               "correct graph runtime answers at each completion. A finding of mstar's Worker: "
               "the case is run under the real stack (--runtime mstar), recording its "
               "StreamBuffers and message handling; the module drives mstar's StreamBuffer, or "
               "its Worker's message handling on a stub, in the recorded order and asserts what "
               "a correct one does. A real finding fails by assertion; a case whose mechanism "
               "lies elsewhere in mstar's Worker or Conductor is refused.")
EPILOG = ("Run the written module with: pytest FILE. Exit codes: 0 written, 2 bad input, or a "
          f"case not exportable, {common.EXIT_CODES_COMMON}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("case", help="corpus case YAML file (scenarios/corpus/...)")
    p.add_argument("--runtime", metavar="R",
                   help="the runtime to record under: mstar-graph (the default: mstar's graph "
                        "objects, then, where they answered correctly, the real stack's "
                        "Workers) or mstar (the real stack's Workers only)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="where to write the module (default: test_<case name>.py in the "
                        "current directory; '-' prints it to stdout)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")


def main(args: argparse.Namespace) -> int:
    from simharness.fileio import write_text
    from simharness.mstar.export import export, identifier

    common.check_runtime(args.runtime)
    if args.output == "-":
        exported = export(args.case, args.runtime)
        for note in exported.notes:
            print(f"note: {note}", file=sys.stderr)
        sys.stdout.write(exported.text)
        print(f"the module {exported.summary}", file=sys.stderr)
        return common.EXIT_PASS
    target = Path(args.output or f"{identifier('test_' + Path(args.case).stem.replace('-', '_'))}.py")
    # before the recording's work: a path that cannot or must not be written is refused now
    common.check_output(str(target), "-o")
    if target.exists() and not args.force:
        raise UsageError(f"{target} exists; pass --force to replace it (nothing was written)")
    exported = export(args.case, args.runtime)
    common.writing(target, "-o", lambda: write_text(target, exported.text))
    for note in exported.notes:
        print(f"note: {note}", file=sys.stderr)
    if not (target.name.startswith("test_") and target.suffix == ".py"):
        print(f"note: pytest collects test_*.py files by default; run it as: pytest {target}",
              file=sys.stderr)
    print(f"wrote {target}: it {exported.summary}", file=sys.stderr)
    print(f"run it: pytest {target}", file=sys.stderr)
    return common.EXIT_PASS
