"""`Signal`: one routed edge instance, with where it came from.

A declared `Edge` of the IR says what a node *may* send; a `Signal` is one copy actually sent:
its name and destination, its payload size, and its provenance (the producing node, rank, walk,
pass and loop counter, or the conductor at a walk's start). Provenance is what lets a check say
"the extra pass's ``v_cfg_text`` is sitting in combine_cfg's slot on rank 0".

Signals are msgspec Structs, not dataclasses: the simulator creates one per output edge per
forward, and a Struct is built in C. They are array-like, so msgspec encodes one as the array of
its fields in the order below: the trace digest (`simharness.trace`) and the zmq wire
(`real_backends.wire`) both encode signals that way, with no Python call per signal. They
compare by identity (``eq=False``): two copies of one edge are two signals. The cyclic garbage
collector does not track them (``gc=False``): a signal holds strings, numbers and (a stream
chunk) a tuple of other signals, so it can never be part of a reference cycle, and a kept trace
holds hundreds of thousands of them, which the collector would otherwise scan again and again
once the run ends (and the events holding only untracked values then leave its lists too).
"""

from __future__ import annotations

import msgspec

#: Where a signal came from.
ORIGIN_NODE = "node"
ORIGIN_WALK_START = "walk_start"
ORIGIN_LOOP_OUTPUT = "loop_output"
ORIGIN_STREAM = "stream"


class Signal(msgspec.Struct, eq=False, array_like=True, forbid_unknown_fields=True, gc=False):
    name: str
    dest: str
    persist: bool
    new_token: bool
    nbytes: int
    #: producing node, or ``conductor`` for walk-start inputs
    src: str
    #: producing rank, or -1 for the conductor
    src_rank: int
    walk: str
    pass_no: int
    #: the producer's innermost loop counter when it ran (None outside loops)
    counter: int | None
    origin: str
    #: unique per producer, in production order: a stable identity for traces
    seq: int
    #: a streaming edge: it goes to the consumer's StreamBuffer, not into a slot
    stream: bool = False

    @property
    def pair(self) -> tuple[str, str]:
        return (self.name, self.dest)

    def describe(self) -> str:
        """For people: ``latents from combine_cfg@0 at counter 48`` or ``latents (walk start, pass 1)``."""
        if self.origin == ORIGIN_WALK_START:
            return f"{self.name} (walk start, pass {self.pass_no})"
        at = "" if self.counter is None else f" at counter {self.counter}"
        return f"{self.name} from {self.src}@{self.src_rank}{at}"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "dest": self.dest, "src": self.src, "src_rank": self.src_rank,
                "counter": self.counter, "origin": self.origin, "pass": self.pass_no,
                "seq": self.seq}

    def __repr__(self) -> str:
        # Compact and complete as an identity: traces hash this. A producer numbers its signals
        # in order, so (producing rank, seq) names one copy; name and destination make it readable.
        return f"<{self.name}>{self.dest}@{self.src_rank}#{self.seq}>"
