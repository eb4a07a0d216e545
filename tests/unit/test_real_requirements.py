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
