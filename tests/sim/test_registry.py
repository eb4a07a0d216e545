"""Runtimes plug in by name: built-ins, the ``simharness.runtimes`` entry-point group, and
``module:Name``; ``simharness runtimes`` lists them."""

from __future__ import annotations

from importlib.metadata import EntryPoint

from simharness.cli import main
from simharness.mstar import package
from simharness.runtime import registry


def test_module_name_runs_end_to_end(scenarios_dir, capsys):
    code = main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--runtime",
                 "tests.quality.broken:OffByOneLoop"])
    assert code == 1
    assert "runtime tests.quality.broken:OffByOneLoop" in capsys.readouterr().out


def test_a_bad_module_name_is_a_usage_error(scenarios_dir, capsys):
    assert main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--runtime", "tests.nope:X"]) == 2
    assert "cannot load runtime 'tests.nope:X'" in capsys.readouterr().err


def _plugin(monkeypatch, value):
    ep = EntryPoint(name="toy", value=value, group=registry.GROUP)
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [*real(group=group), ep] if group == registry.GROUP else [])


def test_an_entry_point_plugin_is_listed_and_runs(scenarios_dir, monkeypatch, capsys):
    _plugin(monkeypatch, "tests.quality.broken:NeverDropsLoopBacks")
    assert main(["runtimes"]) == 0
    listing = capsys.readouterr().out
    toy = next(ln for ln in listing.splitlines() if ln.startswith("toy "))
    assert "A finishing loop routes its loop-back edges" in toy
    assert main(["run", str(scenarios_dir / "bagel_cfg.yaml"), "--runtime", "toy"]) == 1
    assert "loop_exit" in capsys.readouterr().out


def test_a_broken_plugin_does_not_break_the_listing(monkeypatch, capsys):
    _plugin(monkeypatch, "tests.nope:Missing")
    assert main(["runtimes"]) == 0
    out = capsys.readouterr().out
    assert "toy" in out and "cannot load tests.nope:Missing" in out
    assert "mstar-python" in out


def test_mstar_is_listed_with_how_to_get_it(capsys):
    assert main(["runtimes"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("mstar "))
    if package.is_available():
        assert "the real mstar stack" in line
    else:
        assert package.PIP_INSTALL in line
