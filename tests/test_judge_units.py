"""verdicts.judge and the cross-checks of its witnesses in-process: each witness disagreeing on its
own, with the whole list of reasons, and the verdict's parts (tests/test_faults.py proves each through a real
run that lies)."""
from __future__ import annotations

from ort_gpu_matrix.config.kernels import CUDNN, TEETH_MESSAGE
from ort_gpu_matrix.config.model import Observation, PassExpect, Rule, TeethExpect
from ort_gpu_matrix.execute.junit import JunitCounts
from ort_gpu_matrix.judge.counts import Counts, Dispatch
from ort_gpu_matrix.judge.libraries import Libraries
from ort_gpu_matrix.judge.stale import StaleRule, stale_in
from ort_gpu_matrix.judge.verdicts import (
    Standard,
    Status,
    TeethCoverage,
    judge,
    judge_teeth,
    outcome_judge,
    refused,
    scoped,
)
from ort_gpu_matrix.judge.witnesses import Evidence
from ort_gpu_matrix.util import codec

COUNTS = outcome_judge("normal")  # COUNTS, as a mode's judge is called: handed a census it never reads


def report(tests, exitstatus=0, **kw):
    return {"tests": tests, "exitstatus": exitstatus, "audits": [], "collected": {"main": len(tests)}, **kw}


def ev(rep, exit_code=0, junit=None, **kw):
    base = dict(exit_code=exit_code, report=rep, report_sha256="d", report_problem=None, digest="d", junit=junit,
                junit_problem=None, collected=None)
    return Evidence(**{**base, **kw})


PASSING = {"t::a": {"outcome": "passed", "sdpa": ["MATH"]}, "t::b": {"outcome": "passed", "reruns": 1}}


def test_a_clean_run_passes_with_its_parts():
    v = judge(ev(report(PASSING), junit=JunitCounts(0, 0, 0)), Standard(COUNTS, PassExpect(), (), '/venv'))
    assert (v.status, v.reasons, v.warnings) == (Status.PASS, [], [])
    assert v.counts == Counts(2, 2) and v.dispatch == Dispatch({"t::a": ["MATH"]}, {"MATH": 1}, {"MATH": 1})
    assert v.outcomes == {"t::a": "passed", "t::b": "passed"} and v.reruns == {"t::b": 1}
    assert v.libraries == Libraries({"cudnn": None, "cudart": None}, []) and v.teeth_coverage is None


def reasons(e, expect=None, judge_=COUNTS):
    return judge(e, Standard(judge_, expect or PassExpect(), (), '/venv')).reasons


def test_each_witness_that_disagrees_is_a_reason():
    r = report(PASSING)
    assert reasons(ev(r, digest=None)) == ["the probe sent no digest of its report, so the report cannot be trusted"]
    assert reasons(ev(r, digest="other")) == [
        "the probe's report was changed after the probe wrote it (its sha256 is not the one the probe sent): the "
        "tests' own code edited it"]
    assert reasons(ev(r, exit_code=1)) == ["the probe's report says pytest exited 0, but the process exited 1",
                                           "pytest exited 1 but no failure was recorded"]
    assert reasons(ev(report(PASSING, exitstatus=0), exit_code=6)) == [  # --max-warnings applied after the session
        "pytest failed the run for too many warnings (exit 6, pytest >= 9.1)"]
    assert reasons(ev(report(PASSING, exitstatus=1), exit_code=6))[1] == (
        "the probe's report says pytest exited 1, but the process exited 6")
    failing = report({**PASSING, "t::f": {"outcome": "failed", "message": "m"}}, exitstatus=0)
    assert reasons(ev(failing, exit_code=0)) == ["pytest exited 0 but 1 failure(s) or error(s) were recorded",
                                                 "1 unexpected failure(s): t::f failed: m"]
    errors = report({**PASSING, "t::e": {"outcome": "error"}}, exitstatus=0)
    assert reasons(ev(errors, exit_code=0))[0] == "pytest exited 0 but 1 failure(s) or error(s) were recorded"
    short = report(PASSING, collected={"main": 3})
    assert reasons(ev(short)) == ["3 collected, 2 with an outcome"]
    assert reasons(ev(report(PASSING, collected={"main": 2}))) == []
    assert reasons(ev(r, junit_problem="junit.xml: bad")) == ["junit.xml: bad"]
    assert reasons(ev(r, junit=JunitCounts(1, 2, 3))) == [
        "the probe's report and pytest's junit file disagree (failed: the probe 0, junit 1; errors: the probe 0, "
        "junit 2; skipped or xfailed: the probe 0, junit 3)"]
    mixed = report({**PASSING, "t::s": {"outcome": "skipped", "message": "ok"}, "t::x": {"outcome": "xfailed"}})
    assert reasons(ev(mixed, junit=JunitCounts(0, 0, 2)), PassExpect(allowed_skips=("ok",))) == []
    assert reasons(ev(mixed, junit=JunitCounts(0, 0, 1)), PassExpect(allowed_skips=("ok",))) == [
        "the probe's report and pytest's junit file disagree (skipped or xfailed: the probe 2, junit 1)"]


def test_a_run_without_a_report_or_stopped_says_only_that():
    assert reasons(ev(None, exit_code=0)) == [
        "the ort-matrix probe wrote no report: pytest never reached the end of its session (see the log)",
        "nothing passed"]
    assert reasons(ev(report(PASSING), report_problem="report.json: not a report")) == ["report.json: not a report"]
    assert reasons(ev(None, exit_code=None, stopped="timed out after 5 s", running=("t::a", "t::b")))[0] == (
        "timed out after 5 s; running: t::a; t::b")
    assert reasons(ev(None, exit_code=None, stopped="timed out"))[0] == "timed out"
    assert reasons(ev(report(PASSING, exitstatus=2), exit_code=2)) == [
        "pytest was interrupted (exit 2): a collection error or Ctrl-C stopped the run"]
    assert reasons(ev(report(PASSING, exitstatus=9), exit_code=9)) == ["pytest ended with unexpected exit code 9"]
    assert reasons(ev(report(PASSING, exitstatus=1), exit_code=1))[0] == "pytest exited 1 but no failure was recorded"
    assert reasons(ev(report(PASSING), exit_code=0, collected=5)) == []  # the report's count wins over progress
    assert judge(ev(None, exit_code=None, stopped='x', collected=4), Standard(COUNTS, PassExpect(), (), '/v')).counts == \
        Counts(collected=4)


def test_stale_rules_count_only_in_complete_runs_and_their_own_cells():
    rule_here = Rule("t::gone", "r", (Observation("c1", "1", "2026-12-01"),))
    e = PassExpect(known_failures=(rule_here, Rule("t::also", "r2")))
    v = judge(ev(report(PASSING)), Standard(COUNTS, e, (), '/venv', 'c1'))
    assert [s.pattern for s in v.stale_rules] == ["t::gone", "t::also"]
    assert v.warnings == [s.warning() for s in v.stale_rules]
    assert v.warnings[1] == ("stale rule: known_failures 't::also' matched nothing in this run (it matched no test "
                             "that ran (gone, renamed or deselected)); `nox -s calibrate` drops it")
    v = judge(ev(report(PASSING)), Standard(COUNTS, e, (), '/venv', 'c2'))
    assert [s.pattern for s in v.stale_rules] == ["t::also"]
    assert judge(ev(report(PASSING), digest=None), Standard(COUNTS, e, (), '/venv')).stale_rules == []
    found = [StaleRule("k", "p", "", "w", ("c1",)), StaleRule("k", "q", "", "w")]
    assert stale_in(found, None, True) == found and stale_in(found, "c1", False) == []
    assert stale_in(found, "c3", True) == found[1:]


def test_teeth_through_judge_with_prior_and_unattributed_tokens_and_dispatch_rules():
    rep = report({"t::a": {"outcome": "failed", "message": TEETH_MESSAGE}}, exitstatus=1,
                 unattributed_sdpa=["MATH", "CUDNN_FLASH_ATTENTION", "MATH"])
    v = judge(ev(rep, exit_code=1), Standard(judge_teeth, TeethExpect(forbid_kernels=('MATH',)), (), '/venv'), prior=Dispatch({'t::a': ['CUDNN_FLASH_ATTENTION'], 't::b': ['CUDNN_FLASH_ATTENTION']}))
    assert v.reasons == ["1 test(s) dispatched CUDNN_FLASH_ATTENTION in require_cudnn but teeth did not run them: t::b; "
                         "teeth runs them once a run on record shows them (run again), or with --full"]
    assert v.warnings == ["3 SdpaKernel token(s) printed while no session that asked for the CUDA EP was running "
                          "were not counted (CUDNN_FLASH_ATTENTION, MATH)"]
    assert v.teeth_coverage == TeethCoverage(True, CUDNN, 2, 1, 0, [], [], ["t::a"])  # t::b: not run, not toothless
    assert v.status is Status.FAIL
    ran = report({"t::a": {"outcome": "failed", "message": TEETH_MESSAGE}, "t::b": {"outcome": "passed"}}, exitstatus=1)
    v = judge(ev(ran, exit_code=1), Standard(judge_teeth, TeethExpect(), (), '/venv'),
              prior=Dispatch({'t::a': ['CUDNN_FLASH_ATTENTION'], 't::b': ['CUDNN_FLASH_ATTENTION']}))
    assert v.reasons == ["1 toothless test(s): dispatched CUDNN_FLASH_ATTENTION in require_cudnn but did not fail "
                         "with the verbatim message when MATH was forced: t::b"]
    assert v.teeth_coverage == TeethCoverage(True, CUDNN, 2, 1, 1, [], ["t::b"], ["t::a"])
    rep = report({"t::a": {"outcome": "passed", "sdpa": ["MATH"]}})
    assert reasons(ev(rep), PassExpect(forbid_kernels=("MATH",))) == [
        "1 test(s) dispatched forbidden MATH: t::a ran MATH"]


def test_to_dicts_scoped_and_refused():
    assert codec.encode(TeethCoverage()) == {"checked": False, "scope": "all"}
    assert codec.encode(TeethCoverage(scope="cudnn", selected=3)) == {"checked": False, "scope": "cudnn", "selected": 3}
    assert codec.encode(TeethCoverage(True, "FLASH_ATTENTION", 3, 2, 1, ["d"], ["u"], ["b1", "b2"])) == {
        "checked": True, "tier": "FLASH_ATTENTION", "tier_tests": 3, "bitten": 2, "toothless": 1, "declared_toothless": ["d"],
        "undeclared_toothless": ["u"], "bitten_tests": ["b1", "b2"], "scope": "all"}
    s = StaleRule("known_failures", "t::x", "why", "no longer fails", ("c1",), "t::x (passed)")
    assert s.why == "no longer fails: t::x (passed)" and StaleRule("k", "p", "r", "w").why == "w"
    assert codec.encode(s.record("normal")) == {"mode": "normal", "key": "known_failures", "pattern": "t::x", "reason": "why",
                                   "why": "no longer fails: t::x (passed)", "what": "no longer fails"}
    v = judge(ev(report(PASSING)), Standard(COUNTS, PassExpect(), (), '/venv'))
    sv = scoped(v, "cudnn", 4)
    assert sv.teeth_coverage == TeethCoverage(scope="cudnn", selected=4) and sv.reasons == v.reasons
    cov = TeethCoverage(True, CUDNN, 1, 1, 0, [], [], ["t::a"])
    import dataclasses
    assert scoped(dataclasses.replace(v, teeth_coverage=cov), "all", None).teeth_coverage == cov
    r = refused("no census", "cudnn")
    assert (r.status, r.reasons, r.warnings, r.counts, r.dispatch) == (Status.FAIL, ["no census"], [], Counts(), Dispatch())
    assert r.teeth_coverage == TeethCoverage(scope="cudnn") and r.libraries == Libraries()


def test_the_verdict_carries_every_part_the_report_gives():
    from ort_gpu_matrix.config.model import FlakyRule, TierRule
    from ort_gpu_matrix.host.ortsource import SourceTree
    from ort_gpu_matrix.judge import tiers
    tests = {"t::a": {"outcome": "passed", "sdpa": ["CUDNN_FLASH_ATTENTION"]}, "t::fl": {"outcome": "failed", "message": "x"}}
    rep = report(tests, exitstatus=1, provenance={"ort": {"version": "1.31.0"}},
                 audits=[{"pid": 4, "process": "main", "by_name": {}, "mapped": [], "preload": [], "cudnn_copies": []}],
                 pollution=[{"test": "t::a", "scope": "function", "process": "main",
                             "changes": [{"what": "env", "name": "X", "before": None, "after": "1"}], "undone": True,
                             "later_tests": 1}])
    rule = TierRule("t::a", ("MATH",))
    flaky = FlakyRule("t::fl", ("failed", "passed"), (), "r")
    e = PassExpect(tiers=(rule,), known_flaky=(flaky,))
    v = judge(ev(rep, exit_code=1, junit=JunitCounts(1, 0, 0)), Standard(COUNTS, e, (), '/venv'), source=SourceTree('/ort', '1.33.0'))
    assert v.reasons == ["tier rule 't::a' (only MATH) broken by 1 test(s): t::a dispatched CUDNN_FLASH_ATTENTION x1"]
    assert v.warnings == ["version skew: tests from 1.33.0 against wheel 1.31.0 (major.minor differ)",
                          "pollution: t::a left X (unset) -> '1' (undone; 1 later test(s) of main ran without it)"]
    assert v.counts == Counts(2, 1, 1) and v.libraries.audits == rep["audits"]
    assert v.tier_breaks == [tiers.Break(rule, "t::a", ("CUDNN_FLASH_ATTENTION",))]
    assert v.known_flaky == {"t::fl": {"outcomes": ["failed", "passed"], "tiers": []}}


def test_without_a_collected_count_the_reports_tests_are_counted():
    rep = {"tests": PASSING, "exitstatus": 0, "audits": []}
    v = judge(ev(rep, junit=JunitCounts(0, 0, 0)), Standard(COUNTS, PassExpect(), (), '/venv'))
    assert v.counts.collected == 2 and v.counts.passed == 2


# The EP census lines of the verdict, in-process: what mutmut's run reaches (tests/test_eptruth.py
# proves the same through real runs, which mutmut's in-process tests do not).
CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
SERVED = {"session": 1, "asked": [CUDA, CPU], "served": [CUDA, CPU], "runs": {CUDA: 2}}
RETRIED = {"session": 2, "asked": [CUDA, CPU], "served": [CPU], "runs": {CPU: 1}, "fallback": "retried",
           "reason": "CUDA failure 100: no CUDA-capable device is detected"}


def test_the_census_of_each_test_is_read_with_its_outcome_and_a_crash_keeps_its_own():
    from ort_gpu_matrix.judge.verdicts import tests_of

    got = tests_of({"tests": {"t::a": {"outcome": "passed", "ep": [SERVED]},  # type: ignore[typeddict-item]
                              "t::b": {"ep": [RETRIED]},
                              "t::c": {"outcome": "passed", "teardown_error": "td", "ep": [SERVED]}}})
    assert [(t.nodeid, t.outcome, t.ep) for t in got] == [
        ("t::a", "passed", (SERVED,)), ("t::b", "error", (RETRIED,)), ("t::c", "passed", (SERVED,)),
        ("t::c::teardown", "error", ())]  # the teardown's own entry carries no census: its test's does


def test_a_census_counts_as_taken_from_report_version_3_on():
    tests = {"t::a": {"outcome": "passed", "ep": [SERVED]}}
    std = Standard(COUNTS, PassExpect(), (), "/venv")
    assert judge(ev(report(tests, report_version=3)), std).ep.taken is True
    assert judge(ev(report(tests, report_version=4)), std).ep.taken is True
    assert judge(ev(report(tests, report_version=2)), std).ep.taken is False  # before the census existed
    assert judge(ev(report(tests)), std).ep.taken is False  # no version at all
    assert judge(ev(None, exit_code=None, stopped="x"), std).ep.taken is False
    v = judge(ev(report(tests, report_version=3)), std)
    assert v.ep.tests["t::a"].runs == {CUDA: 2} and v.ep.cuda_runs == 2


def test_a_fallback_no_rule_allows_fails_and_a_stale_ep_rule_names_its_cells_and_tests():
    from ort_gpu_matrix.config.model import CudaRunsRule, FallbackRule

    tests = {"t::a": {"outcome": "passed", "ep": [SERVED]}, "t::b": {"outcome": "passed", "ep": [RETRIED]}}
    seen = (Observation("c1", "1.31.1", "2026-12-01"), Observation("c2", "1.31.1", "2026-12-01"))
    expect = PassExpect(allowed_fallbacks=(FallbackRule("t::a", "no CUDA-capable", "a's", seen),),
                        cuda_runs=(CudaRunsRule("t::zz", 1, "zz's", seen),))
    v = judge(ev(report(tests, report_version=3)), Standard(COUNTS, expect, (), "/venv", "c1"))
    assert v.reasons == ["1 test(s) asked for the CUDA EP and were served by another (no allowed_fallbacks rule "
                         "matches): t::b asked for CUDAExecutionProvider, CPUExecutionProvider, served by "
                         "CPUExecutionProvider (ORT's Python wrapper caught the EP error and retried on the CPU: "
                         "CUDA failure 100: no CUDA-capable device is detected)"]
    assert v.stale_rules == [
        StaleRule("allowed_fallbacks", "t::a", "a's", "no test it matches fell back", ("c1", "c2"), "t::a"),
        StaleRule("cuda_runs", "t::zz", "zz's", "it matched no test that ran (gone, renamed or deselected)",
                  ("c1", "c2"), "")]
    assert [f.nodeid for f in v.ep.unallowed()] == ["t::b"]


def test_a_teardown_error_id_names_its_test_and_counts_as_that_test_when_both_are_listed():
    from ort_gpu_matrix.judge.outcomes import TEARDOWN, collected, teardown_of, test_of
    assert teardown_of("f.py::t") == "f.py::t::teardown" and TEARDOWN == "::teardown"
    assert test_of("f.py::t::teardown") == "f.py::t" and test_of("f.py::t") == "f.py::t"
    assert test_of("f.py::teardown_x") == "f.py::teardown_x"  # only the exact suffix
    # a teardown error beside its own test is that test; one whose test is not listed is kept (its test is gone)
    assert collected(["f.py::a", "f.py::a::teardown", "f.py::b::teardown", "f.py::c"]) == [
        "f.py::a", "f.py::b::teardown", "f.py::c"]
    assert collected(iter(["f.py::a::teardown", "f.py::a"])) == ["f.py::a"]  # any iterable, in its order
    assert collected([]) == []
