"""Subtests in the engine, in process: ids read back to their test, which rules cover them, how junit counts
them, what a verdict names, and when calibrate folds a test's subtests into one rule."""
from types import SimpleNamespace

import pytest

from ort_gpu_matrix.calibrate.seen import Item, folded
from ort_gpu_matrix.config.model import PassExpect, Rule, TeethExpect, TierRule
from ort_gpu_matrix.execute import summary
from ort_gpu_matrix.judge import outcomes, verdicts
from ort_gpu_matrix.judge.counts import TestResult as Ran
from ort_gpu_matrix.judge.counts import census, count, units
from ort_gpu_matrix.judge.covers import covers, rule_covers
from ort_gpu_matrix.judge.expected import SUBTESTS_EXPECTED, expected_of
from ort_gpu_matrix.judge.subtests import as_judged, bitten, junit_counts, summary_counts
from ort_gpu_matrix.judge.verdicts import Standard, judge, judge_counts, judge_teeth, outcome_judge
from ort_gpu_matrix.judge.witnesses import Evidence, cross_checks, summary_reasons
from ort_matrix_probe.report import SUBTEST_PROP, record, settle
from ort_matrix_probe.schema import parent_of, subtest_description

T = "f.py::TestOps::test_loop"


def passing(n):
    return [Ran(f"f.py::test_ok{i}", "passed", "", ()) for i in range(n)]


def teeth_expect(**kw):
    return TeethExpect(**kw)

S1, S2 = f"{T} [case] (i=1)", f"{T} [case] (i=2)"
CANARY = "AssertionError: 'CUDNN_FLASH_ATTENTION' != 'MATH'"


@pytest.mark.parametrize("nodeid, parent", [
    (S1, T),
    ("f.py::t[a b] (i=1)", "f.py::t[a b]"),  # a space inside a parameter's brackets is the test's own
    ("my dir/f.py::t (<subtest>) #2", "my dir/f.py::t"),  # a path with a space; a repeat's number
    ("f.py::t [a::b]", "f.py::t"),  # a message with `::` in it
    ("f.py::t[a b]", None),
    ("f.py::t[a (b)]", None),
    ("f.py::T::t", None),
    ("f.py::t::teardown", None),
    ("f.py", None),
])
def test_a_subtest_id_reads_back_to_its_test(nodeid, parent):
    assert parent_of(nodeid) == parent


def test_a_description_is_pytest_s_made_stable():
    assert subtest_description("dtype", {"i": 3, "name": "fp16"}) == "[dtype] (i=3, name='fp16')"
    assert subtest_description(None, {}) == "(<subtest>)"
    assert " at 0x" not in subtest_description(None, {"o": object()})  # an address differs in every process
    assert len(subtest_description(None, {"s": "x" * 1000})) == 300


def test_a_rule_covers_a_subtest_when_it_names_it_or_says_subtests():
    assert covers("test_loop", T) and not covers("test_loop", S1)  # written for the test: the test only
    assert covers("test_loop", S1, subtests=True)
    assert covers(r"test_loop \[case\] \(i=1\)", S1) and not covers(r"test_loop \[case\] \(i=1\)", S2)
    assert not covers("i=1", S1) and not covers(r"\(i=1\)$", S1)  # the description alone names no test
    assert covers(r"test_loop \[case\] \(i=1", S1)
    assert covers("^f\\.py::TestOps::test_loop$", S2, subtests=True)  # calibrate's folded rule
    assert not covers("other", S1, subtests=True)


def test_ids_a_rerun_selects_are_the_tests_pytest_collected():
    assert outcomes.test_of(S1) == T and outcomes.test_of(f"{T}::teardown") == T and outcomes.test_of(T) == T
    assert outcomes.collected([T, S1, S2, f"{T}::teardown"]) == [T]


def sub(nodeid, outcome, message="", sdpa=()):
    return Ran(nodeid, outcome, message, tuple(sdpa), parent=parent_of(nodeid))


def loop(outcome="failed", pytest_outcome="passed", sdpa=("CUDNN_FLASH_ATTENTION", "CUDNN_FLASH_ATTENTION")):
    return Ran(T, outcome, "contains 1 failed subtest", tuple(sdpa), by_subtests=outcome == "failed",
                      pytest_outcome=pytest_outcome)


def test_counts_keep_tests_and_subtests_apart_and_junit_counts_pytest_s_way():
    tests = [loop(), sub(S1, "failed", "AssertionError: broke", ["CUDNN_FLASH_ATTENTION"]),
             sub(S2, "skipped", "no kernel"), Ran("f.py::t2", "passed", "", ())]
    c = count(None, tests, collected=2)
    assert (c.passed, c.failed, c.subtests_failed, c.subtests_skipped, c.subtests) == (1, 1, 1, 1, 2)
    more = count(None, [*tests, sub(f"{T} [case] (i=3)", "passed"), sub(f"{T} [case] (i=4)", "xfailed", "known")])
    assert (more.subtests_passed, more.subtests_xfailed, more.subtests) == (1, 1, 4)
    assert junit_counts(tests) == (1, 0, 1)  # the subtest's failure; the test itself pytest called passed
    fixture_style = [loop(pytest_outcome=None), *tests[1:]]
    assert junit_counts(fixture_style) == (2, 0, 1)  # pytest failed that one itself: junit has both


def test_the_census_counts_each_tier_once_where_it_ran():
    tests = [loop(sdpa=("CUDNN_FLASH_ATTENTION", "MATH")), sub(S1, "passed", sdpa=["CUDNN_FLASH_ATTENTION"])]
    d = census(tests)
    assert d.tests == {S1: ["CUDNN_FLASH_ATTENTION"], T: ["MATH"]}  # the test keeps only what ran outside them
    assert d.totals == {"CUDNN_FLASH_ATTENTION": 1, "MATH": 1}
    assert [u.sdpa for u in units(tests)] == [("MATH",), ("CUDNN_FLASH_ATTENTION",)]


def test_a_verdict_names_each_failing_subtest_and_not_its_test_again():
    tests = [loop(), sub(S1, "failed", "AssertionError: broke"), sub(S2, "passed"), *passing(3)]
    found = judge_counts(PassExpect(), tests, count(None, tests))
    (line,) = [r for r in found.reasons if "unexpected" in r]
    assert line == f"1 unexpected failure(s): {S1} failed: AssertionError: broke"
    known = PassExpect(known_failures=(Rule(r"test_loop \[case\] \(i=1\)$", "known"),))
    assert judge_counts(known, tests, count(None, tests)).reasons == []
    assert expected_of(known, tests, None) == {S1: "known failure", T: SUBTESTS_EXPECTED}
    for_the_test = PassExpect(known_failures=(Rule("test_loop$", "known"),))
    assert any(S1 in r for r in judge_counts(for_the_test, tests, count(None, tests)).reasons)
    assert T not in expected_of(for_the_test, tests, None)  # one of its subtests is unexpected: so is it


def test_teeth_bites_through_subtests():
    tests = [loop(), sub(S1, "failed", CANARY), sub(S2, "failed", CANARY)]
    assert bitten(tests, CANARY) == {S1, S2}  # its test bites through them, never itself
    found = judge_teeth(teeth_expect(min_failures=2), tests, count(None, tests), None)
    assert not [r for r in found.reasons if "other than the canary" in r or "min_failures" in r], found.reasons
    half = [loop(), sub(S1, "failed", CANARY), sub(S2, "failed", "AssertionError: something else")]
    assert bitten(half, CANARY) == {S1}
    assert any(S2 in r for r in judge_teeth(teeth_expect(), half, count(None, half), None).reasons)


def test_pytest_s_summary_line_is_read_and_checked_in_its_own_categories(tmp_path):
    log = tmp_path / "pytest.log"
    log.write_text("x\n\x1b[31m===== 4 failed, 5 passed, 1 skipped, 8 subtests passed in 0.04s =====\x1b[0m\n")
    assert summary.read(log) == {"failed": 4, "passed": 5, "skipped": 1, "subtests passed": 8}
    log.write_text("== 2 failed, 2 passed, 1 error, 3 warnings in 1.00s (0:00:01) ==\n")
    assert summary.read(log) == {"failed": 2, "passed": 2, "error": 1, "warning": 3}
    log.write_text("the run died before its summary\n")
    assert summary.read(log) is None
    tests = [loop(), sub(S1, "failed", "AssertionError: broke"), sub(S2, "passed"), Ran("f.py::t2", "skipped", "", ())]
    assert summary_reasons({"failed": 1, "passed": 1, "skipped": 1}, tests, quiet=True) == []  # passing subtests left out
    assert summary_reasons({"failed": 1, "passed": 1, "skipped": 1, "subtests passed": 1}, tests, quiet=False) == []
    assert summary_reasons({"failed": 1, "passed": 2, "skipped": 1}, tests, quiet=True) == [
        "the probe's report and pytest's summary line disagree (passed: the probe 1, pytest 2)"]


def test_a_tier_rule_still_judges_the_passing_siblings_of_an_accepted_failing_subtest():
    tests = [loop(sdpa=("CUDNN_FLASH_ATTENTION", "MATH")), sub(S1, "failed", "AssertionError: broke",
             ["CUDNN_FLASH_ATTENTION"]), sub(S2, "passed", sdpa=["MATH"]), *passing(1)]
    expect = PassExpect(known_failures=(Rule(r"test_loop \[case\] \(i=1\)$", "known"),),
                        tiers=(TierRule("test_loop$", ("CUDNN_FLASH_ATTENTION",)),))
    reasons = judge_counts(expect, tests, count(None, tests)).reasons
    assert len(reasons) == 1 and "broken by 1 test(s)" in reasons[0] and "MATH" in reasons[0], reasons


def test_calibrate_folds_a_tests_subtests_only_where_no_run_of_it_passed_one():
    def item(text, seen):
        return Item(text, "AssertionError: broke", seen)
    failing = SimpleNamespace(tests=[loop(), sub(S1, "failed"), sub(S2, "failed")])
    passing = SimpleNamespace(tests=[Ran(T, "passed", "", ()), sub(S1, "passed"), sub(S2, "passed")])
    grouped = {S1: [item(S1, failing)], S2: [item(S2, failing)]}
    assert list(folded(grouped, [failing])[1]) == [T]
    left, per_test = folded(grouped, [failing, passing])  # another cell ran them and they passed there
    assert per_test == {} and sorted(left) == [S1, S2]


def test_a_test_that_skips_after_a_failing_subtest_is_failed_and_the_exit_code_agrees():
    entry = {"outcome": "skipped", "message": "later", "sdpa": [], "duration_s": 0.0,
             "subtests": {S1: {"outcome": "failed", "message": "AssertionError: broke", "sdpa": [], "duration_s": 0.0}}}
    settle(entry, "skipped")
    assert (entry["outcome"], entry["pytest_outcome"], entry["by_subtests"]) == ("failed", "skipped", True)


def test_a_rerun_attempt_takes_its_subtests_with_it():
    """pytest-rerunfailures: the failed attempt's subtests are not the next attempt's; its failures are kept as
    the rerun's messages, and the attempt that counts reports its own."""
    tests = {}

    def report(when, outcome, sub=None, message=""):
        props = [(SUBTEST_PROP, {"id": sub, "sdpa": [], "ep": [], "scoped": True})] if sub else []
        return SimpleNamespace(nodeid=T, when=when, outcome=outcome, user_properties=props, duration=0.0,
                               passed=outcome == "passed", failed=outcome == "failed", skipped=False,
                               longrepr=message or None)
    record(tests, report("call", "failed", S1, "AssertionError: first attempt"))
    record(tests, report("call", "rerun", message="contains 1 failed subtest"))
    assert "subtests" not in tests[T] and tests[T]["reruns"] == 1
    assert tests[T]["rerun_messages"] == [f"{S1}: AssertionError: first attempt"]
    record(tests, report("call", "passed", S1))
    record(tests, report("call", "passed"))
    record(tests, report("teardown", "passed"))
    settle(tests[T], "passed")
    assert tests[T]["outcome"] == "passed" and tests[T]["subtests"][S1]["outcome"] == "passed"


def test_subtests_reported_after_their_test_ended_are_warned_about():
    report = {"report_version": 4, "exitstatus": 0, "tests": {T: {
        "outcome": "passed", "message": "", "sdpa": ["MATH"], "duration_s": 0.0,
        "subtests": {S1: {"outcome": "passed", "message": "", "sdpa": [], "duration_s": 0.0, "unscoped": True}}}},
        "collection": [], "collected": {"controller": 1}, "audits": [], "outside_tests_sdpa": [],
        "unattributed_sdpa": []}
    ev = Evidence(0, report, None, None, None, None, None, None)
    v = judge(ev, Standard(outcome_judge("normal"), PassExpect(min_passed=0), (), "/venv"))
    assert any("1 subtest(s) were reported after their test ended" in w and S1 in w for w in v.warnings), v.warnings


def test_a_test_failed_by_its_subtests_is_judged_by_tier_rules_on_its_passing_parts_only():
    tests = [loop(sdpa=("FLASH_ATTENTION", "MATH", "MATH", "CUDNN_FLASH_ATTENTION")),
             sub(S1, "failed", "AssertionError: broke", ["MATH"]), sub(S2, "passed", sdpa=["MATH"]),
             Ran("f.py::t2", "failed", "own", ("MATH",))]
    judged = as_judged(tests)
    assert judged[0].outcome == "passed" and sorted(judged[0].sdpa) == ["CUDNN_FLASH_ATTENTION", "FLASH_ATTENTION",
                                                                        "MATH"]  # one MATH was the failing one's
    assert judged[1:] == tests[1:]  # subtests and other tests as they are
    twice = [loop(sdpa=("MATH", "MATH", "MATH")), sub(S1, "failed", "AssertionError: broke", ["MATH", "MATH"])]
    assert as_judged(twice)[0].sdpa == ("MATH",)  # each of the failing subtest's tokens taken once


def test_a_rule_names_a_subtest_across_the_boundary_and_says_subtests_through_rule_covers():
    assert covers(r"p \[case\]", S1)  # the end of its test's id and the start of its description
    assert not covers(r"\[case\] \(i=1\)$", S1)  # the whole description, but only the description
    assert rule_covers(Rule("test_loop$", "r", subtests=True), S1) and not rule_covers(Rule("test_loop$", "r"), S1)


def test_each_witness_count_adds_up_per_outcome():
    tests = [Ran("f.py::a", "passed", "", ()), Ran("f.py::b", "passed", "", ()), Ran("f.py::c", "error", "x", ()),
             Ran("f.py::d", "xfailed", "x", ()), sub("f.py::a [m] (i=1)", "passed"), sub("f.py::a [m] (i=2)", "passed")]
    assert junit_counts(tests) == (0, 1, 1)
    assert summary_counts(tests, quiet=False) == {"passed": 2, "error": 1, "xfailed": 1, "subtests passed": 2}
    assert summary_counts(tests, quiet=True) == {"passed": 2, "error": 1, "xfailed": 1}


def _report(tests, **extra):
    return {"report_version": 4, "exitstatus": 1, "tests": tests, "collection": [], "collected": {"controller": 1},
            "audits": [], "outside_tests_sdpa": [], "unattributed_sdpa": [], **extra}


LOOP = {T: {"outcome": "failed", "message": "contains 1 failed subtest", "sdpa": [], "duration_s": 0.0,
            "by_subtests": True, "pytest_outcome": "passed",
            "subtests": {S1: {"outcome": "failed", "message": "AssertionError: broke", "sdpa": [], "duration_s": 0.0},
                         S2: {"outcome": "passed", "message": "", "sdpa": [], "duration_s": 0.0}}}}


def _checks(report, exit_code=1, summary=None, meant=None, stopped=None):
    tests = verdicts.tests_of(report)
    ev = Evidence(exit_code, report, None, None, None, None, None, None, stopped=stopped, meant_env=meant,
                  summary=summary)
    return [r for r in cross_checks(ev, tests, count(report, tests)) if "digest" not in r]


def test_the_summary_line_is_checked_only_on_a_run_that_ended_by_itself_and_as_pytest_counted():
    quiet, loud = _report(LOOP, subtests_verbosity=0), _report(LOOP, subtests_verbosity=1)
    said = {"failed": 1, "passed": 1}  # pytest at verbosity 0: the failing subtest and the test it calls passed
    assert _checks(quiet, summary=said) == []  # and a subtest failed: exit 1 is no lie
    assert _checks(loud, summary=said) == [
        "the probe's report and pytest's summary line disagree (subtests passed: the probe 1, pytest 0)"]
    assert _checks(loud, summary={**said, "subtests passed": 1}) == []
    wrong = {"failed": 2, "passed": 1}
    assert _checks(quiet, summary=wrong) == [
        "the probe's report and pytest's summary line disagree (failed: the probe 1, pytest 2)"]
    assert not any("summary line" in r for r in _checks(quiet, exit_code=2, summary=wrong))
    assert not any("summary line" in r for r in _checks(quiet, summary=wrong, stopped="interrupted (SIGINT)"))
    assert any(r.startswith("pytest exited 0 but 2 failure(s)") for r in _checks(quiet, exit_code=0, summary=said))


def test_an_env_value_is_checked_in_every_process_that_reported_one():
    envs = {"controller": {"A": "", "B": "y", "C": "z"}, "gw0": {"A": None, "B": "x", "C": "z"}}
    (reason,) = _checks(_report(LOOP, envs=envs, subtests_verbosity=0), meant={"A": "", "B": "x", "C": "z", "D": "d"})
    assert reason == ("the environment set for the test process did not reach it: A='' (gw0 had it unset); "
                      "B='x' (controller had 'y')")
    (alone,) = _checks(_report(LOOP, env={"A": "0"}), meant={"A": ""})
    assert alone.endswith("A='' (the test process had '0')")
    assert _checks(_report(LOOP, env={"A": "0"}), meant=None) == []
    assert _checks(_report(LOOP, envs=envs), meant={"C": "z"}) == []
