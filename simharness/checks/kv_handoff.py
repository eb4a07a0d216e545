"""`kv_handoff`: a KV-cache node runs on a rank only once the request's pages are there.

In a prefill/decode split the decode rank must pull the KV pages the prefill rank wrote before
the decode node may run (mstar's ``check_ready`` starts the pull and holds the node until it
completes). Every start of a KV-cache node records how many tokens of its label the rank held and
how many the conductor said exist elsewhere; holding fewer is a violation (of kind ``other``, the
one kind this check makes).
"""

from __future__ import annotations

from simharness import events as ev
from simharness.checks.base import Check, RunContext, RunSetup, Violation
from simharness.wording import plural


class KvHandoffCheck(Check):
    name = "kv_handoff"
    priority = 60
    kinds = ("other",)

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        self.early: list[ev.KvUsed] = []

    def on_KvUsed(self, e: ev.KvUsed) -> None:
        if e.have < e.need:
            self.early.append(e)

    def finish(self, ctx: RunContext) -> list[Violation]:
        return [Violation(self.name, f"{e.node} started on rank {e.rank} holding {e.have} of "
                                     f"{plural(e.need, 'token')} of KV label {e.label!r}: it ran "
                                     f"before its KV pull completed",
                          walk=e.walk, node=e.node, rank=e.rank, request=e.rid,
                          details={"label": e.label, "have": e.have, "need": e.need}, kind="other", t=e.t)
                for e in self.early]
