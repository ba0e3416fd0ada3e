"""The verdict's pure decisions in-process, each asserting whole reasons, stale rules and coverage: the probe
report read into tests and counts, the census, the pass and teeth judges, the dispatch rules and the library
audit (where mutmut's mutants of judge/verdicts.py, counts.py, libraries.py and stale.py meet a test without a
nox run; tests/test_verdicts.py and test_census.py prove the same
through real runs)."""
from __future__ import annotations

import os

from ort_gpu_matrix.config.kernels import TEETH_MESSAGE
from ort_gpu_matrix.config.model import Observation, PassExpect, Rule, TeethExpect
from ort_gpu_matrix.judge import tiers
from ort_gpu_matrix.judge.counts import Counts, Dispatch, census, collected_of, count
from ort_gpu_matrix.judge.counts import TestResult as T
from ort_gpu_matrix.judge.libraries import library_audit
from ort_gpu_matrix.judge.outcomes import GONE, first_line
from ort_gpu_matrix.judge.stale import StaleRule
from ort_gpu_matrix.judge.verdicts import (
    NOTHING_TO_COVER,
    TeethCoverage,
    expectation_reasons,
    judge_teeth,
    outcome_judge,
)
from ort_gpu_matrix.judge.verdicts import (
    tests_of as read_tests,
)

CUDNN, MATH, FLASH = "CUDNN_FLASH_ATTENTION", "MATH", "FLASH_ATTENTION"
COUNTS = outcome_judge("normal")  # judge_counts, as a mode's judge is called: handed a census it never reads


def test_tests_of_reads_outcomes_crashes_teardowns_and_collection_errors():
    report = {"tests": {"t::a": {"outcome": "passed", "sdpa": [CUDNN, MATH], "reruns": 2},
                        "t::b": {"outcome": "failed", "message": "boom"},
                        "t::c": {},
                        "t::d": {"outcome": "passed", "teardown_error": "td"}},
              "collection": [{"nodeid": "t_x.py", "outcome": "error", "message": "ImportError"},
                             {"nodeid": "t_y.py", "outcome": "error"}]}
    assert read_tests(report) == [T("t::a", "passed", "", (CUDNN, MATH), 2), T("t::b", "failed", "boom", (), 0),
                                T("t::c", "error", "worker crashed running t::c", ()), T("t::d", "passed", "", ()),
                                T("t::d::teardown", "error", "td", ()), T("t_x.py", "error", "ImportError", ()),
                                T("t_y.py", "error", "", ())]
    assert read_tests(None) == [] and read_tests({}) == []  # type: ignore[arg-type]


def test_count_and_collected():
    tests = [T(str(i), o, "", ()) for i, o in enumerate(
        ["passed", "passed", "failed", "error", "skipped", "xfailed", "xpassed", "xpassed", "skipped", "skipped"])]
    assert count({"tests": {"a": {}, "b": {}}}, tests) == Counts(2, 2, 1, 1, 3, 1, 2)  # type: ignore[arg-type]
    assert count(None, tests, 7) == Counts(7, 2, 1, 1, 3, 1, 2)
    assert count(None, []) == Counts()
    assert collected_of({"collected": {"gw0": 3, "gw1": 5, "gw2": 4}}, 9) == 5  # type: ignore[arg-type]
    assert collected_of({"collected": {}}, 9) == 9 and collected_of(None, None) is None  # type: ignore[arg-type]


def test_census_counts_tokens_per_tier_and_tests_per_tier():
    d = census([T("a", "passed", "", (CUDNN, CUDNN, MATH)), T("b", "passed", "", (MATH,)), T("c", "passed", "", ())])
    assert d == Dispatch({"a": [CUDNN, CUDNN, MATH], "b": [MATH]}, {CUDNN: 2, MATH: 2}, {CUDNN: 1, MATH: 2})
    assert list(d.totals) == [CUDNN, MATH]
    assert Dispatch({"z": [CUDNN], "a": [MATH, CUDNN], "m": [MATH]}).tier_tests(CUDNN) == ["a", "z"]


def test_first_line():
    assert first_line("\n  AssertionError: x  \nmore") == "AssertionError: x" and first_line("  \n ") == ""


def rule(test: str, reason: str = "why", cells=()) -> Rule:
    return Rule(test, reason, tuple(Observation(c, "1.32.0", "2026-12-01") for c in cells))


def judged(expect, tests, counts=None, prior=None, judge=COUNTS):
    counts = counts or count(None, tests, len(tests))
    return judge(expect, tests, counts, prior)


def test_nothing_passed_and_min_passed():
    assert judged(PassExpect(), [T("a", "skipped", "why", ())]).reasons[0] == "nothing passed (1 skipped)"
    assert judged(PassExpect(), []).reasons == ["nothing passed"]
    two = [T("a", "passed", "", ()), T("b", "passed", "", ())]
    assert judged(PassExpect(min_passed=3), two).reasons == ["only 2 passed, min_passed is 3"]
    assert judged(PassExpect(min_passed=2), two).reasons == []
    assert judged(PassExpect(min_passed=0), []).reasons == ["nothing passed"]


def test_skips_failures_and_their_stale_rules():
    ok = T("t::ok", "passed", "", ())
    tests = [ok, T("t::s1", "skipped", "no GPU here", ()), T("t::s2", "skipped", "needs cuDNN 9", ()),
             T("t::f", "failed", "AssertionError: 1\nmore", ()), T("t::e", "error", "E", ()),
             T("t::kf", "failed", "known", ()), T("t::x", "xfailed", "x", ())]
    f = judged(PassExpect(allowed_skips=("GPU", "never seen"), known_failures=(rule("kf"), rule("t::ok", "r", ["c1"]),
                                                                              rule("gone"))), tests)
    assert f.reasons == ["1 skip(s) not in allowed_skips: t::s2: needs cuDNN 9",
                         "2 unexpected failure(s): t::e error: E; t::f failed: AssertionError: 1"]  # sorted
    assert judged(PassExpect(allowed_skips=("GPU", "never seen"), known_failures=(rule("kf"),)),
                  tests[::-1]).reasons == f.reasons  # the order tests ended in does not change the reason
    assert f.stale == [StaleRule("known_failures", "t::ok", "r", "no longer fails", ("c1",), "t::ok (passed)"),
                       StaleRule("known_failures", "gone", "why", GONE, (), ""),
                       StaleRule("allowed_skips", "never seen", "", "no test skipped with a reason it matches")]
    assert f.warnings == [] and f.coverage is None


def test_offenders_are_listed_up_to_eight_then_counted():
    tests = [T("t::ok", "passed", "", ())] + [T(f"t::f{i}", "failed", "m", ()) for i in range(10)]
    (reason,) = judged(PassExpect(), tests).reasons
    assert reason == ("10 unexpected failure(s): " + "; ".join(f"t::f{i} failed: m" for i in range(8)) +
                      "; and 2 more")
    (reason,) = judged(PassExpect(), tests[:9]).reasons
    assert reason.endswith("t::f7 failed: m") and "more" not in reason


def test_dispatch_rules_in_their_scope():
    tests = [T("t::a", "passed", "", (MATH,)), T("t::b", "passed", "", (FLASH, MATH)), T("o::c", "passed", "", (CUDNN,))]
    e = PassExpect(require_kernel=CUDNN, forbid_kernels=(MATH, FLASH), dispatch_tests="^t::")
    assert expectation_reasons(COUNTS, e, tests, count(None, tests, 3), None) == [
        f"no test dispatched {CUDNN} (seen: {FLASH}, {MATH})",
        f"2 test(s) dispatched forbidden {MATH}: t::a ran {MATH}; t::b ran {MATH}",
        f"1 test(s) dispatched forbidden {FLASH}: t::b ran {FLASH}"]
    e = PassExpect(require_kernel=CUDNN, dispatch_tests="^none")
    assert expectation_reasons(COUNTS, e, tests, count(None, tests, 3), None) == [
        f"no test dispatched {CUDNN} (seen: no SdpaKernel token at all)"]
    assert expectation_reasons(COUNTS, PassExpect(require_kernel=CUDNN, forbid_kernels=(FLASH,)), tests[2:],
                               count(None, tests[2:], 1), None) == []


BITE = T("t::a", "failed", TEETH_MESSAGE + "\ntraceback", ())


def test_teeth_bites_covers_and_declares():
    tests = [BITE, T("t::b", "failed", "AssertionError: 'X' != 'MATH'", ()), T("t::c", "passed", "", ()),
             T("t::d", "passed", "", ()), T("t::k", "error", "E", ()), T("t::m", "passed", "", ())]
    prior = Dispatch({"t::a": [CUDNN], "t::c": [CUDNN, MATH], "t::d": [CUDNN], "t::m": [MATH]})
    e = TeethExpect(known_failures=(rule("t::k"),), known_toothless=(rule("t::d"), rule("t::a", "bites", ["c9"]),
                                                                    rule("t::m"), rule("nowhere")))
    f = judged(e, tests, prior=prior, judge=judge_teeth)
    assert f.reasons == ["1 failure(s) other than the canary's: t::b failed: AssertionError: 'X' != 'MATH'",
                         f"1 toothless test(s): dispatched {CUDNN} in require_cudnn but did not fail with the "
                         "verbatim message when MATH was forced: t::c"]
    assert f.coverage == TeethCoverage(True, CUDNN, 3, 1, 2, ["t::d"], ["t::c"], ["t::a"])
    assert f.stale == [StaleRule("known_toothless", "t::a", "bites", "it now bites", ("c9",), "t::a"),
                       StaleRule("known_toothless", "t::m", "why", f"no longer a {CUDNN} test in require_cudnn", (), "t::m"),
                       StaleRule("known_toothless", "nowhere", "why", GONE, (), "")]
    assert f.warnings == []


def test_teeth_without_a_bite_or_with_too_few():
    assert judged(TeethExpect(), [T("t::a", "passed", "", ())], judge=judge_teeth).reasons == [
        "canary has no teeth: nothing failed with MATH forced"]
    assert judged(TeethExpect(), [T("t::a", "skipped", "", ())], judge=judge_teeth).reasons[0].startswith("canary")
    f = judged(TeethExpect(min_failures=2), [BITE, T("t::x", "failed", "other", ())], judge=judge_teeth)
    assert f.reasons == [f"1 test(s) failed with exactly {TEETH_MESSAGE!r}, min_failures is 2",
                         "1 failure(s) other than the canary's: t::x failed: other"]
    assert judged(TeethExpect(min_failures=2), [BITE, T("t::b", "failed", TEETH_MESSAGE, ())],
                  judge=judge_teeth).reasons == []
    f = judged(TeethExpect(), [T("t::e", "error", TEETH_MESSAGE, ())], judge=judge_teeth)  # an error is no bite
    assert f.reasons == [f"0 test(s) failed with exactly {TEETH_MESSAGE!r}, min_failures is 1",
                         f"1 failure(s) other than the canary's: t::e error: {TEETH_MESSAGE}"]
    sub = judged(TeethExpect(), [T("t::s", "failed", "x " + TEETH_MESSAGE, ())], judge=judge_teeth)
    assert sub.reasons[0].startswith("0 test(s) failed with exactly")


def test_teeth_without_prior_or_with_nothing_to_cover():
    f = judged(TeethExpect(), [BITE], judge=judge_teeth)
    assert f.reasons == [] and f.coverage == TeethCoverage(checked=False)
    assert f.warnings == ["teeth coverage not checked: no up-to-date require_cudnn result for this pairing"]
    f = judged(TeethExpect(), [BITE], prior=Dispatch({"t::a": [MATH]}), judge=judge_teeth)
    assert f.reasons == [NOTHING_TO_COVER] and f.coverage == TeethCoverage(True, CUDNN, 0, 0, 0, [], [], [])


def test_a_known_failure_in_teeth_that_bites_is_stale():
    f = judged(TeethExpect(known_failures=(rule("t::a"),)), [BITE], judge=judge_teeth)
    assert f.stale == [StaleRule("known_failures", "t::a", "why", "no longer fails", (), "t::a (bitten)")]


def audit(**kw):
    return {"pid": 7, "process": "main", "by_name": {}, "mapped": [], "preload": [], "loader": None,
            "onnxruntime_file": None, "cudnn_copies": [], **kw}


def test_the_library_audit(tmp_path):
    venv = str(tmp_path / "venv")
    pin_cudnn, pin_cudart = "/l/libcudnn.so.9", "/l/libcudart.so.13"
    good = audit(by_name={"cudnn": {"file": pin_cudnn, "soname": "libcudnn.so.9", "version": 91400},
                          "cudart": {"file": pin_cudart}}, mapped=[pin_cudnn, pin_cudart],
                 onnxruntime_file=os.path.join(os.path.realpath(venv), "x", "onnxruntime", "__init__.py"))
    report = {"tests": {"t::a": {"process": "main"}, "t::b": {}}, "audits": [good]}
    libs, reasons, warnings = library_audit(report, (pin_cudart, pin_cudnn), venv)  # type: ignore[arg-type]
    assert (libs.pinned, reasons, warnings) == ({"cudnn": pin_cudnn, "cudart": pin_cudart}, [], [])
    bad = audit(process="gw1", pid=9, by_name={"cudnn": {"file": "/t/libcudnn.so.9", "soname": "libcudnn.so.9",
                                                          "version": 91900}},
                mapped=[pin_cudnn], preload=[pin_cudart], onnxruntime_file="/src/onnxruntime/__init__.py",
                cudnn_copies=[{"file": "/t/libcudnn.so.9", "file_version": "9.19.0"},
                              {"file": pin_cudnn, "file_version": None}])
    report = {"tests": {"t::a": {"process": "gw1"}, "t::b": {"process": "gw2"}, "t::c": {"process": "gw3"}},
              "audits": [bad]}
    _, reasons, warnings = library_audit(report, (pin_cudart, pin_cudnn), venv)  # type: ignore[arg-type]
    assert reasons == sorted([
        f"by-name libcudnn.so.9 resolved to /t/libcudnn.so.9 (version 91900), not the pinned {pin_cudnn}",
        f"by-name None resolved to None (version None), not the pinned {pin_cudart}",
        "no library audit came back from test process(es) gw2, gw3: what served their tests is unknown",
        f"onnxruntime was imported from /src/onnxruntime/__init__.py, not from the pairing's venv "
        f"{os.path.realpath(venv)} (a source dir shadows the wheel)",
        f"the pinned {pin_cudart} was never mapped in the test process (pid 9): ld.so skipped it, so nothing was pinned"])
    assert warnings == [f"2 copies of cuDNN mapped in one test process: /t/libcudnn.so.9 (9.19.0), {pin_cudnn} "
                        "(version unknown)"]
    one = audit(cudnn_copies=[{"file": pin_cudnn, "file_version": "9"}, {"file": pin_cudnn, "file_version": "9"}])
    assert library_audit({"tests": {}, "audits": [one]}, (), venv)[1:] == ([], [])  # type: ignore[arg-type]
    assert library_audit(None, (pin_cudnn,), venv)[1:] == ([], [])


def test_the_loaders_promises_in_the_audit(tmp_path):
    venv = os.path.realpath(tmp_path)
    pin = "/l/libcudnn.so.9"
    cases = [
        ({"loader": "ort_preload_dlls", "error": "no such symbol"}, [
            "loader ort_preload_dlls failed in the test process: no such symbol"]),
        ({"loader": "ort_preload_dlls", "called": False}, ["loader ort_preload_dlls: preload_dlls was never called"]),
        ({"loader": "ort_preload_dlls", "called": True, "torch_already_imported": True,
          "resolved_at_end": "/src/onnxruntime/__init__.py"}, [
            "loader ort_preload_dlls: at the session's end the tests' sys.path resolves onnxruntime to "
            "/src/onnxruntime/__init__.py, not to the pairing's venv (a source dir shadows the wheel; the loader's "
            "early import hid it)",
            "loader ort_preload_dlls: torch was imported before preload_dlls ran (by a -p plugin), so torch's cuDNN "
            "may win a by-name load"]),
        ({"loader": "ort_preload_dlls", "called": True, "resolved_at_end": venv + "/ort/__init__.py"}, []),
        ({"loader": "torch_first", "onnxruntime_already_imported": True, "called": False}, [
            "loader torch_first: onnxruntime was imported before the probe could act"]),
    ]
    for loader, want in cases:
        a = audit(loader=loader, mapped=[pin], by_name={"cudnn": {"file": pin}})
        assert library_audit({"tests": {}, "audits": [a]}, (pin,), venv)[1] == sorted(want), loader  # type: ignore[arg-type]
    a = audit(loader={"loader": "ort_preload_dlls", "called": True}, by_name={"cudnn": {"file": pin}})
    assert library_audit({"tests": {}, "audits": [a]}, (pin,), venv)[1] == [  # type: ignore[arg-type]
        f"the pinned {pin} was never mapped in the test process (pid 7): the libs set's loader (ort_preload_dlls) "
        "did not load it, so nothing was pinned"]
    a = audit(by_name={"cudnn": {"file": pin}})
    assert library_audit({"tests": {}, "audits": [a]}, (pin,), venv)[1] == [  # type: ignore[arg-type]
        f"the pinned {pin} was never mapped in the test process (pid 7): the libs set's loader (preload) "
        "did not load it, so nothing was pinned"]


def test_a_report_without_some_keys_reads_as_empty():
    assert read_tests({"collection": [{"nodeid": "x.py", "outcome": "error"}]}) == [T("x.py", "error", "", ())]
    assert read_tests({"tests": {"t::a": {"outcome": "passed"}}}) == [T("t::a", "passed", "", ())]
    assert collected_of({"tests": {}}, 4) == 4  # type: ignore[arg-type]


def test_a_known_failure_that_matches_only_an_error_is_not_stale():
    tests = [T("t::ok", "passed", "", ()), T("t::e", "error", "E", ())]
    assert judged(PassExpect(known_failures=(rule("t::e"),)), tests).stale == []


def test_expectation_reasons_pass_the_prior_census_to_the_judge():
    tests = [BITE, T("t::b", "passed", "", ())]
    prior = Dispatch({"t::a": [CUDNN], "t::b": [CUDNN]})
    assert expectation_reasons(judge_teeth, TeethExpect(), tests, count(None, tests, 2), prior) == [
        f"1 toothless test(s): dispatched {CUDNN} in require_cudnn but did not fail with the verbatim message when "
        "MATH was forced: t::b"]


def test_a_known_flaky_rule_that_matches_nothing_is_stale_beside_the_known_failures():
    """known_flaky rules are judged (and go stale) before the known failures: their stale rules must survive
    what judge_counts adds after them (kills the mutant `out.stale = stale_failures(...)`)."""
    from ort_gpu_matrix.config.model import FlakyRule

    flaky = FlakyRule("t::gone", ("passed", "failed"), (), "comes and goes",
                      observed=(Observation("c1", "1.32.0", "2026-12-01"),))
    tests = [T("t::ok", "passed", "", ())]
    f = judged(PassExpect(known_flaky=(flaky,), known_failures=(rule("t::ok"),)), tests)
    assert f.reasons == []
    assert f.stale == [StaleRule("known_flaky", "t::gone", "comes and goes", GONE, ("c1",), ""),
                       StaleRule("known_failures", "t::ok", "why", "no longer fails", (), "t::ok (passed)")]


def test_an_audit_or_report_without_some_keys_reads_as_empty():
    bare = {"pid": 3, "process": "main"}  # an audit of an older probe: no by_name, mapped, preload or copies
    libs, reasons, warnings = library_audit({"tests": {}, "audits": [bare]}, ("/l/libcudnn.so.9",), "/v")  # type: ignore[arg-type]
    assert libs.audits == [bare] and libs.pinned == {"cudnn": "/l/libcudnn.so.9", "cudart": None}
    assert reasons == ["by-name None resolved to None (version None), not the pinned /l/libcudnn.so.9",
                       "the pinned /l/libcudnn.so.9 was never mapped in the test process (pid 3): the libs set's "
                       "loader (preload) did not load it, so nothing was pinned"] and warnings == []
    assert collected_of({"tests": {}, "collected": {}}, 4) == 4 and collected_of(None, None) is None  # type: ignore[arg-type]
    assert collected_of({"collected": {"gw0": 3, "gw1": 5}}, 4) == 5  # type: ignore[arg-type]


def test_tier_rules_break_and_go_stale_in_the_findings():
    from ort_gpu_matrix.config.model import TierRule
    broken = TierRule("t::a", ("EFFICIENT_ATTENTION",), "eff", (Observation("c1", "1.32.0", "2026-12-01"),))
    gone = TierRule("t::zz", (MATH,), "gone", (Observation("c2", "1.32.0", "2026-12-01"),))
    skipped = TierRule("t::s", (MATH,), "")
    tests = [T("t::a", "passed", "", (CUDNN,)), T("t::s", "skipped", "x", ())]
    f = judged(PassExpect(tiers=(broken, gone, skipped), allowed_skips=("x",)), tests)
    assert f.reasons == [f"tier rule 't::a' (only EFFICIENT_ATTENTION) broken by 1 test(s): t::a dispatched {CUDNN} x1"]
    assert f.tier_breaks == [tiers.Break(broken, "t::a", (CUDNN,))]
    assert f.stale == [StaleRule("tiers", "t::zz", "gone", tiers.GONE, ("c2",), ""),
                       StaleRule("tiers", "t::s", "", "it matched no test that passed", (), "t::s (skipped)")]


def test_teeth_warns_of_a_tier_the_forcing_missed_and_keeps_every_stale_rule():
    leak = T("t::l", "passed", "", (CUDNN,))
    e = TeethExpect(known_failures=(rule("t::a"), rule("t::f")), known_toothless=(rule("t::gone"),))
    f = judged(e, [BITE, leak, T("t::f", "failed", "boom", ())], prior=Dispatch({"t::a": [CUDNN]}), judge=judge_teeth)
    assert f.warnings == [f"1 test(s) dispatched a tier other than {MATH} with {MATH} forced (the forcing did not reach "
                          f"their sessions): t::l dispatched {CUDNN} x1"]
    assert f.stale == [StaleRule("known_failures", "t::a", "why", "no longer fails", (), "t::a (bitten)"),
                       StaleRule("known_toothless", "t::gone", "why", GONE, (), "")]
    assert f.reasons == []  # t::f is a known failure: failed, so not stale


def test_the_version_skew_warning_reads_the_wheel_the_tests_imported():
    from ort_gpu_matrix.host.ortsource import SourceTree
    from ort_gpu_matrix.judge.verdicts import skew_warning
    src = SourceTree("/ort", "1.33.0", "abc1234")
    ort = {"distribution": "onnxruntime", "version": "1.31.1"}
    want = "version skew: tests from 1.33.0 (abc1234) against wheel {} (major.minor differ)"
    assert skew_warning({"provenance": {"ort": ort}}, src) == want.format("1.31.1")  # type: ignore[arg-type]
    assert skew_warning({"provenance": {"ort": ort, "ort_imported_version": "1.30.0"}}, src) == want.format("1.30.0")  # type: ignore[arg-type]
    assert skew_warning({"provenance": {"ort": None, "ort_imported_version": "1.30.0"}}, src) == want.format("1.30.0")  # type: ignore[arg-type]
    assert skew_warning({"provenance": {"ort": {"version": "1.33.2"}}}, src) is None  # type: ignore[arg-type]
    assert skew_warning({"provenance": {"ort": None}}, src) is None  # type: ignore[arg-type]
    assert skew_warning({"provenance": {"ort": ort}}, None) is None  # type: ignore[arg-type]
    assert skew_warning(None, src) is None and skew_warning({"tests": {}}, src) is None  # type: ignore[arg-type]


def test_teeth_judges_a_known_flaky_test_by_its_rule_alone():
    from ort_gpu_matrix.config.model import FlakyRule
    e = TeethExpect(known_flaky=(FlakyRule("t::fl", ("failed",), (MATH,), "r"), FlakyRule("t::none", ("passed",), (), "r")))
    f = judged(e, [BITE, T("t::fl", "passed", "", ())], judge=judge_teeth)
    assert f.reasons == ["1 known-flaky test(s) did what their rule does not list: t::fl passed (no tier): known_flaky "
                         f"lists failed ({MATH})"]
    assert f.stale == [StaleRule("known_flaky", "t::none", "r", GONE, (), "")]
    ok = judged(e, [BITE, T("t::fl", "failed", "boom", (MATH,))], judge=judge_teeth)
    assert ok.reasons == []  # a flaky failure within its set is no failure other than the canary's


def test_a_known_flaky_failure_outside_its_set_is_judged_by_its_rule_alone():
    from ort_gpu_matrix.config.model import FlakyRule
    e = PassExpect(known_flaky=(FlakyRule("t::fl", ("passed",), (), "r"),))
    f = judged(e, [T("t::ok", "passed", "", ()), T("t::fl", "failed", "boom", ())])
    assert f.reasons == ["1 known-flaky test(s) did what their rule does not list: t::fl failed (no tier): known_flaky "
                         "lists passed (no tier)"]


def test_a_stale_known_failure_in_teeth_lists_what_its_tests_did():
    f = judged(TeethExpect(known_failures=(rule("t::p"),)), [BITE, T("t::p", "passed", "", ())], judge=judge_teeth)
    assert f.stale == [StaleRule("known_failures", "t::p", "why", "no longer fails", (), "t::p (passed)")]


def _lib(library, major, version, file):
    return {"library": library, "cuda_major": major, "version": version, "file": file}


def test_a_cuda_library_of_another_major_than_the_ort_build_is_a_warning_or_with_a_pin_a_reason(tmp_path):
    venv = str(tmp_path / "venv")
    stack = [_lib("cudart", 12, "12.8.90", "/a/libcudart.so.12"), _lib("cublas", 12, "12.8.4.1", "/a/libcublas.so.12"),
             _lib("cublas", 13, "13.1.0.3", "/b/libcublas.so.13"), _lib("cudnn", 13, None, "/b/libcudnn.so.9"),
             _lib("cudnn", None, "9.1", "/c/libcudnn.so.9")]  # a copy whose major nobody could tell: not judged
    a = audit(pid=5, mapped=["/a/libcudart.so.12"], stack=stack)

    def report(cuda):
        return {"tests": {}, "audits": [a], "provenance": {"ort": {"cuda_version": cuda}}}

    found = [
        "a CUDA 13 cublas served the CUDA 12 cell's test process (pid 5): /b/libcublas.so.13 (13.1.0.3), beside "
        "its CUDA 12 /a/libcublas.so.12",
        "a CUDA 13 cudnn served the CUDA 12 cell's test process (pid 5): /b/libcudnn.so.9 (version unknown), and "
        "no CUDA 12 cudnn was mapped"]
    _, reasons, warnings = library_audit(report("12.8"), (), venv)  # type: ignore[arg-type]
    assert (reasons, [w for w in warnings if "served the CUDA" in w]) == ([], found)
    _, reasons, warnings = library_audit(report("12.8"), ("/a/libcudart.so.12",), venv)  # type: ignore[arg-type]
    assert [r for r in reasons if "served the CUDA" in r] == found and not [w for w in warnings if "served" in w]
    assert [w for w in warnings if "could not be told" in w] == [  # pinned: the copy of unknown major is named
        "the CUDA major of the cudnn /c/libcudnn.so.9 mapped in the CUDA 12 cell's test process (pid 5) could not be "
        "told: neither its wheel nor the library says"]
    assert not [w for w in library_audit(report("12.8"), (), venv)[2] if "could not be told" in w]  # type: ignore[arg-type]
    # from the CUDA 13 side, the CUDA 12 runtime and cuBLAS are the strangers
    _, _, warnings = library_audit(report("13.0"), (), venv)  # type: ignore[arg-type]
    assert [w for w in warnings if "served the CUDA" in w] == [
        "a CUDA 12 cublas served the CUDA 13 cell's test process (pid 5): /a/libcublas.so.12 (12.8.4.1), beside "
        "its CUDA 13 /b/libcublas.so.13",
        "a CUDA 12 cudart served the CUDA 13 cell's test process (pid 5): /a/libcudart.so.12 (12.8.90), and no "
        "CUDA 13 cudart was mapped"]
    # an ORT build that names no CUDA (the CPU wheel), or a report without provenance: nothing to hold it against
    for r in (report(None), report(""), report("x.y"), {"tests": {}, "audits": [a]}, {**report(None), "provenance": None}):
        assert not [w for w in library_audit(r, (), venv)[2] if "served the CUDA" in w], r  # type: ignore[arg-type]
    # "13" alone (no minor) is CUDA 13 too
    assert len([w for w in library_audit(report("13"), (), venv)[2] if "served" in w]) == 2  # type: ignore[arg-type]
