"""Kernel census, teeth coverage and dispatch rules, on CPU through fake_sdpa's native prints."""
import pytest
from helpers import CELL, SUITES

CANARY = SUITES / "canary"
CUDNN = "CUDNN_FLASH_ATTENTION"
EXPECT = """
[suite.s.expect.normal]
require_kernel = "CUDNN_FLASH_ATTENTION"
[suite.s.expect.require_cudnn]
require_kernel = "CUDNN_FLASH_ATTENTION"
forbid_kernels = ["MATH"]
dispatch_tests = "cudnn"
[suite.s.expect.teeth]
min_failures = 3
"""
TOOTHLESS = '\nknown_toothless = [{ test = "values_only", reason = "value-only parity test" }]\n'


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_census_records_every_token_of_every_test(harness, xdist):
    run = harness.run(["test_canary.py"], root=CANARY, modes=["require_cudnn"], expect=EXPECT,
                      suite_extra=f"pytest_args = {xdist!r}".replace("'", '"'))
    r = run.result("require_cudnn")
    assert r["verdict"] == "pass", r["reasons"]
    tests = r["dispatch"]["tests"]
    assert tests == {
        "test_canary.py::test_cudnn_single_run": [CUDNN],
        "test_canary.py::test_cudnn_concurrent_runs": [CUDNN, CUDNN, CUDNN],
        "test_canary.py::test_cudnn_iobinding": [CUDNN],
        "test_canary.py::test_values_only_cudnn_path": [CUDNN],
    }
    # the AttentionKernelOptions line, which names CUDNN_FLASH_ATTENTION=1 on every run, never counts
    assert r["dispatch"]["totals"] == {CUDNN: 6}
    assert r["dispatch"]["tests_per_tier"] == {CUDNN: 4}
    assert r["counts"]["passed"] == 5


def test_teeth_passes_when_every_cudnn_test_bites_or_is_declared(harness):
    harness.write(["test_canary.py"], root=CANARY, modes=["require_cudnn", "teeth"], expect=EXPECT + TOOTHLESS)
    run = harness.nox("-s", CELL)
    r = run.result("teeth")
    assert r["verdict"] == "pass", r["reasons"]
    cov = r["teeth_coverage"]
    assert (cov["tier_tests"], cov["bitten"], cov["toothless"]) == (4, 3, 1)
    assert cov["declared_toothless"] == ["test_canary.py::test_values_only_cudnn_path"]
    assert "cuDNN tests 4, bitten 3, toothless 1" in run.output  # the cell table
    assert r["dispatch"]["totals"] == {"MATH": 6}


def test_an_undeclared_toothless_test_fails_teeth_by_name(harness):
    harness.write(["test_canary.py"], root=CANARY, modes=["require_cudnn", "teeth"], expect=EXPECT)
    run = harness.nox("-s", CELL)
    r = run.result("teeth")
    assert r["verdict"] == "fail" and run.proc.returncode != 0
    (reason,) = [x for x in r["reasons"] if "toothless" in x]
    assert "1 toothless test(s)" in reason and "test_values_only_cudnn_path" in reason


def test_teeth_alone_warns_that_coverage_was_not_checked(harness, tmp_path):
    harness.results = tmp_path / "fresh-results"
    harness.write(["test_canary.py"], root=CANARY, modes=["teeth"], expect=EXPECT)
    r = harness.nox("-s", CELL).result("teeth")
    assert r["teeth_coverage"] == {"checked": False, "scope": "known"}
    assert any("teeth coverage not checked" in w for w in r["warnings"])


def test_forcing_math_through_the_matrix_knob_fails_require_cudnn(harness):
    """The guard's own teeth: sdpa_kernel=16 via suite.provider_options, and the dispatch rules bite."""
    run = harness.run(["test_canary.py"], root=CANARY, modes=["require_cudnn"], expect=EXPECT,
                      suite_extra='provider_options = { sdpa_kernel = "16" }')
    r = run.result("require_cudnn")
    assert r["verdict"] == "fail"
    assert any(x.startswith("no test dispatched CUDNN_FLASH_ATTENTION (seen: MATH)") for x in r["reasons"])
    assert any("dispatched forbidden MATH" in x and "test_cudnn_single_run ran MATH" in x for x in r["reasons"])


def test_a_test_that_captures_fd1_itself_still_sees_its_output(harness):
    """test_cudnn_single_run reads the tier from its own dup2 capture; it passes only if re-emitted."""
    r = harness.run(["test_canary.py"], root=CANARY, modes=["require_cudnn"], expect=EXPECT,
                    suite_extra='pytest_args = ["-k", "single_run"]').result("require_cudnn")
    assert r["counts"]["passed"] == 1 and r["verdict"] == "pass", r["reasons"]
