"""What the kinds that act on one message share: the message they target, and how they are read,
matched and drawn.

A message fault (``delay``, ``duplicate``, ``drop``) targets the ``nth`` message (1-based, in
send order) of type ``message`` from ``from`` to ``to`` (a rank, ``conductor`` or ``client``;
absent: any). Its kind says what happens to that message (`MessageFault.effect`) and reads and
draws the keys of its own (`parse_effect`, `draw_effect`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from simharness import fields as f
from simharness.errors import ScenarioError
from simharness.faults.base import Draw, FaultHooks, FaultKind, FaultSpec, hint_of

#: Messages a message fault can target (``stop_loops``: a peer's STOP_LOOPS to the other copies
#: of a dynamic loop).
MESSAGES = ("new_request", "input_signals", "remove_request", "worker_graphs_done",
            "result_tensors", "stop_loops")
#: Messages every fuzz example's faults may target; ``stop_loops`` has a feature of its own.
DRAWN_MESSAGES = tuple(m for m in MESSAGES if m != "stop_loops")
#: Endpoints other than a rank, by name.
NAMED_ENDPOINTS = ("conductor", "client")


class MessageFaultSpec(FaultSpec, frozen=True, kw_only=True):
    """The target of a message fault: the base of the message kinds' records."""

    #: the message type (one of `MESSAGES`)
    message: str
    #: the sender and the receiver: a rank, ``conductor`` or ``client``; None matches any
    src: int | str | None = None
    dst: int | str | None = None
    #: which matching message, counting from 1 in send order
    nth: int = 1


class MessageFault(FaultKind):
    """A kind that acts on one message as it leaves (through `FaultHooks.intercept_sends`)."""

    record: ClassVar[type[MessageFaultSpec]]
    keys: ClassVar[tuple[str, ...]] = ("kind", "message", "from", "to", "nth")
    rank_keys = ("from", "to")

    def effect(self, fault: Any, copies: int, extra_s: float) -> tuple[int, float]:
        """What the fault makes of its message: the copies to deliver and the extra latency in
        seconds, given what earlier rules made of it."""
        raise NotImplementedError

    def parse_effect(self, m: dict[str, Any], path: str) -> dict[str, Any]:
        """The kind's own keys of the record, read from `m` (written at `path`)."""
        return {}

    def draw_effect(self, draw: Draw) -> dict[str, Any]:
        """The kind's own keys of a drawn fault (drawn last)."""
        return {}

    def parse(self, m: dict[str, Any], path: str, num_ranks: int) -> FaultSpec:
        message = m["message"]
        if message not in MESSAGES:
            raise ScenarioError(f.join(path, "message"), f"expected one of {', '.join(MESSAGES)}, "
                                                         f"got {f.describe(message)}"
                                                         f"{hint_of(message, MESSAGES)}")
        src = None if m.get("from") is None else _endpoint(m["from"], f.join(path, "from"), num_ranks)
        dst = None if m.get("to") is None else _endpoint(m["to"], f.join(path, "to"), num_ranks)
        nth = f.integer(m.get("nth", f.default(self.record, "nth")), f.join(path, "nth"),
                        minimum=1, maximum=10**9, unit="messages")
        return self.record(message=message, src=src, dst=dst, nth=nth, path=path,
                           **self.parse_effect(m, path))

    def install(self, fault: FaultSpec, hooks: FaultHooks) -> None:
        assert isinstance(fault, MessageFaultSpec)
        hooks.intercept_sends(_Rule(self, fault, hooks))

    def draw(self, draw: Draw, num_ranks: int, earlier: list[dict[str, Any]]) -> dict[str, Any]:
        from hypothesis import strategies as st

        fault: dict[str, Any] = {"kind": self.name, "message": draw(st.sampled_from(DRAWN_MESSAGES))}
        src, dst = draw(endpoints(num_ranks)), draw(endpoints(num_ranks))
        if src is not None:
            fault["from"] = src
        if dst is not None:
            fault["to"] = dst
        fault["nth"] = draw(st.integers(1, 6))
        fault.update(self.draw_effect(draw))
        return fault


def endpoints(num_ranks: int) -> Any:
    """The strategy for a drawn fault's ``from`` or ``to``: any, a rank, or the conductor."""
    from hypothesis import strategies as st

    return st.one_of(st.none(), st.integers(0, num_ranks - 1), st.just("conductor"))


def _endpoint(value: Any, path: str, num_ranks: int) -> int | str:
    if value in NAMED_ENDPOINTS:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < num_ranks:
        return value
    raise ScenarioError(path, f"expected a rank 0..{num_ranks - 1}, conductor or client, "
                              f"got {f.describe(value)}{hint_of(value, NAMED_ENDPOINTS)}")


class _Rule:
    """One message fault at work: counts the messages that match its target and hands the
    `nth` to its kind's `effect`."""

    __slots__ = ("kind", "fault", "message", "src", "dst", "nth", "seen")

    def __init__(self, kind: MessageFault, fault: MessageFaultSpec, hooks: FaultHooks) -> None:
        self.kind = kind
        self.fault = fault
        self.message = fault.message
        self.src = None if fault.src is None else hooks.endpoint(fault.src)
        self.dst = None if fault.dst is None else hooks.endpoint(fault.dst)
        self.nth = fault.nth
        #: matching messages seen so far
        self.seen = 0

    def __call__(self, src: int, dst: int, message: str, copies: int,
                 extra_s: float) -> tuple[int, float]:
        if message != self.message or (self.src is not None and src != self.src):
            return copies, extra_s
        if self.dst is not None and dst != self.dst:
            return copies, extra_s
        self.seen += 1
        if self.seen != self.nth:
            return copies, extra_s
        return self.kind.effect(self.fault, copies, extra_s)
