"""Everything that touches mstar-ai, in one wing, imported only when asked for.

* `package`: the pinned version, the install commands, reaching mstar's modules and its shipped
  configs (every fact about the package, once);
* `convert`: our graph IR to mstar's graph classes and back;
* `runtime`, `state`, `placement`: the ``mstar`` runtime under test (mstar's own graph code in
  our drivers), its per-worker-graph state and mstar's own division of the walks;
* `reference`, `build`, `models`, `derive`, `shape`, `stubs`: scenarios from mstar's own model
  code (``graph: {mstar_model: NAME}`` and ``simharness import-mstar``).

No module outside this package imports mstar; the rest of simharness reaches this package by
name (`simharness.runtime.registry`, `simharness.scenario.sources`) or lazily (the CLI).
"""
