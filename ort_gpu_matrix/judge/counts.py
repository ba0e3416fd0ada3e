"""A run's tests counted and censused, so that every judge of the run reads the same numbers.

The verdict, the reruns and calibrate all read a run through these types: the counts a reason quotes,
the counts junit is checked against and the census teeth's coverage reads cannot drift apart.
"""
from __future__ import annotations

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


@dataclass(frozen=True)
class Counts:
    collected: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0


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
    c = Counter(t.outcome for t in tests)
    if collected is None:
        collected = len(report["tests"] if report else {})
    return Counts(collected=collected, passed=c["passed"], failed=c["failed"], errors=c["error"],
                  skipped=c["skipped"], xfailed=c["xfailed"], xpassed=c["xpassed"])


def census(tests: list[TestResult]) -> Dispatch:
    """Every SdpaKernel token of every test, in order, with totals per tier."""
    per_test = {t.nodeid: list(t.sdpa) for t in tests if t.sdpa}
    tokens = Counter(tier for tiers in per_test.values() for tier in tiers)
    tests_per_tier = Counter(tier for tiers in per_test.values() for tier in set(tiers))
    return Dispatch(per_test, dict(sorted(tokens.items())), dict(sorted(tests_per_tier.items())))
