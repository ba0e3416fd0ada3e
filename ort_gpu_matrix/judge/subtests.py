"""What a test's subtests change in judging it: who carries a failure, who bit, and what junit counts.

pytest >= 9 reports each subtest apart (probe: subtests.py). A test whose only failure is its failing
subtests is failed, but its subtests carry that failure, each by name: the verdict lists them, not the
test again, and a rule accepts them one by one. In teeth, such a test bit when every failing subtest of
it bit. junit counts pytest's way: each failing subtest is a `<failure>`, and the test itself one only
where pytest called it failed (a unittest test with failing subtests reads passed under pytest 9).
"""
from __future__ import annotations

from collections.abc import Iterable

from .counts import TestResult
from .outcomes import bites


def carried(tests: Iterable[TestResult]) -> set[str]:
    """The tests whose failure is their subtests' alone: judged through those subtests."""
    return {t.nodeid for t in tests if t.by_subtests}


def bitten(tests: list[TestResult], canary: str) -> set[str]:
    """Tests and subtests that failed with exactly the canary, and tests failed only by subtests that all did."""
    out = {t.nodeid for t in tests if bites(t.outcome, t.message, canary)}
    failing: dict[str, list[str]] = {}
    for t in tests:
        if t.parent is not None and t.outcome == "failed":
            failing.setdefault(t.parent, []).append(t.nodeid)
    out |= {t.nodeid for t in tests if t.by_subtests and failing.get(t.nodeid)
            and all(n in out for n in failing[t.nodeid])}
    return out


def summary_counts(tests: Iterable[TestResult], quiet: bool) -> dict[str, int]:
    """The counts pytest's summary line gives, from the tests and subtests: each test as pytest called it, each
    failing or skipped subtest in `failed` or `skipped`, each passing one in `subtests passed`. `quiet`: pytest's
    subtests verbosity is 0, where its line counts the failing subtests only."""
    out: dict[str, int] = {}
    for t in tests:
        if quiet and t.is_subtest and t.outcome != "failed":
            continue
        said = t.outcome if t.is_subtest else (t.pytest_outcome or t.outcome)
        key = "subtests passed" if t.is_subtest and said == "passed" else said
        out[key] = out.get(key, 0) + 1
    return out


def junit_counts(tests: Iterable[TestResult]) -> tuple[int, int, int]:
    """(failures, errors, skipped) as pytest's junit file counts them: per test as pytest called it, plus
    every subtest's own report (xfails count as skipped)."""
    failures = errors = skipped = 0
    for t in tests:
        said = t.outcome if t.is_subtest else (t.pytest_outcome or t.outcome)
        failures += said == "failed"
        errors += said == "error"
        skipped += said in ("skipped", "xfailed")
    return failures, errors, skipped
