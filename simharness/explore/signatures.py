"""A failure's name: the signature a campaign, a search and the corpus know it by.

The signature keeps what identifies a bug and drops what shrinking changes: the check that saw the
root cause (the reporting check of the lowest `Check.priority`: ``loop_exit`` before the
``forwards`` and ``drain`` symptoms it causes) and the kind of its most telling violation (its
`Check.kinds` order), then, where the check names one, the mechanism within that kind
(`Violation.mechanism`: ``drain:dropped:remove_request:tp-follower``). All come from the checks,
which set them on each violation where they make it: no message's wording enters a signature.
"""

from __future__ import annotations

from collections.abc import Iterable

from simharness.checks import KNOWN_CHECKS, UNRANKED, Check, Violation
from simharness.scenario.model import Scenario


def signature(violations: list[Violation], scenario: Scenario | None = None,
              checks: Iterable[type[Check]] = KNOWN_CHECKS) -> tuple[str, str]:
    """(check, kind) naming the root cause among a run's violations: the reporting check of the
    lowest priority, and the first of its kinds (in its `Check.kinds` order) among its
    violations. `checks`: the classes that may have reported (a check of another name ranks
    last). The scenario is not needed (each violation carries its kind); callers may pass it.
    """
    classes = {c.name: c for c in checks}
    by_check: dict[str, list[Violation]] = {}
    for v in violations:
        by_check.setdefault(v.check, []).append(v)
    check = min(by_check, key=lambda name: priority_of(name, classes))
    cls = classes.get(check)
    order = cls.kinds if cls is not None else ()
    key = min((v.kind for v in by_check[check]),
              key=lambda k: order.index(k) if k in order else len(order))
    # ... then the mechanism within that kind, where the check names one (the least, so that a
    # run showing two names the same one every time)
    mechanisms = sorted({v.mechanism for v in by_check[check] if v.kind == key and v.mechanism})
    return check, f"{key}:{mechanisms[0]}" if mechanisms else key


def signature_of(violations: list[Violation]) -> str | None:
    """``check:key`` of a run's violations (the corpus's failure signature), None for a pass."""
    if not violations:
        return None
    check, key = signature(violations)
    return f"{check}:{key}"


def priority_of(name: str, classes: dict[str, type[Check]] | None = None) -> int:
    """The priority of the check called `name` among `classes` (name -> class; the known
    checks by default), `UNRANKED` for one of another name."""
    cls = (classes if classes is not None else _KNOWN).get(name)
    return cls.priority if cls is not None else UNRANKED


_KNOWN = {c.name: c for c in KNOWN_CHECKS}
