"""The rule-deciding modules, in-process and asserting whole outputs: tier rules (judge/tiers.py), known_flaky
sets (judge/flaky.py), what was expected (judge/expected.py) and what a confirmation found
(store/confirmation.py, compare/unreproduced.py). mutmut maps these tests to those modules' functions."""
from __future__ import annotations

from helpers import result

from ort_gpu_matrix.compare.changes import Change, Comparison, LibsDiff
from ort_gpu_matrix.compare.unreproduced import Unconfirmed, filter_comparison, filter_libs, listed, records
from ort_gpu_matrix.config.kernels import TEETH_MESSAGE
from ort_gpu_matrix.config.model import FlakyRule, PassExpect, Rule, TeethExpect, TierRule
from ort_gpu_matrix.judge import expected as ex
from ort_gpu_matrix.judge import flaky, tiers
from ort_gpu_matrix.judge.counts import Counts
from ort_gpu_matrix.judge.counts import TestResult as T
from ort_gpu_matrix.judge.verdicts import Status, TeethCoverage
from ort_gpu_matrix.report import states as st
from ort_gpu_matrix.store.confirmation import Confirmation, Rerun
from ort_gpu_matrix.store.confirmation import TestRuns as Runs
from ort_gpu_matrix.util import codec

CUDNN, MATH, EFF, FLASH = "CUDNN_FLASH_ATTENTION", "MATH", "EFFICIENT_ATTENTION", "FLASH_ATTENTION"


# judge/tiers.py

def test_function_of_drops_params_and_expand_indices_only():
    assert tiers.function_of("f.py::C::test_a[1-2]") == "f.py::C::test_a"
    assert tiers.function_of("f.py::C::test_gqa_0_b2_s1") == "f.py::C::test_gqa"
    assert tiers.function_of("f.py::C::test_gqa_12") == "f.py::C::test_gqa"
    assert tiers.function_of("f.py::C::test_gqa_x") == "f.py::C::test_gqa_x"
    assert tiers.function_of("f.py::test_a_1[p_2]") == "f.py::test_a"
    assert tiers.function_of("test_plain") == "test_plain"


def test_function_regex_matches_every_case_of_the_function_and_no_other():
    rx = tiers.function_regex("f.py::C::test_gqa")
    assert rx == "^f\\.py::C::test_gqa(?:_[0-9]+(?:_.*)?)?(?:\\[.*\\])?$"
    import re
    for nodeid in ("f.py::C::test_gqa", "f.py::C::test_gqa_0", "f.py::C::test_gqa_3_b2", "f.py::C::test_gqa[x]"):
        assert re.search(rx, nodeid), nodeid
    for nodeid in ("f.py::C::test_gqa_x", "f.py::C::test_gqa2", "xf.py::C::test_gqa", "f.py::C::test_gqa_0x"):
        assert not re.search(rx, nodeid), nodeid


def test_dispatched_counts_tiers_in_first_seen_order():
    assert tiers.dispatched([EFF, MATH, EFF]) == f"{EFF} x2, {MATH} x1"
    assert tiers.dispatched([]) == "nothing"


def test_judge_names_each_broken_rule_its_tests_and_its_stale_rules():
    eff = TierRule("TestEff::", (EFF,))
    both = TierRule("::test_", (EFF, FLASH))
    skipped_only = TierRule("test_skip", (MATH,))
    gone = TierRule("nowhere", (MATH,))
    tests = [T("f::TestEff::test_a", "passed", "", (EFF,)), T("f::TestEff::test_b", "passed", "", (EFF, MATH, MATH)),
             T("f::TestEff::test_c", "xpassed", "", ()), T("f::TestEff::test_d", "failed", "", (MATH,)),
             T("f::TestFlash::test_e", "passed", "", (FLASH,)), T("f::x::test_skip", "skipped", "", ())]
    got = tiers.judge([eff, both, skipped_only, gone], tests)
    assert got.reasons == [
        f"tier rule 'TestEff::' (only {EFF}) broken by 2 test(s): f::TestEff::test_b dispatched {EFF} x1, {MATH} x2; "
        "f::TestEff::test_c dispatched nothing",
        f"tier rule '::test_' (only {EFF}, {FLASH}) broken by 2 test(s): f::TestEff::test_b dispatched {EFF} x1, "
        f"{MATH} x2; f::TestEff::test_c dispatched nothing"]
    assert got.breaks == [tiers.Break(eff, "f::TestEff::test_b", (EFF, MATH, MATH)),
                          tiers.Break(eff, "f::TestEff::test_c", ()),
                          tiers.Break(both, "f::TestEff::test_b", (EFF, MATH, MATH)),
                          tiers.Break(both, "f::TestEff::test_c", ())]
    assert got.stale == [tiers.Stale(skipped_only, "it matched no test that passed", ["f::x::test_skip (skipped)"]),
                         tiers.Stale(gone, tiers.GONE, [])]
    assert codec.encode(got.breaks[0].record("normal")) == {
        "mode": "normal", "nodeid": "f::TestEff::test_b", "function": "f::TestEff::test_b",
        "dispatched": f"{EFF}, {MATH}", "rule": "TestEff::", "only": EFF}
    assert tiers.judge([eff], tests[:1]) == tiers.TierFindings()


def test_a_long_list_of_breaks_is_cut_after_eight():
    rule = TierRule("t", (EFF,))
    tests = [T(f"t{i}", "passed", "", (MATH,)) for i in range(10)]
    (reason,) = tiers.judge([rule], tests).reasons
    assert reason.endswith(f"t7 dispatched {MATH} x1; and 2 more") and "t8" not in reason
    (reason,) = tiers.judge([rule], tests[:8]).reasons
    assert reason.endswith(f"t7 dispatched {MATH} x1") and "more" not in reason


def test_teeth_warning_names_only_tests_that_ran_a_tier_other_than_math():
    assert tiers.teeth_warning([T("a", "failed", "", (MATH,)), T("b", "passed", "", ())]) is None
    got = tiers.teeth_warning([T("a", "failed", "", (MATH,)), T("b", "passed", "", (CUDNN, MATH))])
    assert got == (f"1 test(s) dispatched a tier other than {MATH} with {MATH} forced (the forcing did not reach "
                   f"their sessions): b dispatched {CUDNN} x1, {MATH} x1")


# judge/flaky.py

FLAKY = FlakyRule("t::fl", ("passed", "failed", "passed"), (EFF, FLASH), "comes and goes")


def test_a_flaky_rule_accepts_only_its_outcomes_and_tiers():
    assert flaky.rule_for([Rule("x", "y"), FLAKY], "t::flaky") is FLAKY  # type: ignore[list-item]
    assert flaky.rule_for([FLAKY], "t::other") is None
    assert flaky.as_set(FLAKY) == {"outcomes": ["failed", "passed"], "tiers": [EFF, FLASH]}
    s = flaky.as_set(FLAKY)
    assert flaky.within(s, "failed", [EFF]) and flaky.within(s, "passed", [EFF, FLASH]) and flaky.within(s, "passed", [])
    assert not flaky.within(s, "skipped", [EFF]) and not flaky.within(s, "passed", [EFF, MATH])
    assert not flaky.within({}, "passed", []) and flaky.within({"outcomes": ["passed"]}, "passed", [])


def test_judged_accepts_the_tests_within_and_names_those_outside():
    tests = [T("t::fl_1", "failed", "", (EFF,)), T("t::fl_2", "skipped", "", ()), T("t::fl_3", "error", "", (MATH, EFF)),
             T("t::other", "failed", "", ())]
    accepted, outside, sets = flaky.judged([FLAKY], tests)
    assert accepted == {"t::fl_1"}
    assert outside == ["t::fl_2 skipped (no tier): known_flaky lists failed, passed "
                       f"({EFF}, {FLASH})",
                       f"t::fl_3 error ({EFF}, {MATH}): known_flaky lists failed, passed ({EFF}, {FLASH})"]
    assert sets == {n: {"outcomes": ["failed", "passed"], "tiers": [EFF, FLASH]} for n in ("t::fl_1", "t::fl_2", "t::fl_3")}
    no_tiers = FlakyRule("t::", ("passed",), (), "r")
    assert flaky.judged([no_tiers], [T("t::a", "failed", "", ())])[1] == [
        "t::a failed (no tier): known_flaky lists passed (no tier)"]
    assert flaky.judged([], tests) == (set(), [], {})


# expected.py

def test_why_expected_names_the_one_expectation_that_accepted_each_outcome():
    expect = PassExpect(known_failures=(Rule("t::kf", "known"),), known_flaky=(FLAKY,), allowed_skips=("no GPU",))
    why = ex.why_expected
    assert why(expect, T("t::kf_1", "failed", "", ()), None) == ex.KNOWN_FAILURE
    assert why(expect, T("t::kf_1", "error", "", ()), None) == ex.KNOWN_FAILURE
    assert why(expect, T("t::zz", "failed", "", ()), None) is None
    assert why(expect, T("t::fl", "failed", "", (EFF,)), None) == ex.KNOWN_FLAKY
    assert why(expect, T("t::fl", "error", "", (EFF,)), None) is None  # error is not in its set
    assert why(expect, T("t::fl", "failed", "", (MATH,)), None) is None  # nor is MATH
    assert why(expect, T("t::fl", "passed", "", (EFF,)), None) is None  # a pass needs no expectation
    assert why(expect, T("t::s", "skipped", "needs no GPU here", ()), None) == ex.ALLOWED_SKIP
    assert why(expect, T("t::s", "skipped", "other", ()), None) is None
    assert why(expect, T("t::p", "passed", "no GPU", ()), None) is None
    cov = TeethCoverage(checked=True, declared_toothless=["t::dt"])
    teeth = TeethExpect(known_failures=(Rule("t::kf", "known"),), known_flaky=(FLAKY,))
    assert why(teeth, T("t::dt", "passed", "", ()), cov) == ex.DECLARED_TOOTHLESS
    assert why(teeth, T("t::dt", "passed", "", ()), None) is None
    assert why(teeth, T("t::p", "passed", "", ()), cov) is None
    assert why(teeth, T("t::s", "skipped", "no GPU", ()), cov) is None  # teeth has no allowed_skips
    assert why(teeth, T("t::b", "failed", f"  {TEETH_MESSAGE}\n  more", ()), None) == ex.BITTEN
    assert why(teeth, T("t::fl", "failed", TEETH_MESSAGE, (MATH,)), None) == ex.BITTEN  # a bite before known_flaky
    assert why(teeth, T("t::kf", "failed", TEETH_MESSAGE, ()), None) == ex.BITTEN
    assert why(teeth, T("t::kf", "failed", "other", ()), None) == ex.KNOWN_FAILURE
    assert why(teeth, T("t::b", "error", TEETH_MESSAGE, ()), None) is None
    assert why(expect, T("t::b", "failed", TEETH_MESSAGE, ()), None) is None  # no bite outside teeth
    assert ex.expected_of(expect, [T("t::kf", "failed", "", ()), T("t::p", "passed", "", ()),
                                   T("t::s", "skipped", "no GPU", ())], None) == {"t::kf": ex.KNOWN_FAILURE,
                                                                                  "t::s": ex.ALLOWED_SKIP}


OUTCOMES = {"t::p": "passed", "t::xf": "xfailed", "t::xp": "xpassed", "t::f": "failed", "t::e": "error",
            "t::s": "skipped", "t::kf": "failed", "t::ut": "passed"}


def test_state_and_tally_say_what_a_report_shows_for_each_test():
    cov = TeethCoverage(checked=True, undeclared_toothless=["t::ut"])
    r = result("normal", OUTCOMES, expected={"t::kf": ex.KNOWN_FAILURE, "t::xp": ex.ALLOWED_SKIP}, teeth_coverage=cov)
    got = {t: st.state(r, t) for t in [*OUTCOMES, "t::absent"]}
    assert got == {"t::p": (st.OK, None), "t::xf": (st.OK, None), "t::xp": (st.EXPECTED, ex.ALLOWED_SKIP),
                   "t::f": (st.UNEXPECTED, None), "t::e": (st.UNEXPECTED, None), "t::s": (st.UNEXPECTED, None),
                   "t::kf": (st.EXPECTED, ex.KNOWN_FAILURE), "t::ut": (st.UNEXPECTED, None),
                   "t::absent": (st.NEUTRAL, None)}
    assert st.tally(r) == ({ex.KNOWN_FAILURE: 1, ex.ALLOWED_SKIP: 1}, 4)
    assert st.tally_text(r) == "unexpected 4; expected 1 known failure, 1 allowed skip"
    teeth = result("teeth", {"t::s": "skipped", "t::b": "failed"}, expected={"t::b": ex.BITTEN})
    assert st.state(teeth, "t::s") == (st.NEUTRAL, None) and st.tally_text(teeth) == "expected 1 bitten"
    old = result("normal", OUTCOMES)  # stored before `expected` was kept
    assert {t: st.state(old, t)[0] for t in OUTCOMES} == {
        "t::p": st.OK, "t::xf": st.OK, "t::xp": st.NEUTRAL, "t::f": st.UNKNOWN, "t::e": st.UNKNOWN,
        "t::s": st.UNKNOWN, "t::kf": st.UNKNOWN, "t::ut": st.OK}
    assert st.tally(old) == ({}, 0) and st.tally_text(old) == ""
    clean = result("normal", {"t::p": "passed"}, expected={})
    assert st.tally(clean) == ({}, 0) and st.tally_text(clean) == ""
    only = result("normal", {"t::f": "failed"}, expected={})
    assert st.tally_text(only) == "unexpected 1"


def test_tally_text_lists_kinds_in_the_order_of_kinds():
    kinds = {f"t::{i}": k for i, k in enumerate(reversed(ex.KINDS))}
    r = result("normal", {t: "failed" for t in kinds}, expected=kinds)
    assert st.tally_text(r) == "expected " + ", ".join(f"1 {k}" for k in ex.KINDS)


# store/confirmation.py and compare/unreproduced.py

def confirmation(*tests: Runs) -> Confirmation:
    return Confirmation(2, Status.FAIL, ["r"], Counts(), [Rerun("r1", None, 1, 1.0)], list(tests))


def test_a_confirmation_says_which_checks_reproduced():
    t = Runs("t::a", ["test", "tier", "libs"], ["failed", "passed MATH"], ["tier"])
    assert t.confirmed == ["test", "libs"]
    c = confirmation(Runs("t::b", ["test"], ["failed", "failed"]), t)
    assert c.test("t::a") is t and c.test("t::zz") is None
    assert c.amended and not confirmation(Runs("t::b", ["test"], ["failed", "failed"])).amended
    assert not confirmation().amended


def test_unconfirmed_changes_are_listed_apart_and_leave_the_regressions():
    t_a = Runs("t::a", ["test", "tier"], ["failed", "passed"], ["test"])
    t_b = Runs("t::b", ["tier", "libs"], ["passed MATH", "passed"], ["tier", "libs"])
    t_c = Runs("t::c", ["libs"], ["passed", "passed MATH"], ["libs"])
    t_d = Runs("t::d", ["test"], ["failed", "failed"])
    results = [result("normal", name="c2", confirmation=confirmation(t_b, t_c)),
               result("normal", name="c1", confirmation=confirmation(t_a, t_d)), result("teeth", name="c1")]
    assert sorted(records(results)) == [("c1", "normal"), ("c2", "normal")]
    got = listed(results)
    assert got == [Unconfirmed("c1", "normal", "t::a", ["test"], ["failed", "passed"]),
                   Unconfirmed("c2", "normal", "t::b", ["tier"], ["passed MATH", "passed"])]
    assert got[0].line() == "test: c1 normal t::a: runs: failed | passed"
    assert got[1].to_dict() == {"cell": "c2", "mode": "normal", "test": "t::b", "checks": ["tier"],
                                "runs": ["passed MATH", "passed"]}
    regs = [Change("test", "c1", "normal", "t::a", "passed", "failed"), Change("tier", "c1", "normal", "t::a", [], [MATH]),
            Change("test", "c1", "normal", "t::d", "passed", "failed"), Change("tier", "c2", "normal", "t::b", [MATH], []),
            Change("test", "c1", "teeth", "t::a", "passed", "failed"), Change("verdict", "c1", "normal", None, "pass", "fail"),
            Change("count", "c1", "normal", "passed", 2, 1), Change("library", "c2", "normal", "t::b", "x", "y")]
    cmp = Comparison(regressions=list(regs))
    filter_comparison(cmp, results)
    assert cmp.regressions == [regs[1], regs[2], *regs[4:]]


def test_a_libs_difference_is_kept_only_where_it_reproduced_on_both_sides():
    left = Runs("t::a", ["libs"], ["passed MATH", "passed MATH"], ["libs"])
    right = Runs("t::b", ["libs"], ["passed", "passed CUDNN"], ["libs"])
    keep = Runs("t::c", ["libs", "tier"], ["passed"], ["tier"])
    results = [result("normal", name="L", confirmation=confirmation(left, keep)),
               result("normal", name="R", confirmation=confirmation(right))]
    diff = LibsDiff("normal", ("L", "R"), ([], []), [("t::a", "passed MATH", "passed"), ("t::b", "passed", "passed CUDNN"),
                                                      ("t::c", "passed", "passed MATH"), ("t::d", "failed", "passed")],
                    [("t::old", ["x"], ["y"])])
    (got,) = filter_libs([diff], results)
    assert got == LibsDiff("normal", ("L", "R"), ([], []), [("t::c", "passed", "passed MATH"), ("t::d", "failed", "passed")],
                           [("t::old", ["x"], ["y"]), ("t::a", ["passed MATH", "passed MATH"], ["passed"]),
                            ("t::b", ["passed"], ["passed", "passed CUDNN"])])
    assert filter_libs([diff], []) == [LibsDiff("normal", ("L", "R"), ([], []), diff.tests, diff.unconfirmed)]
    assert diff.unconfirmed == [("t::old", ["x"], ["y"])]  # the input is left as it was


def test_function_of_reads_only_the_last_part_and_the_first_bracket():
    assert tiers.function_of("f.py::TestX_1_a::test_b") == "f.py::TestX_1_a::test_b"  # a class is no case
    assert tiers.function_of("dir_1_x/t.py::test_a") == "dir_1_x/t.py::test_a"  # nor a path
    assert tiers.function_of("f.py::test_a[p[0]]") == "f.py::test_a"
    rule = TierRule("t", (EFF, FLASH))
    assert codec.encode(tiers.Break(rule, "t::a", (MATH,)).record("teeth"))["only"] == f"{EFF}, {FLASH}"


def test_a_flaky_rule_judges_every_test_it_matches_whatever_comes_before():
    tests = [T("t::fl_1", "failed", "", (EFF,)), T("t::other", "failed", "", ()), T("t::fl_2", "passed", "", ())]
    assert flaky.judged([FLAKY], tests)[0] == {"t::fl_1", "t::fl_2"}


def test_a_skip_a_flaky_rule_lists_is_known_flaky_and_one_it_does_not_list_is_unexpected():
    rule = FlakyRule("t::fs", ("passed", "skipped"), (), "r")
    expect = PassExpect(known_flaky=(rule, FLAKY), allowed_skips=("no GPU",))
    assert ex.why_expected(expect, T("t::fs", "skipped", "no GPU", ()), None) == ex.KNOWN_FLAKY
    assert ex.why_expected(expect, T("t::fl", "skipped", "no GPU", ()), None) is None  # FLAKY lists no skip
    cov = TeethCoverage(checked=True, declared_toothless=["t::dt"])
    assert ex.expected_of(TeethExpect(), [T("t::dt", "passed", "", ())], cov) == {"t::dt": ex.DECLARED_TOOTHLESS}


def test_tally_counts_each_kind_as_often_as_it_was_expected():
    r = result("normal", {"a": "failed", "b": "failed", "c": "skipped"},
               expected={"a": ex.KNOWN_FAILURE, "b": ex.KNOWN_FAILURE, "c": ex.ALLOWED_SKIP})
    assert st.tally(r) == ({ex.KNOWN_FAILURE: 2, ex.ALLOWED_SKIP: 1}, 0)
    assert st.tally_text(r) == "expected 2 known failure, 1 allowed skip"


def test_an_unconfirmed_line_names_every_check():
    u = Unconfirmed("c1", "normal", "t::a", ["test", "tier"], ["failed", "passed"])
    assert u.line() == "test, tier: c1 normal t::a: runs: failed | passed"


def test_an_unconfirmed_record_sets_aside_only_changes_judged_against_the_same_baseline_line():
    """`against` is the baseline line the reruns were judged against: a comparison with a baseline whose line for
    the test is the same (or absent from both) drops the change; another line, or no baseline given, keeps it.
    A record without `against` (older) drops as before."""
    from ort_gpu_matrix.store.baseline import Baseline, ModeRecord
    from ort_gpu_matrix.store.baseline import TestLine as Line

    same = Runs("t::a", ["tier"], ["passed MATH", "passed FLASH_ATTENTION"], ["tier"], "passed FLASH_ATTENTION")
    new = Runs("t::n", ["tier"], ["passed MATH", "passed"], ["tier"], "absent")
    old = Runs("t::o", ["tier"], ["passed MATH", "passed"], ["tier"])
    results = [result("normal", name="c1", confirmation=confirmation(same, new, old))]
    regs = [Change("tier", "c1", "normal", t, [], [MATH]) for t in ("t::a", "t::n", "t::o")]

    def kept(baseline):
        cmp = Comparison(regressions=list(regs))
        filter_comparison(cmp, results, baseline)
        return [c.test for c in cmp.regressions]

    def base(line_a):
        tests = {"t::a": line_a} if line_a is not None else {}
        return Baseline({"c1": {"normal": ModeRecord("pass", {}, tests, None, {}, {}, "all", "restore")}}, "b", "t")

    assert kept(base(Line("passed", ("FLASH_ATTENTION",)))) == []  # the same line: all three set aside
    assert kept(base(Line("passed", ("EFFICIENT_ATTENTION",)))) == ["t::a"]  # another line for t::a: it counts
    assert kept(base(None)) == ["t::a"]  # t::a absent from this baseline, judged against a line: it counts
    other_cell = Baseline({"c2": {"normal": ModeRecord("pass", {}, {}, None, {}, {}, "all", "restore")}}, "b", "t")
    assert kept(other_cell) == ["t::a"]
    assert kept(None) == ["t::a"]  # no baseline given at all


def test_a_pass_that_broke_a_tier_rule_is_unexpected_and_only_that_pass():
    """The grid marks red exactly the tests the tier rules failed: the broken pass (and xpass), never the other
    passes of the run, whether the result recorded `expected` or was stored before it did."""
    rule = TierRule("t::b", (CUDNN,))
    breaks = [tiers.Break(rule, "t::b", (MATH,)).record("normal"),
              tiers.Break(rule, "t::bx", (MATH,)).record("normal")]
    outcomes = {"t::b": "passed", "t::bx": "xpassed", "t::ok": "passed", "t::f": "failed"}
    for expected in ({"t::f": ex.KNOWN_FAILURE}, None):
        r = result("normal", outcomes, expected=expected, tier_breaks=breaks)
        got = {t: st.state(r, t) for t in outcomes}
        assert got["t::b"] == got["t::bx"] == (st.UNEXPECTED, None)
        assert got["t::ok"] == (st.OK, None)
    assert st.tally_text(result("normal", outcomes, expected={"t::f": ex.KNOWN_FAILURE}, tier_breaks=breaks)) == \
        "unexpected 2; expected 1 known failure"
