"""simharness: deterministic simulation and testing of distributed graph-runtime layouts.

Typical use::

    from simharness.scenario import load_scenario
    from simharness.run import run_scenario

    report = run_scenario(load_scenario("scenarios/bagel_cfg.yaml"), "mstar-rust-prefix")
    for v in report.violations:
        print(v.check, v.message)
"""

__version__ = "0.1.0"
