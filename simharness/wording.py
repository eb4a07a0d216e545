"""How the harness words what it tells a user: counts with their nouns, and "did you mean".

Every message that counts things says ``1 walk`` and ``2 walks`` through `plural`, and every
refusal of an unknown name (a key, a runtime, a verb, a walk, a node) suggests the closest
known names through `hint` (difflib does the matching), so all of them read alike.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 walk``, ``2 walks``: `n` and `word`, in the plural (`many`, default word + "s")
    unless n is 1."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def closest(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` of `choices` that look like `word`, the closest first."""
    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.6)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``did you mean 'x'?`` (or ``'x' or 'y'?``) for the close matches of `word`; "" for none."""
    found = closest(word, choices, n=2)
    if not found:
        return ""
    return "did you mean " + " or ".join(repr(c) for c in found) + "?"


def hint(word: str, choices: Iterable[str]) -> str:
    """`did_you_mean` as a clause to append to a message: ``; did you mean 'x'?`` or ""."""
    text = did_you_mean(word, choices)
    return f"; {text}" if text else ""


__all__ = ["closest", "did_you_mean", "hint", "plural"]
