"""A stored run judged again once confirmation replaced the tests whose change did not reproduce.

A change a rerun did not reproduce must not decide the verdict, so those tests are judged by the
rerun that cleared them, and everything that derives from outcomes is derived again by the same
judge that judged the first run: the counts, the census, the expectations' reasons, teeth's
coverage, the tier rules' breaks and the EP judgement. What the expectations did not decide (the
witnesses' cross-checks, the library audit) stays as the first run found it: of the first run's
reasons, only those its expectations gave are replaced by what they give now.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ort_matrix_probe.schema import ProbeReport

from . import eps
from .counts import Counts, Dispatch, TestResult, census, collected_of, count
from .tiers import Break
from .verdicts import Standard, Status, TeethCoverage, expectation_reasons, tests_of


class FirstJudging(Protocol):
    """What the first judging of a run said, as its stored result keeps it (store.results.Result is one)."""

    @property
    def reasons(self) -> list[str]: ...

    @property
    def counts(self) -> Counts: ...

    @property
    def teeth_coverage(self) -> TeethCoverage | None: ...

    @property
    def ep(self) -> eps.EpCensus: ...


@dataclass(frozen=True)
class Rejudged:
    """The verdict's values that follow the amended tests; the caller records them in place of the first run's."""

    status: Status
    reasons: list[str]
    counts: Counts
    dispatch: Dispatch
    teeth_coverage: TeethCoverage | None
    tier_breaks: list[Break]
    outcomes: dict[str, str]
    ep: eps.EpCensus


def rejudge(standard: Standard, report: ProbeReport, replaced: Mapping[str, TestResult], first: FirstJudging,
            prior: Dispatch | None) -> Rejudged:
    """The run of `report` judged with each test in `replaced` taken from there, against the same `standard` and
    teeth's require_cudnn census `prior` (None: none of the same venv). Teeth's coverage is judged again only where
    the first run's was checked; it keeps the scope that run ran under."""
    raw = tests_of(report)
    tests = [replaced.get(t.nodeid, t) for t in raw]
    counts = count(report, tests, collected_of(report, None))
    judge_fn, expect = standard.outcomes, standard.expect
    before = expectation_reasons(judge_fn, expect, raw, first.counts, prior)
    after = expectation_reasons(judge_fn, expect, tests, counts, prior)
    reasons = [x for x in first.reasons if x not in before] + after
    findings = judge_fn(expect, tests, counts, prior)
    coverage = first.teeth_coverage
    if coverage is not None and coverage.checked and prior is not None and findings.coverage is not None:
        coverage = dataclasses.replace(findings.coverage, scope=coverage.scope, selected=coverage.selected)
    return Rejudged(Status.FAIL if reasons else Status.PASS, reasons, counts, census(tests), coverage,
                    findings.tier_breaks, {t.nodeid: t.outcome for t in tests},
                    eps.judge(expect, tests, first.ep.taken, first.ep.nodes_taken)[0])  # reports and baselines read it
