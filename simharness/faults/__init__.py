"""Injected faults, one kind per module: what each kind is, in one place.

`base` says what a kind is (`FaultKind`, its record `FaultSpec`, the `FaultHooks` it acts
through) and holds the one registry (`kinds`, `kind`, `names`, `register`); `message` is what the
kinds that act on one message share. Every other module here is one kind, found by the registry:
a new kind is a new module that sets ``KIND``.
"""

from simharness.faults.base import (
    FaultHooks,
    FaultKind,
    FaultSpec,
    SendRule,
    kind,
    kinds,
    names,
    register,
    unregister,
)

__all__ = ["FaultHooks", "FaultKind", "FaultSpec", "SendRule", "kind", "kinds", "names", "register",
           "unregister"]
