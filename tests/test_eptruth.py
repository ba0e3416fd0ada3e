"""EP truth: which execution provider served every test that asked for the CUDA EP, and fallbacks caught.

Real nox sessions in real venvs with the CPU wheel run the `ep` fixture suite. Its tests meet a
stand-in CUDA EP (tests/fixtures/suites/cudastandin.py) that fails the ways a real one does: it raises
while the session is built (ORT's Python wrapper retries on the CPU), it logs a library that will not
load and serves the CPU (ORT's C++ layer), it raises EPFail at run time (Session.run reruns on the CPU);
and one test asks the real CPU wheel, which has no CUDA EP. Every one of those tests passes, as it
would on a GPU host, so only the census can tell.
"""
from __future__ import annotations

import json

from helpers import CELL, SUITES

ROOT = SUITES / "ep"
NODE = "test_fallbacks.py::"
SERVED = "test_served.py::"
CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
LOAD = ("Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.12: cannot open shared "
        "object file: No such file or directory")
RAISED = ("stand-in: CUDA failure 100: no CUDA-capable device is detected ; GPU=0 ; hostname=standin ; "
          "expr=cudaSetDevice(info_.device_id);")
EPFAIL = ("stand-in: [ONNXRuntimeError] : 11 : EP_FAIL : CUDA kernel <MatMul> failed: an illegal memory access was "
          "encountered")
CELL_NORMAL = f"{CELL}-normal"
NOT_IN_BUILD = "CUDAExecutionProvider is not in this build (available: AzureExecutionProvider, CPUExecutionProvider)"


def _run(harness, files, expect="", modes=("normal",)):
    return harness.run(files, root=ROOT, pythonpath=[".", ".."], expect=expect, modes=modes)


def test_every_fallback_fails_its_mode_naming_the_test_what_served_it_and_ORTs_reason(harness):
    run = _run(harness, ["test_fallbacks.py"], modes=("normal", "require_cudnn", "teeth"))
    assert run.proc.returncode != 0
    # teeth ("known") leaves out every test no run saw dispatch cuDNN: none of these; run whole, with MATH forced
    # too, a CUDA session the CPU served fails it
    assert len(run.result("teeth")["selection"]["left_out"]) == run.result("normal")["counts"]["collected"]
    teeth = harness.nox("-s", CELL, "--", "--full").result("teeth")
    assert teeth["verdict"] == "fail" and any(x.startswith("4 test(s) asked for the CUDA EP and were served by another")
                                              for x in teeth["reasons"]), teeth["reasons"]
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
    identity = {"op": "Identity", "name": "", "ep": CUDA}  # the model's one node, unnamed, on the stand-in's CUDA EP
    assert r["ep"]["tests"] == {  # every run entry point counted; a CPU-only session is not in the census
        f"{SERVED}test_served_on_cuda": {"runs": {CUDA: 3}, "sessions": 1, "errors": [],
                                         "nodes": [{**identity, "runs": 3, "session": 1}]},
        f"{SERVED}test_every_run_entry_point": {"runs": {CUDA: 2}, "sessions": 1, "errors": [],
                                                "nodes": [{**identity, "runs": 2, "session": 2}]}}


def test_allowed_fallbacks_accept_only_the_reason_they_name_and_a_rule_that_matches_nothing_is_stale(harness):
    expect = """[suite.s.expect.normal]
allowed_fallbacks = [
  { test = "test_cpu_wheel", error = "^CUDAExecutionProvider is not in this build", reason = "the CPU wheel" },
  { test = "test_retried_on_cpu", error = "no CUDA-capable device", reason = "no GPU on this host" },
  { test = "test_skipped_ep|test_run_fails_over", error = "libcudnn", reason = "cuDNN missing (not what happened)" },
  { test = "test_renamed_away", error = ".", reason = "gone since" },
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


def test_reports_show_cuda_runs_and_fallbacks_per_function_and_a_fallback_section_grouped_by_reason(harness, tmp_path):
    run = _run(harness, ["test_fallbacks.py", "test_served.py"])
    assert run.result("normal")["verdict"] == "fail"
    out = tmp_path / "report"
    text = harness.nox("-s", "report", "--", str(harness.results), "--out", str(out)).output
    row = next(line.split() for line in text.splitlines() if line.strip().startswith("test_served.py::test_served_on_cuda "))
    # 1 case, no tier (it prints none), 3 CUDA runs, no fallback
    assert row[:5] == ["test_served.py::test_served_on_cuda", "1", "1", "3", "-"]
    skipped = next(line.split() for line in text.splitlines() if line.strip().startswith("test_fallbacks.py::test_skipped_ep "))
    assert skipped[:6] == ["test_fallbacks.py::test_skipped_ep", "1", "1", "0", "1", "!"]
    assert "CUDA runs: the runs the CUDA EP served" in text
    section = text.split("Fallbacks (tests that asked for the CUDA EP and were served by another) (4):")[1]
    assert (f"  1 (ORT's C++ layer skipped the CUDA EP and served the CPU, nothing raised): {LOAD}\n"
            f"    {CELL_NORMAL} {NODE}test_skipped_ep: {CUDA}, {CPU} -> {CPU}\n") in section
    md = (out / "report.md").read_text()
    assert "## Fallbacks (tests that asked for the CUDA EP and were served by another) (4)" in md
    assert "| CUDA runs | fallbacks | ops on CPU | broken rule |" in md
    assert "| test\\_fallbacks.py::test\\_never\\_runs | 1 | 1 | 0 | 1 hollow | - |" in md
    assert "<MatMul>" not in md
    page = (out / "report.html").read_text()
    assert '<h2 id="fallbacks">' in page and "<th>CUDA runs</th><th>fallbacks</th>" in page
    assert "<MatMul>" not in page and "&lt;MatMul&gt;" in page  # ORT's words are text, never markup


def test_calibrate_writes_cuda_runs_per_function_never_a_fallback_and_a_later_cpu_pass_fails(tmp_path, venvs):
    from test_calibrate import Calibration

    c = Calibration(tmp_path, venvs, pairings='{{ python = "{py}", ort = "cpu", torch = "none", libs = "x", '
                                              'modes = ["normal"] }}')
    c.matrix.write_text(c.matrix.read_text().replace(str(SUITES / "calibrate"), str(ROOT))
                        .replace('files = ["test_calibrate.py"]', 'files = ["test_served.py", "test_fallbacks.py"]'))
    cell = f"c-{CELL.split('-')[1]}-x"
    cal = c.calibrate(cell)
    assert "normal: min_passed 9, 2 cuda_runs" in cal.stdout, cal.stdout[-3000:]
    assert (f"not accepted: normal {NODE}test_skipped_ep in {cell}: not_loaded: {LOAD} (a fallback is never written "
            "down: add an allowed_fallbacks rule by hand if the CPU may serve it)") in cal.stdout
    e = c.data()["normal"]
    cases = "(?:_[0-9]+(?:_.*)?)?(?:\\[.*\\])?$"
    assert [(r["test"], r["min"]) for r in e["cuda_runs"]] == [
        (f"^test_served\\.py::test_every_run_entry_point{cases}", 1), (f"^test_served\\.py::test_served_on_cuda{cases}", 1)]
    assert e["cuda_runs"][1]["reason"] == f"seen in {cell}: 1 case(s), each of them served by the CUDA EP in every run"
    assert "allowed_fallbacks" not in e
    # the release after: the CUDA EP no longer serves test_served.py; its tests still pass, on the CPU
    c.matrix.write_text(c.matrix.read_text().replace('files = ["test_served.py", "test_fallbacks.py"]',
                                                     'files = ["test_served.py", "test_fallbacks.py"]\n'
                                                     'env = { CUDA_STANDIN_MODE = "log_and_skip" }'))
    later = c.nox("-s", cell)
    r = c.result(f"{cell}-normal")
    assert later.returncode != 0 and r["verdict"] == "fail" and r["counts"]["failed"] == 0
    assert [x.split(":")[0] for x in r["reasons"]] == [
        "6 test(s) asked for the CUDA EP and were served by another (no allowed_fallbacks rule matches)",
        "cuda_runs rule '^test_served\\\\.py", "cuda_runs rule '^test_served\\\\.py",  # the regex as repr() shows it
        "cuda_ops rule '^test_served\\\\.py", "cuda_ops rule '^test_served\\\\.py"]  # its ops ran on no CUDA EP either


ALLOW_ALL = """[suite.s.expect.normal]
allowed_fallbacks = [{ test = "test_served", error = "Failed to load library", reason = "allowed, so that only the sweep speaks" }]
"""


def test_a_sweep_names_a_test_the_cuda_ep_no_longer_serves_confirmed_and_a_one_off_is_not(harness, tmp_path):
    env = {"MATRIX_BASELINES": str(tmp_path / "baselines")}
    harness.write(["test_served.py"], root=ROOT, pythonpath=[".", ".."], expect=ALLOW_ALL)
    first = harness.nox("-s", "sweep", "--", "--save-baseline", "b1", env=env)
    assert first.proc.returncode == 0, first.output[-3000:]
    saved = (tmp_path / "baselines" / "b1.json").read_text()
    # baselines record each test's EPs, and the ops that ran on each
    assert f'"{SERVED}test_served_on_cuda": "passed ep=CUDA ops.CUDA=Identity"' in saved
    # the CUDA EP stops serving: every test still passes, the fallback is allowed, the mode is green
    harness.write(["test_served.py"], root=ROOT, pythonpath=[".", ".."], expect=ALLOW_ALL,
                  suite_extra='env = { CUDA_STANDIN_MODE = "log_and_skip" }')
    later = harness.nox("-s", "sweep", "--", "--baseline", "b1", "--gate", "regressions", "--confirm", "2", env=env)
    data = json.loads((harness.results / "sweep.json").read_text())
    assert later.proc.returncode != 0 and data["ok"] is False
    assert [(r["kind"], r["test"], r["before"], r["after"]) for r in data["regressions"]] == [
        ("ep", f"{SERVED}test_every_run_entry_point", "CUDA", "CPU"), ("ep", f"{SERVED}test_served_on_cuda", "CUDA", "CPU")]
    assert "\n  ep: " in later.output
    r = harness.nox("-s", "report", "--", str(harness.results)).output  # reports read the same from the results
    assert "ep:" in r
    result = run_result(harness)
    assert result["verdict"] == "pass"  # allowed: only the comparison with the baseline says it
    confirmed = {t["test"]: (t["checks"], t["unconfirmed"]) for t in result["confirmation"]["tests"]}
    assert confirmed == {f"{SERVED}test_every_run_entry_point": (["ep"], []), f"{SERVED}test_served_on_cuda": (["ep"], [])}
    # a fallback of the first process alone: its reruns are served by the CUDA EP, so it is not confirmed
    harness.write(["test_served.py"], root=ROOT, pythonpath=[".", ".."], expect=ALLOW_ALL,
                  suite_extra=f'env = {{ CUDA_STANDIN_ONCE = "{tmp_path / "once"}" }}')
    once = harness.nox("-s", "sweep", "--", "--baseline", "b1", "--gate", "regressions", "--confirm", "2", env=env)
    data = json.loads((harness.results / "sweep.json").read_text())
    assert once.proc.returncode == 0 and data["ok"] is True, once.output[-3000:]
    assert data["regressions"] == [] and {u["test"] for u in data["unconfirmed"]} == {
        f"{SERVED}test_every_run_entry_point", f"{SERVED}test_served_on_cuda"}
    # the amended result is judged by the reruns that cleared it, its census too: reports and baselines read it
    assert run_result(harness)["ep"]["fallbacks"] == []


def run_result(harness):
    return json.loads((harness.results / f"{CELL}-normal.json").read_text())
