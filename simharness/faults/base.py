"""What a fault kind is, the hooks it acts through, and the one registry of kinds.

A fault kind is one class (`FaultKind`) in one module of this package, with everything the
harness knows of it: its record (a `FaultSpec` subclass: its keys and their defaults), how the
loader reads it, whether mstar's transport tolerates it, how it acts on a run (`install`, through
the verbs of `FaultHooks`, which both drivers offer), what the fuzzer draws of it (`draw`), and
whether the zmq backend can inject it (`real_refusal`). The loader, the simulation's
perturbation plan, the fuzzer's strategies and coverage, and the zmq backend all go through
`kinds` and `kind`; nothing else names a kind.

The kinds are found, not listed: every module of this package that defines ``KIND`` (an
instance of its class) is one, imported the first time the registry is read. `register` adds a
kind from anywhere else (a plugin, a test), `unregister` takes it away again.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from msgspec import Struct

from simharness import fields as f
from simharness.errors import ScenarioError
from simharness.wording import hint


class FaultSpec(Struct, frozen=True, kw_only=True, tag_field="kind"):
    """One injected fault as the scenario wrote it (an entry of ``faults:``): the base of every
    kind's record. A record is tagged with its kind's name (``kind``, as in the YAML), so
    `Scenario.faults` holds a tagged union of the kinds' records (msgspec encodes and decodes such
    a union by its ``kind``). One record per kind, not one flat record with
    every kind's keys: a kind's keys and defaults then live in its own module, and a record holds
    only what its kind reads.

    Every record is a frozen keyword-built Struct that compares without its `path`
    (`records.compared_without`), as the scenario's other records do."""

    #: where in the YAML it was written (``faults[2]``)
    path: str = ""

    @property
    def kind(self) -> str:
        """The kind's name (the record's tag)."""
        return str(self.__struct_config__.tag)

    @property
    def tolerated(self) -> bool:
        """Whether a correct runtime must still pass under this fault (`FaultKind.tolerated`)."""
        return kind(self.kind).tolerated


class SendRule(Protocol):
    """What a fault does to messages as they leave (`FaultHooks.intercept_sends`)."""

    def __call__(self, src: int, dst: int, message: str, copies: int,
                 extra_s: float) -> tuple[int, float]:
        """The copies to deliver and the extra latency in seconds of one message, from `src` to
        `dst`, of type `message` (``input_signals``...), given what the rules before this one
        made of it (`copies`, `extra_s`; to begin with 1 and the link jitter)."""
        ...


class FaultHooks(Protocol):
    """The verbs a driver offers a fault kind: where a fault can act on a run.

    The simulation offers every verb (`simharness.engine.faults.Perturbations`); the zmq backend
    offers those real processes can carry out (``real_backends.faults.RealFaults``). A kind that
    needs another verb adds it here and to both drivers."""

    def endpoint(self, name: int | str) -> int:
        """The driver's id of a rank, ``conductor`` or ``client`` (as a message's src and dst)."""
        ...

    def scale_service(self, rank: int, factor: float) -> None:
        """Multiply every service time on `rank` by `factor` (a batch's budget on real ranks)."""
        ...

    def intercept_sends(self, rule: SendRule) -> None:
        """Consult `rule` for every message that leaves, after the rules added before it."""
        ...

    def stop_rank(self, rank: int, at_s: float) -> None:
        """Stop `rank` `at_s` seconds into the run: it finishes nothing more, and every message
        sent to it is lost."""
        ...


#: what a strategy is given to draw with (Hypothesis' ``draw`` inside ``st.composite``)
Draw = Callable[[Any], Any]


class FaultKind:
    """One kind of injected fault. Subclasses set the class attributes and write `parse`,
    `install` and `draw`; the module that holds one sets ``KIND = TheKind()``."""

    #: the ``kind:`` that names it in a scenario (and its record's tag)
    name: ClassVar[str]
    #: its record in `Scenario.faults`: the keys it keeps and their defaults
    record: ClassVar[type[FaultSpec]]
    #: its keys in the YAML, ``kind`` first; the first two are required
    keys: ClassVar[tuple[str, ...]]
    #: whether mstar's transport tolerates it: a correct runtime must still pass under it. A
    #: failure under a fault that is not tolerated counts as a runtime bug only where the
    #: reference runtime does not fail the same way (the fuzzer's ``fault_induced``).
    tolerated: ClassVar[bool]
    #: where it stands among the kinds: messages list them, and the fuzzer draws them, in this
    #: order (tolerated kinds first). A new kind takes a number above every other one, since any
    #: other place changes the examples of every fuzz campaign.
    order: ClassVar[int]
    #: its YAML keys whose value may be a rank (the fuzzer's reducer renumbers them when it
    #: removes ranks, and drops the fault when its rank goes)
    rank_keys: ClassVar[tuple[str, ...]] = ()
    #: why the zmq backend cannot inject it (it is refused with this); None where `install`
    #: works on real processes too, through the zmq backend's hooks
    real_refusal: ClassVar[str | None] = None

    def parse(self, m: dict[str, Any], path: str, num_ranks: int) -> FaultSpec:
        """The record of the mapping `m` (its keys already checked against `keys`), written at
        `path` in a scenario whose ranks are ``0..num_ranks-1``; a `ScenarioError` naming the
        key where a value is wrong."""
        raise NotImplementedError

    def install(self, fault: FaultSpec, hooks: FaultHooks) -> None:
        """Make `fault` act on a run through the driver's `hooks`."""
        raise NotImplementedError

    def draw(self, draw: Draw, num_ranks: int, earlier: list[dict[str, Any]]) -> dict[str, Any] | None:
        """One fault of this kind as plain YAML data, drawn with Hypothesis' `draw` for a
        scenario of `num_ranks` ranks, given the faults drawn before it in the same list
        (`earlier`); None to draw nothing after all. The draws' order is part of every fuzz
        campaign: changing it changes the examples a seed gives."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<fault kind {self.name}>"


def rank_of(m: dict[str, Any], path: str, num_ranks: int) -> int:
    """The ``rank`` key of a fault that acts on one rank."""
    rank = m["rank"]
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_ranks:
        raise ScenarioError(f.join(path, "rank"), f"expected a rank 0..{num_ranks - 1}, "
                                                  f"got {f.describe(rank)}")
    return rank


def hint_of(value: Any, choices: tuple[str, ...]) -> str:
    """`hint` for a value that may not be a string (then there is nothing to suggest)."""
    return hint(value, choices) if isinstance(value, str) else ""


# ---------------------------------------------------------------------------------------------
# the registry

#: name -> kind, in registration order (None until the package's kinds are found)
_KINDS: dict[str, FaultKind] | None = None


def _registry() -> dict[str, FaultKind]:
    """Every kind, the package's own found on first use."""
    global _KINDS
    if _KINDS is None:
        _KINDS = {}
        package = importlib.import_module("simharness.faults")
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            module = importlib.import_module(f"simharness.faults.{info.name}")
            found = getattr(module, "KIND", None)
            if found is not None:
                _add(_KINDS, found)
    return _KINDS


def _add(into: dict[str, FaultKind], fault_kind: FaultKind) -> None:
    name = fault_kind.name
    if name in into:
        raise ValueError(f"fault kind {name!r} is registered already")
    record = fault_kind.record
    config = record.__struct_config__
    if config.tag != name or not config.frozen:
        raise TypeError(f"fault kind {name!r}: its record {record.__name__} must be a frozen "
                        f"FaultSpec tagged {name!r} (class {record.__name__}(FaultSpec, "
                        f"tag={name!r}, frozen=True, kw_only=True))")
    if fault_kind.keys[0] != "kind":
        raise TypeError(f"fault kind {name!r}: its keys must begin with 'kind'")
    taken = next((k for k in into.values() if k.order == fault_kind.order), None)
    if taken is not None:
        raise ValueError(f"fault kind {name!r}: order {fault_kind.order} is taken by {taken.name!r}")
    into[name] = fault_kind


def register(fault_kind: FaultKind) -> FaultKind:
    """Add a kind from outside this package (a plugin, a test): the loader, the simulation, the
    fuzzer and the zmq backend know it from now on. Returns it."""
    _add(_registry(), fault_kind)
    return fault_kind


def unregister(name: str) -> None:
    """Take a kind `register` added away again."""
    del _registry()[name]


def kinds(tolerated_only: bool = False) -> tuple[FaultKind, ...]:
    """Every kind (or only the tolerated ones), in their `FaultKind.order`."""
    return tuple(k for k in sorted(_registry().values(), key=lambda k: k.order)
                 if k.tolerated or not tolerated_only)


def names() -> tuple[str, ...]:
    """Every kind's name as messages list them: the tolerated kinds first, each group in order."""
    every = kinds()
    return tuple(k.name for k in every if k.tolerated) + tuple(k.name for k in every if not k.tolerated)


def kind(name: str) -> FaultKind:
    """The kind called `name` (a `KeyError` for none)."""
    return _registry()[name]
