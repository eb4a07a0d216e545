"""Commands own their verbs: a new verb is one module, the command line builds its parser from the
commands, stops any of them through one path, and makes the zmq options from `RealOptions`."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import signal
import sys
import types
from pathlib import Path

import pytest

import simharness.commands
from simharness import commands, interrupts
from simharness.cli import main
from simharness.commands import real
from tests.conftest import SCENARIOS
from tests.sim import fingerprint_verb

SHIPPED = ["run", "compare", "confirm", "runtimes", "layout", "fuzz", "explore", "import-mstar", "sweep",
           "replay", "export-test"]


@pytest.fixture
def added():
    """Commands a test adds, taken away again after it."""
    names: list[str] = []

    def add(command) -> None:
        commands.register(command)
        names.append(command.NAME)

    yield add
    for name in names:
        commands.unregister(name)


def _verbs(help_text: str) -> list[str]:
    """The verbs ``simharness --help`` lists, in order."""
    lines = help_text.split("positional arguments:")[1].split("options:")[0].splitlines()
    return [ln.split()[0] for ln in lines if ln.startswith("    ") and not ln.startswith("     ")]


# ----------------------------------------------------------------------------- a new verb


def test_a_verb_from_one_module_runs_through_the_command_line(added, capsys):
    bagel = str(SCENARIOS / "bagel_cfg.yaml")
    with pytest.raises(SystemExit) as refused:  # not a verb until added
        main(["fingerprint", bagel])
    assert refused.value.code == 2 and "invalid choice: 'fingerprint'" in capsys.readouterr().err
    added(fingerprint_verb)
    assert main(["fingerprint", bagel, "--json", "--set", "seed=7"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "bagel_cfg" and out["seed"] == 7 and out["fingerprint"].startswith("sha256:")
    # its bad input is refused as any verb's is: one line, exit 2
    assert main(["fingerprint", str(SCENARIOS / "no-such.yaml")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as refused:
        main(["fingerprint", bagel, "--jsn"])
    assert refused.value.code == 2 and "did you mean '--json'" in capsys.readouterr().err


def test_an_added_verb_has_its_help_and_comes_after_the_shipped_ones(added, capsys):
    added(fingerprint_verb)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert _verbs(capsys.readouterr().out) == [*SHIPPED, "fingerprint"]
    with pytest.raises(SystemExit):
        main(["fingerprint", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert fingerprint_verb.DESCRIPTION in out and "130/143 interrupted." in out


def test_help_lists_the_shipped_verbs_in_their_order(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert _verbs(capsys.readouterr().out) == SHIPPED


def test_a_verb_cannot_be_added_twice_or_shadow_a_shipped_one(added):
    added(fingerprint_verb)
    with pytest.raises(ValueError, match="already has a command 'fingerprint'"):
        commands.register(fingerprint_verb)
    with pytest.raises(ValueError, match="already has a command 'run'"):
        commands.register(types.SimpleNamespace(NAME="run"))


def test_every_module_that_defines_a_verb_is_listed():
    """The verbs are a list, not a scan of the folder: a module left out of it would never be
    a verb, so a module with NAME must be in `BUILTIN` (and the list names only such modules)."""
    folder = Path(simharness.commands.__file__).parent
    defining = set()
    for f in folder.glob("*.py"):
        tree = ast.parse(f.read_text())
        names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name)}
        if "NAME" in names:
            defining.add(f.stem)
    assert defining == set(commands.BUILTIN)


# ----------------------------------------------------------------------------- the one interrupt path


def _stopping(partial_found, sig: int, says=True):
    """A command that a signal stops, having found `partial_found`."""

    def run(_args):
        raise interrupts.Interrupted(sig, partial=partial_found)

    command = types.SimpleNamespace(NAME="stops", HELP="stops", add_arguments=lambda p: None, main=run)
    if says:
        command.partial = lambda found, args: print(f"had found {found} ({args.command})", file=sys.stderr)
    return command


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_command_says_what_it_found_then_the_one_last_line(added, capsys, sig, code):
    added(_stopping("3 things", sig))
    assert main(["stops"]) == code
    assert capsys.readouterr().err.splitlines() == [
        "had found 3 things (stops)",
        f"interrupted by {signal.Signals(sig).name}; no file was left half-written"]


def test_a_command_that_found_nothing_or_says_nothing_ends_with_the_last_line_alone(added, capsys):
    added(_stopping(None, signal.SIGINT))
    assert main(["stops"]) == 130
    assert capsys.readouterr().err.splitlines() == ["interrupted by SIGINT; no file was left half-written"]
    commands.unregister("stops")
    added(_stopping("3 things", signal.SIGINT, says=False))
    assert main(["stops"]) == 130
    assert capsys.readouterr().err.splitlines() == ["interrupted by SIGINT; no file was left half-written"]


# ----------------------------------------------------------------------------- zmq options from RealOptions


def _help_of(command: str, capsys) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["run", "confirm"])
def test_the_zmq_options_help_gives_the_defaults_of_real_options(command, capsys):
    out = _help_of(command, capsys)
    for text in ("cuda puts rank r on cuda:(r mod device count) (default: cpu)",
                 "its service time times X (default: 0.2)",
                 "the rest slept (default: 0.5 on cpu, 1 on cuda)",
                 "ipc (default: sockets in a temporary directory) or tcp://HOST:PORT (launcher at PORT, "
                 "conductor PORT+1, rank r PORT+10+r)",
                 "run deadline in seconds (default: derived from a simulation of the scenario, capped by "
                 "limits.request_timeout_s)",
                 "fault injection: kill rank RANK with SIGKILL SECONDS after the start"):
        assert text in out
    assert "{default}" not in out


def test_a_default_changed_in_real_options_changes_the_help(monkeypatch, capsys):
    from real_backends.options import RealOptions

    monkeypatch.setattr(RealOptions.__dataclass_fields__["time_scale"], "default", 0.7)
    out = _help_of("run", capsys)
    assert "times X (default: 0.7)" in out and "(default: 0.2)" not in out


def test_each_zmq_option_sets_a_field_of_real_options_and_shows_its_default_if_it_has_one():
    from real_backends.options import RealOptions, default_text

    fields = {f.name for f in dataclasses.fields(RealOptions)}
    for o in real.OPTIONS:
        assert o.field in fields
        assert ("{default}" in o.help) == (default_text(o.field) is not None), o.flag


def test_building_the_parser_does_not_import_real_backends():
    import subprocess

    probe = ("import sys\nfrom simharness.cli import _parser\nfrom simharness import commands\n"
             "p = _parser(commands.all_commands())\np.parse_args(['run', 'x', '--device', 'cuda'])\n"
             "print(sorted(m for m in sys.modules if m.startswith('real_backends')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


needs_real = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("zmq", "msgpack", "torch")),
    reason="needs pyzmq, msgpack and torch")


@needs_real
def test_options_left_out_keep_real_options_defaults_and_given_ones_are_read():
    from real_backends.options import RealOptions

    args = types.SimpleNamespace(**{o.dest: None for o in real.OPTIONS})
    assert real.options(args) == RealOptions(compute_share=0.5)  # check() fills it in by device
    args.time_scale, args.kill_rank, args.endpoints = 0.5, "1:2.5", "tcp://127.0.0.1:5000"
    opts = real.options(args)
    assert (opts.time_scale, opts.kill, opts.endpoints, opts.device) == (0.5, (1, 2.5), "tcp://127.0.0.1:5000",
                                                                         "cpu")
