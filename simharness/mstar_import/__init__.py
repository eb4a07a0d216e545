"""Scenarios from mstar's own model code (``simharness import-mstar``).

`build.import_config` turns an mstar config (a path, or the name of a config shipped with
mstar-ai) into a scenario: the walks, partitions and streams of the real model class, the config's
node groups, and marked defaults for what the model decides at run time. `models` builds a
registered model without weights; `convert` maps mstar's graph classes to the schema; `stubs`
stands in for heavy packages the graph code does not use, for the import only.
"""
