"""The probe's census in this process (issue 26): pytester.inline_run loads the plugin here, so mutmut maps
these tests to the Probe's hooks and report, which test_probe.py reaches only in pytester subprocesses. The
suite is tiny and real: a CPU onnxruntime session whose native run prints the tier on fd 1."""
from __future__ import annotations

import json
import os

import onnx  # noqa: F401  (onnx and onnxruntime imported once, here: pytester drops modules a test imports,
import onnxruntime  # and their extension modules cannot load twice)
from test_probe import PLUGIN, TINYORT


def test_the_census_report_progress_and_digest_of_an_inline_run(pytester, monkeypatch):
    pytester.makepyfile(tinyort=TINYORT)
    pytester.makepyfile(test_inline='''
import os
import pytest
from tinyort import session, feed

session(b"MATH").run(None, feed())  # at collection, outside any test

def test_cudnn():
    with open(os.environ["ORT_MATRIX_PROGRESS"]) as f:  # a line a test: the engine reads it while tests run
        assert f.read().splitlines()[-1] == "start\ttest_inline.py::test_cudnn"
    s = session()
    s.run(None, feed())
    s.run(None, feed())

def test_math():
    session(b"MATH").run(None, feed())

def test_cpu_only():
    session(b"MATH", providers=("CPUExecutionProvider",)).run(None, feed())

def test_fails():
    assert 1 == 2, "one is not two"

def test_left_out():
    pass
''')
    report, progress, keep = pytester.path / "report.json", pytester.path / "progress", pytester.path / "keep.json"
    keep.write_text(json.dumps([f"test_inline.py::test_{n}" for n in ("cudnn", "math", "cpu_only", "fails")]))
    read, write = os.pipe()
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
    monkeypatch.setenv("ORT_MATRIX_PROGRESS", str(progress))
    monkeypatch.setenv("ORT_MATRIX_KEEP", str(keep))
    monkeypatch.setenv("ORT_MATRIX_DIGEST_FD", str(write))
    monkeypatch.delenv("ORT_MATRIX_CUDA_OPTIONS", raising=False)
    rec = pytester.inline_run(*PLUGIN)
    os.set_blocking(read, False)  # a probe that sent nothing must fail the test, not hang it
    try:
        digest = os.read(read, 200).decode()
    except BlockingIOError:
        digest = ""
    finally:
        os.close(read)  # the write end is the probe's to close: closing it here could close a reused fd
    rec.assertoutcome(passed=3, failed=1)
    data = json.loads(report.read_text())
    import hashlib
    assert digest == hashlib.sha256(report.read_bytes()).hexdigest() + "\n"
    assert {k.split("::")[1]: (v["outcome"], v["sdpa"]) for k, v in data["tests"].items()} == {
        "test_cudnn": ("passed", ["CUDNN_FLASH_ATTENTION", "CUDNN_FLASH_ATTENTION"]), "test_math": ("passed", ["MATH"]),
        "test_cpu_only": ("passed", []), "test_fails": ("failed", [])}
    assert data["unattributed_sdpa"] == ["MATH"] and data["outside_tests_sdpa"] == ["MATH"]
    assert data["collected"] == {"controller": 4} and data["exitstatus"] == 1
    assert [a["process"] for a in data["audits"]] == ["controller"]
    assert data["provenance"]["ort_imported_version"] == onnxruntime.__version__
    assert data["report_version"] and data["isolation"] in ("restore", "report", "off")
    assert set(data["timings"]) == {"controller"} and data["duration_s"] >= 0
    marks = data["timings"]["controller"]
    assert {"configured", "collection_start", "collected", "first_test_start", "first_test_end", "last_test_end",
            "finished"} <= set(marks) and marks["configured"] <= marks["collected"] <= marks["finished"]
    lines = progress.read_text().splitlines()
    assert lines[0] == "collected\t4" and lines[1:3] == ["start\ttest_inline.py::test_cudnn", "end\ttest_inline.py::test_cudnn"]
    assert len(lines) == 9


def test_forced_options_are_counted_per_test_and_no_digest_fd_is_no_error(pytester, monkeypatch):
    pytester.makepyfile(tinyort=TINYORT)
    pytester.makepyfile(test_forced='''
from tinyort import session, feed

def test_two_sessions():
    session().run(None, feed())
    session().run(None, feed())

def test_none():
    pass
''')
    report = pytester.path / "report.json"
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
    monkeypatch.setenv("ORT_MATRIX_CUDA_OPTIONS", json.dumps({"sdpa_kernel": 8}))
    for name in ("ORT_MATRIX_PROGRESS", "ORT_MATRIX_KEEP", "ORT_MATRIX_DIGEST_FD"):
        monkeypatch.delenv(name, raising=False)
    pytester.inline_run(*PLUGIN).assertoutcome(passed=2)
    data = json.loads(report.read_text())
    assert {k: (v["sdpa"], v["injections"], v["process"]) for k, v in data["tests"].items()} == {
        "test_forced.py::test_two_sessions": (["CUDNN_FLASH_ATTENTION"] * 2, 2, "controller"),
        "test_forced.py::test_none": ([], 0, "controller")}
    assert data["collected"] == {"controller": 2} and data["exitstatus"] == 0


def test_collection_errors_pollution_and_the_isolation_asked_for_reach_the_report(pytester, monkeypatch):
    pytester.makepyfile(tinyort=TINYORT)
    pytester.makepyfile(test_state='''
import os
import time
from tinyort import session, feed

session(b"MATH", providers=("CPUExecutionProvider",)).run(None, feed())  # at collection, a CPU session only

def test_sets_env():
    os.environ["ORT_MATRIX_UNIT_X"] = "1"

def test_later():
    time.sleep(0.01)
''')
    pytester.makepyfile(test_broken="raise ImportError('no such module here')\n")
    report = pytester.path / "report.json"
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
    monkeypatch.setenv("ORT_MATRIX_ISOLATION", "report")
    for name in ("ORT_MATRIX_PROGRESS", "ORT_MATRIX_KEEP", "ORT_MATRIX_DIGEST_FD", "ORT_MATRIX_CUDA_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ORT_MATRIX_UNIT_X", raising=False)
    pytester.inline_run(*PLUGIN, "--continue-on-collection-errors")
    os.environ.pop("ORT_MATRIX_UNIT_X", None)
    data = json.loads(report.read_text())
    assert data["isolation"] == "report"
    assert [(c["nodeid"], c["outcome"]) for c in data["collection"]] == [("test_broken.py", "error")]
    assert "no such module here" in data["collection"][0]["message"]
    (p,) = data["pollution"]
    assert (p["test"], p["process"], p["changes"]) == ("test_state.py::test_sets_env", "controller",
                                                       [{"what": "env", "name": "ORT_MATRIX_UNIT_X", "before": None,
                                                         "after": "1"}])
    assert data["unattributed_sdpa"] == ["MATH"]  # printed at collection by a CPU session
    marks = data["timings"]["controller"]
    assert marks["last_test_end"] > marks["first_test_end"]

