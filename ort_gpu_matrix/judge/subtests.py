"""What a test's subtests change in judging it: who carries a failure, who bit, and what junit counts.

pytest >= 9 reports each subtest apart (probe: subtests.py). A test whose only failure is its failing
subtests is failed, but its subtests carry that failure, each by name: the verdict lists them, not the
test again, and a rule accepts them one by one. In teeth, such a test bit when every failing subtest of
it bit. junit counts pytest's way: each failing subtest is a `<failure>`, and the test itself one only
where pytest called it failed (a unittest test with failing subtests reads passed under pytest 9).
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence

from .counts import TestResult, without
from .outcomes import FAILING, bites


def carried(tests: Iterable[TestResult]) -> set[str]:
    """The tests whose failure is their subtests' alone: judged through those subtests."""
    return {t.nodeid for t in tests if t.by_subtests}


def bitten(tests: list[TestResult], canary: str) -> set[str]:
    """Tests and subtests that failed with exactly the canary. A test failed by its subtests bites through them,
    each by name; it is never bitten itself (what it dispatched outside them would go unchecked)."""
    return {t.nodeid for t in tests if bites(t.outcome, t.message, canary)}


def as_judged(tests: Sequence[TestResult]) -> list[TestResult]:
    """Tests as tier and cuda_runs rules judge them. A test failed by its subtests alone is judged, as a pass, on
    what its passing parts dispatched (its own tiers outside its subtests and its passing subtests'); its failing
    subtests are judged apart, by name. Else one accepted failing subtest would hide a tier change in its siblings."""
    failing: dict[str, Counter[str]] = {}
    for t in tests:
        if t.parent is not None and t.outcome in FAILING:
            failing.setdefault(t.parent, Counter()).update(t.sdpa)
    out = []
    for t in tests:
        if not t.by_subtests:
            out.append(t)
            continue
        out.append(dataclasses.replace(t, outcome="passed", sdpa=without(t.sdpa, failing.get(t.nodeid, Counter()))))
    return out


def summary_counts(tests: Iterable[TestResult], quiet: bool) -> dict[str, int]:
    """The counts pytest's summary line gives, from the tests and subtests: each test as pytest called it, each
    failing or skipped subtest in `failed` or `skipped`, each passing one in `subtests passed`. `quiet`: pytest's
    subtests verbosity is 0, where its line counts the failing subtests only."""
    out: dict[str, int] = {}
    for t in tests:
        if quiet and t.is_subtest and t.outcome != "failed":
            continue
        said = t.pytest_outcome or t.outcome  # a subtest has no pytest_outcome: pytest judged it as it is
        key = "subtests passed" if t.is_subtest and said == "passed" else said
        out[key] = out.get(key, 0) + 1
    return out


def junit_counts(tests: Iterable[TestResult]) -> tuple[int, int, int]:
    """(failures, errors, skipped) as pytest's junit file counts them: the summary line's count with every subtest
    in (junit writes each subtest's own report), in junit's categories (xfails count as skipped)."""
    said = summary_counts(tests, quiet=False)
    return said.get("failed", 0), said.get("error", 0), said.get("skipped", 0) + said.get("xfailed", 0)
