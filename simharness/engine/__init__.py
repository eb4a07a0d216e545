"""The simpy driver: runs the pure loops of `simharness.runtime` in virtual time over simulated
links (`network`), under a closed-loop workload (`simulation`).

The engine holds no routing or scheduling policy of its own (that is the runtime's), and it never
imports the checks: they observe the events the loops emit.
"""

from simharness.engine.simpy_import import import_simpy

# Before `simulation` and `network` import simpy: without its version lookup (see the module).
import_simpy()
