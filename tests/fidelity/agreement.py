"""What "the model agrees with the real mstar code" means, for the fidelity suites.

The comparison itself is the product's (`simharness.differential`: forward counts, loop
counters, routed edges per completion, outcome); this module words it for a test's failure
message, with the first trace divergence (`simharness.compare.first_divergence`) first, to help
whoever has to explain a disagreement, and keeps the fidelity suites' names for the model's
policy under the stack (`model_of`) and the stack's mechanisms beyond the model (`real_only`).
"""

from __future__ import annotations

from typing import Any

from simharness.compare import first_divergence
from simharness.differential import Arm, aligned, divergences
from simharness.mstar.stack.mechanisms import REAL_ONLY
from simharness.run import RunReport

__all__ = ["REAL_ONLY", "disagreements", "model_of", "real_only"]


def disagreements(model: RunReport, real: RunReport, limit: int = 8) -> list[str]:
    out = [d.text(("model", "mstar")) for d in divergences(Arm.of(model), Arm.of(real))]
    if out:
        div = first_divergence(model.result.events, real.result.events)
        if div is not None:
            out.insert(0, f"first trace divergence at event {div['index']}: {div['summary']}")
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])


def model_of(scenario: Any) -> Any:
    """The scenario under ``mstar-python`` with mstar 0.2.1's loop policy (what the stack runs)."""
    return aligned(scenario, "mstar-python", "mstar")


def real_only(real: RunReport) -> list[str]:
    """The `REAL_ONLY` mechanisms the real stack's run shows, by label."""
    from simharness.mstar.stack.mechanisms import real_only as labels

    return labels(real.result.events, real.scenario)
