"""EP truth: which execution provider served every test that asked for the CUDA EP, and fallbacks caught.

Real nox sessions in real venvs with the CPU wheel run the `ep` fixture suite. Its tests meet a
stand-in CUDA EP (tests/fixtures/suites/cudastandin.py) that fails the ways a real one does: it raises
while the session is built (ORT's Python wrapper retries on the CPU), it logs a library that will not
load and serves the CPU (ORT's C++ layer), it raises EPFail at run time (Session.run reruns on the CPU);
and one test asks the real CPU wheel, which has no CUDA EP. Every one of those tests passes, as it
would on a GPU host, so only the census can tell.
"""
from __future__ import annotations

from conftest import SUITES

ROOT = SUITES / "ep"
NODE = "test_fallbacks.py::"
SERVED = "test_served.py::"
CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
LOAD = ("Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.12: cannot open shared "
        "object file: No such file or directory")
RAISED = ("stand-in: CUDA failure 100: no CUDA-capable device is detected ; GPU=0 ; hostname=standin ; "
          "expr=cudaSetDevice(info_.device_id);")
EPFAIL = ("stand-in: [ONNXRuntimeError] : 11 : EP_FAIL : CUDA kernel MatMul failed: an illegal memory access was "
          "encountered")
NOT_IN_BUILD = "CUDAExecutionProvider is not in this build (available: AzureExecutionProvider, CPUExecutionProvider)"


def _run(harness, files, expect="", modes=("normal",)):
    return harness.run(files, root=ROOT, pythonpath=[".", ".."], expect=expect, modes=modes)


def test_every_fallback_fails_its_mode_naming_the_test_what_served_it_and_ORTs_reason(harness):
    run = _run(harness, ["test_fallbacks.py"], modes=("normal", "require_cudnn"))
    assert run.proc.returncode != 0
    for mode in ("normal", "require_cudnn"):
        r = run.result(mode)
        assert r["verdict"] == "fail" and r["counts"]["passed"] == 6 and r["counts"]["failed"] == 0
        assert r["reasons"] == [
            "4 test(s) asked for the CUDA EP and were served by another (no allowed_fallbacks rule matches): "
            f"{NODE}test_cpu_wheel_has_no_cuda asked for {CUDA}, {CPU}, served by {CPU} (the wheel has no CUDA EP: "
            f"{NOT_IN_BUILD}); "
            f"{NODE}test_retried_on_cpu asked for {CUDA}, {CPU}, served by {CPU} (ORT's Python wrapper caught the EP "
            f"error and retried on the CPU: {RAISED}); "
            f"{NODE}test_run_fails_over asked for {CUDA}, {CPU}, served by {CPU} (Session.run caught EPFail and reran "
            f"on the CPU: {EPFAIL}); "
            f"{NODE}test_skipped_ep asked for {CUDA}, {CPU}, served by {CPU} (ORT's C++ layer skipped the CUDA EP and "
            f"served the CPU, nothing raised: {LOAD})"]
        kinds = {f["nodeid"].split("::")[-1]: (f["kind"], f["reason"]) for f in r["ep"]["fallbacks"]}
        assert kinds == {"test_retried_on_cpu": ("retried", RAISED), "test_skipped_ep": ("not_loaded", LOAD),
                         "test_run_fails_over": ("run_fallback", EPFAIL),
                         "test_cpu_wheel_has_no_cuda": ("not_in_build", NOT_IN_BUILD)}
        # the hollow passes: counted and shown, not failed without a cuda_runs rule
        assert r["ep"]["hollow"] == [f"{NODE}test_never_runs", f"{NODE}test_swallowed_session"]
        hollow = next(w for w in r["warnings"] if "hollow" in w)
        assert hollow == ("2 hollow pass(es): passed after asking for the CUDA EP, with no run it served: "
                          f"{NODE}test_never_runs (it made no run at all); {NODE}test_swallowed_session (it made no "
                          "run at all; its CUDA session failed: stand-in: the session cannot be built on any EP)")
        ep = r["ep"]["tests"]
        assert ep[f"{NODE}test_skipped_ep"] == {"runs": {CPU: 2}, "sessions": 1, "errors": []}
        assert ep[f"{NODE}test_run_fails_over"]["runs"] == {CPU: 1}  # the failed CUDA attempt returned nothing
    assert "served by" in run.output and "hollow" in run.output


def test_a_cell_where_nothing_fell_back_is_green_with_its_cuda_runs_counted(harness):
    run = _run(harness, ["test_served.py"])
    assert run.proc.returncode == 0, run.output[-3000:]
    r = run.result("normal")
    assert r["verdict"] == "pass" and r["reasons"] == [] and not any("hollow" in w for w in r["warnings"])
    assert r["ep"]["taken"] is True and r["ep"]["fallbacks"] == [] and r["ep"]["hollow"] == []
    assert r["ep"]["tests"] == {  # every run entry point counted; a CPU-only session is not in the census
        f"{SERVED}test_served_on_cuda": {"runs": {CUDA: 3}, "sessions": 1, "errors": []},
        f"{SERVED}test_every_run_entry_point": {"runs": {CUDA: 2}, "sessions": 1, "errors": []}}


def test_allowed_fallbacks_accept_only_the_reason_they_name_and_a_rule_that_matches_nothing_is_stale(harness):
    expect = f"""[suite.s.expect.normal]
allowed_fallbacks = [
  {{ test = "test_cpu_wheel", error = "^CUDAExecutionProvider is not in this build", reason = "the CPU wheel" }},
  {{ test = "test_retried_on_cpu", error = "no CUDA-capable device", reason = "no GPU on this host" }},
  {{ test = "test_skipped_ep|test_run_fails_over", error = "libcudnn", reason = "cuDNN missing (not what happened)" }},
  {{ test = "test_renamed_away", error = ".", reason = "gone since" }},
]
"""
    run = _run(harness, ["test_fallbacks.py"], expect=expect)
    r = run.result("normal")
    assert r["verdict"] == "fail"
    assert len(r["reasons"]) == 1 and r["reasons"][0].startswith("2 test(s) asked for the CUDA EP")
    assert f"{NODE}test_skipped_ep" in r["reasons"][0] and f"{NODE}test_run_fails_over" in r["reasons"][0]
    assert "test_retried_on_cpu" not in r["reasons"][0] and "test_cpu_wheel" not in r["reasons"][0]
    allowed = {f["nodeid"].split("::")[-1]: f["allowed_by"] for f in r["ep"]["fallbacks"]}
    assert allowed == {"test_cpu_wheel_has_no_cuda": "test_cpu_wheel", "test_retried_on_cpu": "test_retried_on_cpu",
                       "test_skipped_ep": None, "test_run_fails_over": None}
    stale = {s["pattern"]: s["what"] for s in r["stale_rules"] if s["key"] == "allowed_fallbacks"}
    assert stale == {"test_skipped_ep|test_run_fails_over": "no fallback had a reason it matches",
                     "test_renamed_away": "it matched no test that ran (gone, renamed or deselected)"}


def test_cuda_runs_rules_fail_hollow_passes_and_short_counts(harness):
    expect = f"""[suite.s.expect.normal]
allowed_fallbacks = [{{ test = ".", error = ".", reason = "this test is about cuda_runs" }}]
cuda_runs = [
  {{ test = "test_never_runs|test_swallowed", reason = "they must run on the GPU" }},
  {{ test = "test_skipped_ep", min = 1 }},
  {{ test = "{SERVED}test_served_on_cuda", min = 4, reason = "three runs are not enough" }},
  {{ test = "{SERVED}test_every_run_entry_point", min = 2 }},
]
"""
    run = _run(harness, ["test_fallbacks.py", "test_served.py"], expect=expect)
    r = run.result("normal")
    assert r["verdict"] == "fail"
    assert r["reasons"] == [
        "cuda_runs rule 'test_never_runs|test_swallowed' (min 1) broken by 2 test(s): "
        f"{NODE}test_never_runs made 0 CUDA run(s) (it made no run at all); "
        f"{NODE}test_swallowed_session made 0 CUDA run(s) (it made no run at all; its CUDA session failed: stand-in: "
        "the session cannot be built on any EP)",
        f"cuda_runs rule 'test_skipped_ep' (min 1) broken by 1 test(s): {NODE}test_skipped_ep made 0 CUDA run(s) "
        f"(its runs were served by {CPU} x2)",
        f"cuda_runs rule '{SERVED}test_served_on_cuda' (min 4) broken by 1 test(s): {SERVED}test_served_on_cuda made "
        "3 CUDA run(s)"]
    assert not [s for s in r["stale_rules"] if s["key"] == "cuda_runs"]


def test_the_cpu_smoke_cell_declares_that_the_cpu_serves_and_stays_green_for_that_reason(harness):
    expect = """[suite.s.expect.normal]
allowed_fallbacks = [{ test = ".", error = "^CUDAExecutionProvider is not in this build", reason = "the CPU wheel" }]
"""
    run = harness.run(["test_fallbacks.py"], root=ROOT, pythonpath=[".", ".."], expect=expect,
                      suite_extra='pytest_args = ["-k", "test_cpu_wheel"]')
    assert run.proc.returncode == 0, run.output[-3000:]
    r = run.result("normal")
    assert r["verdict"] == "pass" and r["counts"]["passed"] == 1
    assert [(f["kind"], f["allowed_by"]) for f in r["ep"]["fallbacks"]] == [("not_in_build", ".")]
