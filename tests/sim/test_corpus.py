"""The corpus is a regression suite: every case replays as recorded.

``open`` cases must still fail with their signature (a case that starts to pass fails this test
and says so: mark it ``fixed``); ``fixed`` cases must pass; both must reproduce the recorded
trace digest, bit for bit.
"""

from __future__ import annotations

import pytest

from simharness.explore.corpus import cases, replay
from tests.conftest import SCENARIOS

CORPUS = SCENARIOS / "corpus"
CASES = cases(CORPUS)


def test_the_corpus_is_not_empty():
    assert CASES, f"no cases in {CORPUS}"


@pytest.mark.parametrize("case", CASES, ids=[c.path.stem for c in CASES])
def test_corpus_case_replays_as_recorded(case):
    r = replay(case.path)
    assert r.ok, f"{case.path.name}: {r.message}"
