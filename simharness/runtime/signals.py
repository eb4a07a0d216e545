"""`Signal`: one routed edge instance, with where it came from.

A declared `Edge` of the IR says what a node *may* send; a `Signal` is one copy actually sent:
its name and destination, its payload size, and its provenance (the producing node, rank, walk,
pass and loop counter, or the conductor at a walk's start). Provenance is what lets a check say
"the extra pass's ``v_cfg_text`` is sitting in combine_cfg's slot on rank 0".

Signals are plain slotted objects, not dataclasses: the simulator creates one per output edge per
forward, so construction cost matters.
"""

from __future__ import annotations

#: Where a signal came from.
ORIGIN_NODE = "node"
ORIGIN_WALK_START = "walk_start"
ORIGIN_LOOP_OUTPUT = "loop_output"
ORIGIN_STREAM = "stream"


class Signal:
    __slots__ = (
        "name", "dest", "persist", "new_token", "nbytes", "src", "src_rank", "walk", "pass_no",
        "counter", "origin", "seq", "stream",
    )

    def __init__(
        self,
        name: str,
        dest: str,
        persist: bool,
        new_token: bool,
        nbytes: int,
        src: str,
        src_rank: int,
        walk: str,
        pass_no: int,
        counter: int | None,
        origin: str,
        seq: int,
        stream: bool = False,
    ) -> None:
        self.name = name
        self.dest = dest
        self.persist = persist
        self.new_token = new_token
        self.nbytes = nbytes
        #: producing node, or ``conductor`` for walk-start inputs
        self.src = src
        #: producing rank, or -1 for the conductor
        self.src_rank = src_rank
        self.walk = walk
        self.pass_no = pass_no
        #: the producer's innermost loop counter when it ran (None outside loops)
        self.counter = counter
        self.origin = origin
        #: unique per producer, in production order: a stable identity for traces
        self.seq = seq
        #: a streaming edge: it goes to the consumer's StreamBuffer, not into a slot
        self.stream = stream

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
