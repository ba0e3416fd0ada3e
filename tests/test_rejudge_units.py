"""A stored run judged again with the tests confirmation cleared, in-process (judge/rejudge.py): the reasons the
expectations gave are replaced by what they give now, every other first-run reason stays, and the counts,
census, outcomes, teeth's coverage and EP census follow the amended tests (test_flakes.py and test_sweep_trust.py
prove the same through real sweeps)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ort_gpu_matrix.config.kernels import TEETH_MESSAGE
from ort_gpu_matrix.config.model import PassExpect, TeethExpect
from ort_gpu_matrix.judge.counts import Counts, Dispatch, count
from ort_gpu_matrix.judge.counts import TestResult as T
from ort_gpu_matrix.judge.eps import EpCensus
from ort_gpu_matrix.judge.rejudge import rejudge
from ort_gpu_matrix.judge.verdicts import Standard, Status, TeethCoverage, judge_teeth, outcome_judge
from ort_gpu_matrix.judge.verdicts import tests_of as read_tests

CUDNN, MATH = "CUDNN_FLASH_ATTENTION", "MATH"


@dataclass(frozen=True)
class First:
    reasons: list[str]
    counts: Counts
    teeth_coverage: TeethCoverage | None = None
    ep: EpCensus = field(default_factory=EpCensus)


REPORT = {"tests": {"t::a": {"outcome": "passed", "sdpa": [MATH]},
                    "t::b": {"outcome": "failed", "message": "boom", "sdpa": [MATH]}},
          "collected": {"gw0": 3, "gw1": 2}}  # the collecting processes' count, not the tests reported on
FAILED = "1 unexpected failure(s): t::b failed: boom"


def test_a_cleared_failure_takes_its_reason_with_it_and_the_counts_follow():
    first = First([FAILED], count(REPORT, read_tests(REPORT)))  # type: ignore[arg-type]
    again = rejudge(Standard(outcome_judge("normal"), PassExpect()), REPORT, {"t::b": T("t::b", "passed", "", (CUDNN,))},  # type: ignore[arg-type]
                    first, None)
    assert again.status is Status.PASS and again.reasons == []
    assert again.counts == Counts(3, 2) and first.counts == Counts(2, 1, 1)
    assert again.outcomes == {"t::a": "passed", "t::b": "passed"}
    assert again.dispatch == Dispatch({"t::a": [MATH], "t::b": [CUDNN]}, {MATH: 1, CUDNN: 1}, {MATH: 1, CUDNN: 1})
    assert again.teeth_coverage is None and again.tier_breaks == [] and again.ep == EpCensus()


def test_a_reason_the_expectations_did_not_give_stays_and_a_reason_still_given_is_given_again():
    crosscheck = "junit counts 1 failed, the probe 2"
    first = First([crosscheck, FAILED], Counts(2, 1, 1))
    uncounted = {"tests": REPORT["tests"]}  # no process counted what it collected: the tests reported on count
    kept = rejudge(Standard(outcome_judge("normal"), PassExpect()), uncounted, {"t::b": T("t::b", "passed", "", ())},  # type: ignore[arg-type]
                   first, None)
    assert kept.status is Status.FAIL and kept.reasons == [crosscheck] and kept.counts == Counts(2, 2)
    still = rejudge(Standard(outcome_judge("normal"), PassExpect(min_passed=3)), REPORT,  # type: ignore[arg-type]
                    {"t::b": T("t::b", "passed", "", ())}, First([FAILED, "only 1 passed, min_passed is 3"],
                                                                Counts(2, 1, 1), ep=EpCensus(taken=True)), None)
    assert still.reasons == ["only 2 passed, min_passed is 3"] and still.ep == EpCensus(taken=True)


TEETH = {"tests": {"t::a": {"outcome": "failed", "message": TEETH_MESSAGE},
                   "t::c": {"outcome": "failed", "message": "other"}}}


def test_teeth_coverage_is_judged_again_only_where_it_was_checked_and_keeps_its_scope():
    prior = Dispatch({"t::a": [CUDNN], "t::c": [CUDNN]})
    bite = {"t::c": T("t::c", "failed", TEETH_MESSAGE, ())}
    scoped = TeethCoverage(True, CUDNN, 2, 1, 1, [], ["t::c"], ["t::a"], "cudnn", 2)
    toothless = (f"1 toothless test(s): dispatched {CUDNN} in require_cudnn but did not fail with the verbatim "
                 "message when MATH was forced: t::c")
    first = First(["1 failure(s) other than the canary's: t::c failed: other", toothless], Counts(2, 0, 2), scoped)
    again = rejudge(Standard(judge_teeth, TeethExpect()), TEETH, bite, first, prior)  # type: ignore[arg-type]
    assert again.reasons == [] and again.status is Status.PASS
    passed = rejudge(Standard(judge_teeth, TeethExpect()), TEETH, {"t::c": T("t::c", "passed", "", ())},  # type: ignore[arg-type]
                     first, prior)
    assert passed.reasons == [toothless]  # judged with require_cudnn's census, as the first run was
    assert again.teeth_coverage == TeethCoverage(True, CUDNN, 2, 2, 0, [], [], ["t::a", "t::c"], "cudnn", 2)
    unchecked = TeethCoverage(scope="cudnn", selected=2)
    assert rejudge(Standard(judge_teeth, TeethExpect()), TEETH, bite,  # type: ignore[arg-type]
                   First([], Counts(2, 0, 2), unchecked), prior).teeth_coverage is unchecked
    assert rejudge(Standard(judge_teeth, TeethExpect()), TEETH, bite,  # type: ignore[arg-type]
                   First([], Counts(2, 0, 2), scoped), None).teeth_coverage is scoped
