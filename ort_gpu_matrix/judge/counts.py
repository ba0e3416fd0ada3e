"""A run's tests counted and censused, so that every judge of the run reads the same numbers.

The verdict, the reruns and calibrate all read a run through these types: the counts a reason quotes,
the counts junit is checked against and the census teeth's coverage reads cannot drift apart.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from ort_matrix_probe.schema import EpUse, ProbeReport


@dataclass(frozen=True)
class TestResult:
    nodeid: str
    outcome: str  # passed failed skipped error xfailed xpassed
    message: str
    sdpa: tuple[str, ...]
    reruns: int = 0  # failed attempts before this outcome (pytest-rerunfailures)
    ep: tuple[EpUse, ...] = ()  # the probe's EP census: each CUDA-asking session it built or ran
    parent: str | None = None  # a subtest: the node id of the test it ran in (its own id extends that one)
    by_subtests: bool = False  # a test failed by its failing subtests alone: they carry the failure, by name
    pytest_outcome: str | None = None  # what pytest called it, where the probe says otherwise (junit counts so)

    @property
    def is_subtest(self) -> bool:
        return self.parent is not None


@dataclass(frozen=True)
class Counts:
    collected: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0
    # subtests, apart from the tests that hold them (as pytest's summary counts them)
    subtests_passed: int = 0
    subtests_failed: int = 0
    subtests_skipped: int = 0
    subtests_xfailed: int = 0

    @property
    def subtests(self) -> int:
        return self.subtests_passed + self.subtests_failed + self.subtests_skipped + self.subtests_xfailed


@dataclass(frozen=True)
class Dispatch:
    """The kernel census: every SdpaKernel tier of every test, in order."""

    tests: dict[str, list[str]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)  # tokens per tier
    tests_per_tier: dict[str, int] = field(default_factory=dict)

    def tier_tests(self, tier: str) -> list[str]:
        """The tests that dispatched `tier` at least once: what teeth must bite when MATH takes it away."""
        return sorted(n for n, tiers in self.tests.items() if tier in tiers)


def collected_of(report: ProbeReport | None, fallback: int | None) -> int | None:
    """Items collected, as the collecting processes counted them (the largest, across xdist workers)."""
    per_process = report.get("collected", {}) if report else {}
    return max(per_process.values()) if per_process else fallback


def count(report: ProbeReport | None, tests: list[TestResult], collected: int | None = None) -> Counts:
    c = Counter(t.outcome for t in tests if not t.is_subtest)
    s = Counter(t.outcome for t in tests if t.is_subtest)
    if collected is None:
        collected = len(report["tests"] if report else {})
    return Counts(collected=collected, passed=c["passed"], failed=c["failed"], errors=c["error"],
                  skipped=c["skipped"], xfailed=c["xfailed"], xpassed=c["xpassed"], subtests_passed=s["passed"],
                  subtests_failed=s["failed"], subtests_skipped=s["skipped"], subtests_xfailed=s["xfailed"])


def units(tests: list[TestResult]) -> list[TestResult]:
    """What dispatched, one entry per place it ran: each subtest, and a test for the tiers it printed outside
    its subtests. A test's own tiers include its subtests', so counting both would count each token twice."""
    inside: dict[str, Counter[str]] = {}
    for t in tests:
        if t.parent is not None:
            inside.setdefault(t.parent, Counter()).update(t.sdpa)
    out = []
    for t in tests:
        left = inside.get(t.nodeid)  # only a test that holds subtests has them: never a subtest (they do not nest)
        if left is None:
            out.append(t)
            continue
        out.append(dataclasses.replace(t, sdpa=without(t.sdpa, left)))
    return out


def without(tiers: tuple[str, ...], taken: Counter[str]) -> tuple[str, ...]:
    """`tiers` in order, less one token for each `taken` counts (a test's tiers, less its subtests')."""
    left = Counter(taken)
    kept = []
    for tier in tiers:
        if left[tier] > 0:
            left[tier] -= 1
        else:
            kept.append(tier)
    return tuple(kept)


def census(tests: list[TestResult]) -> Dispatch:
    """Every SdpaKernel token of every test and subtest, in order, with totals per tier (units: none twice)."""
    per_test = {t.nodeid: list(t.sdpa) for t in units(tests) if t.sdpa}
    tokens = Counter(tier for tiers in per_test.values() for tier in tiers)
    tests_per_tier = Counter(tier for tiers in per_test.values() for tier in set(tiers))
    return Dispatch(per_test, dict(sorted(tokens.items())), dict(sorted(tests_per_tier.items())))
