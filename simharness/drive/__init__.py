"""The driver core: the policy the simulation and the real processes share.

A driver carries the runtime model's state machines out: the simpy engine in virtual time
(`simharness.engine.simulation`), the launcher and its OS processes in wall time
(`real_backends`). Everything else about a run is decided here, once:

* `core`: the closed-loop workload, when a request has hung, the stall report and the abort,
  and the run's final state (`RunEnded`);
* `worker`: a rank's main loop ("handle the inbox, take a batch, flush the outbox, run,
  finish"), written once as a generator over a `WorkerPort`, the clock and transport a driver
  supplies.

The checks and the `RunReport` that both drivers hand back are assembled in `simharness.run`,
one layer up, since the engine may not import the checks.
"""
