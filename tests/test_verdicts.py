"""Every verdict path, through real nox sessions, real venvs and real pytest runs; and, in-process, the probe
reports whose shape the engine refuses to judge."""
from helpers import SUITES

TEETH = 'message = "AssertionError: \'CUDNN_FLASH_ATTENTION\' != \'MATH\'"\n'


def test_all_pass_passes(harness):
    run = harness.run(["test_allpass.py"], expect="[suite.s.expect.normal]\nmin_passed = 2\n")
    r = run.result("normal")
    assert run.proc.returncode == 0, run.output
    assert r["verdict"] == "pass" and r["reasons"] == []
    assert r["counts"] == {"collected": 2, "passed": 2, "failed": 0, "errors": 0, "skipped": 0, "xfailed": 0, "xpassed": 0,
                           "subtests_passed": 0, "subtests_failed": 0, "subtests_skipped": 0, "subtests_xfailed": 0}
    assert r["pytest_exit_code"] == 0
    assert "cell t-" in run.output and "PASS" in run.output  # the table


def test_all_skip_fails_although_pytest_exits_0(harness):
    run = harness.run(["test_allskip.py"])
    r = run.result("normal")
    assert r["pytest_exit_code"] == 0
    assert r["verdict"] == "fail" and run.proc.returncode != 0
    assert "nothing passed (2 skipped)" in r["reasons"]
    assert any("2 skip(s) not in allowed_skips" in x for x in r["reasons"])


def test_nothing_collected_fails_with_its_own_message(harness):
    r = harness.run(["test_nothing_here.py"]).result("normal")
    assert r["pytest_exit_code"] == 5 and r["verdict"] == "fail"
    assert any("nothing was collected (pytest exit 5)" in x for x in r["reasons"])


def test_unexpected_failure_fails(harness):
    expect = '[suite.s.expect.normal]\nknown_failures = [{ test = "tracked_regression", reason = "issue 7" }]\n'
    r = harness.run(["test_broken.py"], expect=expect).result("normal")
    assert r["verdict"] == "fail"
    assert r["counts"]["passed"] == 1 and r["counts"]["failed"] == 2
    (reason,) = [x for x in r["reasons"] if "unexpected failure" in x]
    assert "test_new_regression" in reason and "tracked_regression" not in reason


def test_only_known_failures_pass(harness):
    expect = ('[suite.s.expect.normal]\nknown_failures = [{ test = "_regression$", reason = "both tracked" }]\n')
    run = harness.run(["test_broken.py"], expect=expect)
    r = run.result("normal")
    assert r["pytest_exit_code"] == 1
    assert r["verdict"] == "pass", r["reasons"]
    assert run.proc.returncode == 0


def test_teeth_with_the_verbatim_failure_passes(harness):
    expect = "[suite.s.expect.teeth]\n" + TEETH + "min_failures = 3\n"
    run = harness.run(["test_canary.py"], root=SUITES / "canary", modes=["teeth"], expect=expect)
    r = run.result("teeth")
    assert r["verdict"] == "pass", r["reasons"]
    assert r["counts"]["failed"] == 3
    assert r["env"]["ORT_MATRIX_CUDA_OPTIONS"] == '{"sdpa_kernel": "16"}'
    assert r["env"]["ORT_TEST_REQUIRE_CUDNN_SDPA"] == "1"


def test_teeth_with_nothing_failing_has_no_teeth(harness):
    run = harness.run(["test_allpass.py"], modes=["teeth"])
    r = run.result("teeth")
    assert r["verdict"] == "fail" and run.proc.returncode != 0
    assert "canary has no teeth: nothing failed with MATH forced" in r["reasons"]


def test_teeth_with_another_error_fails(harness):
    r = harness.run(["test_import_error.py"], root=SUITES / "broken", modes=["teeth"]).result("teeth")
    assert r["verdict"] == "fail"
    assert r["counts"]["errors"] == 1
    assert any("failure(s) other than the canary's" in x and "a_module_that_does_not_exist" in x for x in r["reasons"])
    assert any("exit 2" in x for x in r["reasons"])


def test_teeth_needs_the_exact_message(harness):
    expect = "[suite.s.expect.teeth]\nmessage = \"AssertionError: 'CUDNN_FLASH_ATTENTION' != 'FLASH_ATTENTION'\"\n"
    r = harness.run(["test_canary.py"], root=SUITES / "canary", modes=["teeth"], expect=expect).result("teeth")
    assert r["verdict"] == "fail"
    assert any("0 test(s) failed with exactly" in x for x in r["reasons"])


def test_too_many_warnings_is_reported_for_what_it_is(harness):
    """Everything passed, but pytest >= 9.1 exits 6 over --max-warnings: that is a failure of its own."""
    r = harness.run(["test_warns.py"], suite_extra='pytest_args = ["--max-warnings=0"]').result("normal")
    assert r["counts"]["passed"] == 1 and r["pytest_exit_code"] == 6
    assert r["verdict"] == "fail"
    assert r["reasons"] == ["pytest failed the run for too many warnings (exit 6, pytest >= 9.1)"]


def test_xfail_and_xpass_are_counted_and_a_strict_xpass_fails(harness):
    r = harness.run(["test_xfail.py"]).result("normal")
    c = r["counts"]
    assert (c["passed"], c["xfailed"], c["xpassed"], c["failed"]) == (1, 1, 1, 1)
    assert r["verdict"] == "fail"
    (reason,) = r["reasons"]
    assert "test_strict_but_passes failed: [XPASS(strict)] must keep failing" in reason


def test_a_report_whose_pollution_or_isolation_was_tampered_with_is_not_judged():
    """The probe's report is written inside the test process, so what the engine reads of it is checked: a
    pollution entry of the wrong shape, or an isolation mode that does not exist, makes it malformed (the run
    then fails on that, instead of a traceback, or a baseline that no later load accepts)."""
    from ort_gpu_matrix.execute.probe_report import report_problem
    from ort_matrix_probe.schema import REPORT_VERSION

    good = {"report_version": REPORT_VERSION, "exitstatus": 0, "duration_s": 1.0, "collected": {}, "tests": {},
            "collection": [], "audits": [], "outside_tests_sdpa": [], "unattributed_sdpa": [], "provenance": {},
            "isolation": "restore", "pollution": [
                {"test": "t.py::a", "scope": "function", "process": "gw0", "undone": True, "later_tests": 2,
                 "changes": [{"what": "env", "name": "ORT_X", "before": None, "after": "1"}]}]}
    assert report_problem(good) is None
    bad_entry = {**good, "pollution": [1]}
    assert report_problem(bad_entry) == "the probe's report is malformed: an entry of 'pollution'"
    bad_change = {**good, "pollution": [{**good["pollution"][0], "changes": [{"what": "env", "name": 3}]}]}
    assert report_problem(bad_change) == "the probe's report is malformed: an entry of 'pollution'"
    assert report_problem({**good, "isolation": "x"}) == ("the probe's report is malformed: 'isolation' is 'x', "
                                                          "not one of ('restore', 'report', 'off')")
    # the EP census of a test (report version 3), checked as every other part: refused, never a traceback
    use = {"session": 1, "asked": ["CUDAExecutionProvider"], "served": ["CPUExecutionProvider"],
           "runs": {"CPUExecutionProvider": 2}, "fallback": "not_loaded", "reason": "Failed to load library"}
    entry = {"outcome": "passed", "message": "", "sdpa": []}
    assert report_problem({**good, "tests": {"t::a": {**entry, "ep": [use]}}}) is None
    for bad in (None, 5, "oops", {}, [1], [{**use, "fallback": "elsewhere"}], [{**use, "runs": {"CPU": True}}],
                [{**use, "served": "CPU"}]):
        assert report_problem({**good, "tests": {"t::a": {**entry, "ep": bad}}}) == \
            "the probe's report is malformed: the EP census of 't::a'", bad
