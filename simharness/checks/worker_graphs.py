"""`worker_graphs`: per-pass worker-graph-done accounting.

mstar's conductor moves a partition to its next pass when every worker graph of the current
walk has reported done once per rank of its instance. So, for each request:

* a report the conductor was not waiting for (a worker graph of another walk, one reported
  twice by a rank in one pass, or any report after the request's partitions were done) is a
  violation: it is the trace of an extra pass;
* for every pass that completed, each worker graph of the walk reported once per rank; for a
  request that hung, the worker graphs that never reported are named.

Kinds: ``unexpected-report``, then ``never-reported``.
"""

from __future__ import annotations

from simharness import events as ev
from simharness.checks.base import Check, RunContext, RunSetup, Violation


class WorkerGraphsCheck(Check):
    name = "worker_graphs"
    priority = 80
    kinds = ("unexpected-report", "never-reported")

    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        self.unexpected: list[ev.UnexpectedReport] = []
        self.stalls: list[ev.Stalled] = []

    def on_UnexpectedReport(self, e: ev.UnexpectedReport) -> None:
        self.unexpected.append(e)

    def on_Stalled(self, e: ev.Stalled) -> None:
        self.stalls.append(e)

    def finish(self, ctx: RunContext) -> list[Violation]:
        out = []
        for e in self.unexpected:
            out.append(Violation(self.name, f"unexpected worker-graph-done report for {e.wg} from rank "
                                            f"{e.rank}: {e.reason}", rank=e.rank, request=e.rid,
                                 details={"wg": e.wg}, kind="unexpected-report", t=e.t))
        for s in self.stalls:
            for wg, ranks in s.pending:
                out.append(Violation(self.name, f"{wg} never reported done for pass {s.pass_no} of walk "
                                                f"{s.walk} ({'rank' if len(ranks) == 1 else 'ranks'} "
                                                f"{', '.join(map(str, ranks))})",
                                     walk=s.walk, request=s.rid, details={"wg": wg, "ranks": list(ranks)},
                                     kind="never-reported", t=s.t))
        return out
