"""A missing dependency of the zmq backend is one line naming it and the pip command."""

from __future__ import annotations

import importlib.util

import pytest

import real_backends


# msgspec is not among them: simharness itself depends on it (signals and the trace digest)
@pytest.mark.parametrize("module, named", [("zmq", "pyzmq"), ("msgpack", "msgpack"),
                                           ("torch", "torch")])
def test_each_missing_dependency_is_named(monkeypatch, module, named):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == module else real(name, *a))
    with pytest.raises(real_backends.MissingDependency) as got:
        real_backends.require()
    assert named in str(got.value) and "simharness[real]" in str(got.value)


def test_the_options_load_without_the_backend_s_dependencies():
    """`RealOptions` and its defaults are read for ``--help`` on any machine: importing them
    loads neither pyzmq nor torch nor msgpack."""
    import subprocess
    import sys

    probe = ("import json, sys\nfrom real_backends.options import RealOptions, default_text\n"
             "RealOptions()\ndefault_text('time_scale')\n"
             "print(json.dumps(sorted(m for m in ('zmq', 'torch', 'msgpack') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_default_text_names_each_default_as_the_help_shows_it():
    from real_backends.options import default_text

    assert default_text("device") == "cpu" and default_text("time_scale") == "0.2"
    assert default_text("compute_share") == "0.5 on cpu, 1 on cuda"
    assert default_text("endpoints") == "sockets in a temporary directory"
    assert default_text("kill") is None and default_text("slow_ranks") is None
