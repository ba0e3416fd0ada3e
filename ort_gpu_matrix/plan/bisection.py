"""Halving over ordered builds, for many tests at once: which build changed each followed test.

Every followed test starts with the span (0, n-1): good at the first build, bad at the last. A step runs
one build for every test whose span holds it, and each verdict shrinks that test's span: good moves its
last good build up, bad moves its first bad build down. So N builds take about log2(N) steps, and tests
that changed at different builds part ways by themselves: the tests whose verdicts agree at every step
keep one span, and end as one group. As `git bisect skip` does, a build that could not be tested (its venv
would not build, its run broke) is neither good nor bad: the next step takes the untested build nearest the
middle instead, and a span whose builds between are all untestable ends as a range, never a guess. A test
whose reruns disagreed at a build is untestable there for that test alone. Pure: the caller runs the builds.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .builds import Build


class StepVerdict(enum.StrEnum):
    """What one build says of one followed test: as at the good end, as at the bad end, or untestable there."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


GOOD, BAD, SKIP = StepVerdict.GOOD, StepVerdict.BAD, StepVerdict.SKIP


@dataclass
class Spans:
    """Each followed test's last good and first bad build (indices), and the builds it could not be judged at."""

    n: int
    spans: dict[str, tuple[int, int]]
    skipped: dict[str, set[int]] = field(default_factory=dict)
    contradicted: dict[str, str] = field(default_factory=dict)  # test -> why it left halving (changed back)

    @classmethod
    def start(cls, n: int, tests: Sequence[str]) -> Spans:
        return cls(n, {t: (0, n - 1) for t in tests}, {t: set() for t in tests})

    def open(self, test: str) -> list[int]:
        """The builds still worth a step for this test: inside its span, not yet found untestable."""
        if test in self.contradicted:
            return []
        lo, hi = self.spans[test]
        return [i for i in range(lo + 1, hi) if i not in self.skipped[test]]

    def record(self, index: int, verdicts: Mapping[str, StepVerdict]) -> None:
        """One step's verdicts at build `index` (tests it did not run keep their span)."""
        for test, verdict in verdicts.items():
            lo, hi = self.spans[test]
            if verdict == SKIP:
                self.skipped[test].add(index)
            elif verdict == GOOD and index < hi:
                self.spans[test] = (max(lo, index), hi)
            elif verdict == BAD and index > lo:
                self.spans[test] = (lo, min(hi, index))
            else:
                self.contradicted[test] = f"{verdict} at build {index}, outside its span ({lo}, {hi})"


def next_step(spans: Spans) -> tuple[int, list[str]] | None:
    """The next build to run and the tests to run there, or None when every span is closed.

    The tests whose span is widest go first; the build is the untested one nearest their span's middle.
    Every other open test whose span holds that build runs along: one venv, one run, more answers."""
    candidates = [t for t in sorted(spans.spans) if spans.open(t)]
    if not candidates:
        return None
    widest = max(candidates, key=lambda t: (len(spans.open(t)), -spans.spans[t][0]))
    lo, hi = spans.spans[widest]
    middle = (lo + hi) / 2
    index = min(spans.open(widest), key=lambda i: (abs(i - middle), i))
    return index, [t for t in candidates if index in spans.open(t)]


@dataclass(frozen=True)
class BisectGroup:
    """Tests that changed between the same two builds: `last_good` and `first_bad` are indices, and `untested` the
    builds between them that could not be tested (the change is at one of them or at first_bad)."""

    tests: tuple[str, ...]
    last_good: int
    first_bad: int
    untested: tuple[int, ...]

    @property
    def located(self) -> bool:
        return not self.untested


def replayed(n: int, tests: Sequence[str], steps: Sequence[StepRun]) -> Spans:
    """The spans after `steps`, in the order they ran: how --resume goes on, and how a saved record's groups are
    found again (the ends, index 0 and n-1, are where every span starts, so they change none)."""
    spans = Spans.start(n, tests)
    for s in steps:
        if 0 < s.index < n - 1:
            spans.record(s.index, s.verdicts)
    return spans


def groups(spans: Spans) -> tuple[list[BisectGroup], dict[str, str]]:
    """The closed spans, one group per span; and the tests that left halving, with why."""
    by_span: dict[tuple[int, int, tuple[int, ...]], list[str]] = {}
    for test, (lo, hi) in sorted(spans.spans.items()):
        if test in spans.contradicted:
            continue
        untested = tuple(i for i in range(lo + 1, hi) if i in spans.skipped[test])
        by_span.setdefault((lo, hi, untested), []).append(test)
    out = [BisectGroup(tuple(tests), lo, hi, untested) for (lo, hi, untested), tests in by_span.items()]
    return sorted(out, key=lambda g: (g.first_bad, g.last_good, g.tests)), dict(spans.contradicted)


@dataclass(frozen=True)
class StepRun:
    """What one build said: each test's line in every run (first, then its reruns) and its verdict; or why the
    whole build was skipped. `run_ids`: the stored results, first run first."""

    index: int
    build: Build
    tests: tuple[str, ...]
    verdicts: dict[str, StepVerdict]
    lines: dict[str, list[str]] = field(default_factory=dict)
    skipped: str | None = None
    seconds: float = 0.0
    run_ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # milliseconds, as bisect.json stores them: a record read back renders exactly as the one that was written
        object.__setattr__(self, "seconds", round(self.seconds, 3))
