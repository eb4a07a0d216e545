"""Exploration: hypothesis strategies for generated scenarios, fuzz campaigns (in process or on
Dask), shrinking to minimal failing cases, the corpus of those cases, and graph coverage.

* `strategies`: scenarios built from mstar's primitives (public as `simharness.strategies`);
* `execute`: run one example, classify it (pass, fail, fault-induced, invalid), name its failure;
* `campaign`: chunks of examples from derived seeds, merged in order; shrinking per signature;
* `corpus`: write shrunk cases as scenario YAML, replay them;
* `coverage`: layout classes, edge kinds, loop shapes and fault kinds exercised.
"""
