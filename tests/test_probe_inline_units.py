"""The probe's census in this process: pytester.inline_run loads the plugin here, so mutmut maps
these tests to the Probe's hooks and report, which test_probe.py reaches only in pytester subprocesses. The
suite is tiny and real: a CPU onnxruntime session whose native run prints the tier on fd 1."""
from __future__ import annotations

import json
import os
import sys
import time

import onnx  # noqa: F401  (onnx and onnxruntime imported once, here: pytester drops modules a test imports,
import onnxruntime  # and their extension modules cannot load twice)
import pytest
from test_probe import PLUGIN, TINYORT

from ort_matrix_probe import inject  # imported before any inline run: pytester drops the modules a run imports first


def timed(pytester, *args, **kw):
    """An inline run and the seconds it took, which bound the report's duration_s."""
    t0 = time.time()
    rec = pytester.inline_run(*args, **kw)
    return rec, time.time() - t0


def assert_duration(data, elapsed):
    """duration_s: the session's own seconds, to the millisecond, as the schema's float (within the run's own
    seconds, give or take its rounding)."""
    d = data["duration_s"]
    assert isinstance(d, float) and 0 < d <= elapsed + 0.001 and round(d, 3) == d


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
    rec, elapsed = timed(pytester, *PLUGIN)
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
    assert set(data["timings"]) == {"controller"}
    assert_duration(data, elapsed)
    marks = data["timings"]["controller"]
    assert marks["isolation_tests"] == 4  # the four tests kept, each watched once
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
    before = len(inject.INJECTIONS)
    rec, elapsed = timed(pytester, *PLUGIN)
    rec.assertoutcome(passed=2)
    data = json.loads(report.read_text())
    assert {k: (v["sdpa"], v["injections"], v["process"]) for k, v in data["tests"].items()} == {
        "test_forced.py::test_two_sessions": (["CUDNN_FLASH_ATTENTION"] * 2, 2, "controller"),
        "test_forced.py::test_none": ([], 0, "controller")}
    assert data["collected"] == {"controller": 2} and data["exitstatus"] == 0
    assert data["outside_tests_sdpa"] == []  # nothing printed outside a test: an empty list, as the schema says
    assert_duration(data, elapsed)
    # the CUDA EP got the options as ORT takes them: by their names, each value a string
    passed = [(i["test"], i["passed"]["providers"]) for i in inject.INJECTIONS[before:]]
    assert passed == [("test_forced.py::test_two_sessions",
                       [("CUDAExecutionProvider", {"sdpa_kernel": "8"}), "CPUExecutionProvider"])] * 2


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
    _, elapsed = timed(pytester, *PLUGIN, "--continue-on-collection-errors")
    os.environ.pop("ORT_MATRIX_UNIT_X", None)
    data = json.loads(report.read_text())
    assert_duration(data, elapsed)
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



def clean_env(monkeypatch, report):
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
    for name in ("ORT_MATRIX_PROGRESS", "ORT_MATRIX_KEEP", "ORT_MATRIX_DIGEST_FD", "ORT_MATRIX_CUDA_OPTIONS",
                 "ORT_MATRIX_LOADER", "ORT_MATRIX_ISOLATION"):
        monkeypatch.delenv(name, raising=False)


class AsWorker:
    """What xdist does to a worker's config before pytest_configure (xdist/remote.py): it sets workerinput
    and an empty workeroutput, which the worker sends to the controller when its session ends."""

    config = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config):
        config.workerinput = {"workerid": "gw7", "workercount": 1, "testrunuid": "unit"}
        config.workeroutput = {}
        self.config = config


def test_a_worker_hands_its_census_audit_and_timings_to_the_controller_and_writes_nothing(pytester, monkeypatch):
    pytester.makepyfile(tinyort=TINYORT)
    pytester.makepyfile(test_w='''
from tinyort import session, feed

def test_cudnn():
    session().run(None, feed())

def test_none():
    pass
''')
    report, progress = pytester.path / "report.json", pytester.path / "progress"
    clean_env(monkeypatch, report)
    monkeypatch.setenv("ORT_MATRIX_PROGRESS", str(progress))
    worker = AsWorker()
    rec = pytester.inline_run(*PLUGIN, "-p", "no:xdist", plugins=[worker])
    rec.assertoutcome(passed=2)
    assert not report.exists() and not progress.exists()  # the controller writes both, for every worker
    teardown = {r.nodeid: dict(r.user_properties) for r in rec.getreports("pytest_runtest_logreport")
                if r.when == "teardown"}  # what xdist carries to the controller
    assert {k: v["ort_matrix.sdpa"] for k, v in teardown.items()} == {
        "test_w.py::test_cudnn": ["CUDNN_FLASH_ATTENTION"], "test_w.py::test_none": []}
    out = worker.config.workeroutput
    audit = json.loads(out["ort_matrix_audit"])
    assert audit["process"] == "gw7" and audit["loader"] is None
    assert audit["onnxruntime_version"] == onnxruntime.__version__
    marks = json.loads(out["ort_matrix_timings"])
    assert marks["isolation_tests"] == 2 and marks["first_test_start"] <= marks["finished"]
    assert json.loads(out["ort_matrix_pollution"]) == []


SHADOW = "__version__ = '0.0.shadow'\n"


def loader_of(report):
    (a,) = json.loads(report.read_text())["audits"]
    return a["loader"]


def test_the_loader_resolves_onnxruntime_on_the_sys_path_the_tests_will_have(pytester, monkeypatch, tmp_path):
    """ort_preload_dlls imports onnxruntime before pytest puts the tests' dirs on sys.path: it must see the
    source dir beside a test module that would shadow the wheel (and refuse), and must not see one beside a
    conftest that --confcutdir keeps pytest from loading."""
    report = pytester.path / "report.json"
    clean_env(monkeypatch, report)
    monkeypatch.setenv("ORT_MATRIX_LOADER", f"ort_preload_dlls:{tmp_path}")
    pytester.mkdir("onnxruntime")
    (pytester.path / "onnxruntime" / "__init__.py").write_text(SHADOW)
    pytester.makepyfile(test_here="def test_here():\n    pass\n")
    pytester.inline_run(*PLUGIN, "test_here.py").assertoutcome(passed=1)
    rec = loader_of(report)
    shadow = os.path.realpath(pytester.path / "onnxruntime" / "__init__.py")
    assert (rec["resolved"], rec["called"]) == (shadow, False)
    assert rec["error"].startswith(f"the tests would import onnxruntime from {shadow}, not from the pairing's venv")

    pytester.makeini("[pytest]\n")  # rootdir and the default confcutdir: here
    pytester.makeconftest("")  # beside the shadow: pytest would put this dir on sys.path if it loaded it
    pytester.mkdir("sub")
    (pytester.path / "sub" / "test_sub.py").write_text("")  # no tests: nothing to watch, nothing watched
    report.unlink()
    pytester.inline_run(*PLUGIN, "--confcutdir=sub", "sub/test_sub.py")
    rec = loader_of(report)
    assert rec["resolved"] == os.path.realpath(onnxruntime.__file__) and "shadows" not in rec.get("error", "")
    marks = json.loads(report.read_text())["timings"]["controller"]
    assert (marks["isolation_s"], marks["isolation_tests"]) == (0, 0)


def test_a_probe_loaded_from_a_conftest_still_applies_the_libs_sets_loader(pytester, monkeypatch, tmp_path):
    """Loaded late (a conftest's pytest_plugins, not -p), the probe missed the hook before the conftests and
    applies the loader when it is configured, on the sys.path of then."""
    report = pytester.path / "report.json"
    clean_env(monkeypatch, report)
    monkeypatch.setenv("ORT_MATRIX_LOADER", f"ort_preload_dlls:{tmp_path}")
    pytester.makeconftest('pytest_plugins = ["ort_matrix_probe.plugin"]\n')
    pytester.makepyfile(test_late="def test_late():\n    pass\n")
    pytester.inline_run("-p", "no:cacheprovider", "test_late.py").assertoutcome(passed=1)
    rec = loader_of(report)
    assert rec["loader"] == "ort_preload_dlls" and rec["directory"] == str(tmp_path)
    assert rec["resolved"] == os.path.realpath(onnxruntime.__file__)


def test_under_xdist_the_report_names_the_onnxruntime_the_workers_imported(pytester, monkeypatch):
    """The controller (this process, with the wheel imported) gathers its workers' audits: the report's
    ort_imported_version is the one the tests imported (a shadow's here), and the controller's own only when no
    worker imported onnxruntime at all."""
    report = pytester.path / "report.json"
    clean_env(monkeypatch, report)
    pytester.mkdir("onnxruntime")
    (pytester.path / "onnxruntime" / "__init__.py").write_text(SHADOW)
    pytester.makepyfile(test_shadowed="import onnxruntime\n\ndef test_shadowed():\n    assert onnxruntime.__version__ == '0.0.shadow'\n")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    xdist = (*PLUGIN, "-p", "xdist", "-n", "1")
    pytester.inline_run(*xdist, "test_shadowed.py").assertoutcome(passed=1)
    data = json.loads(report.read_text())
    assert [(a["process"], a["onnxruntime_version"]) for a in data["audits"]] == [("gw0", "0.0.shadow")]
    assert data["provenance"]["ort_imported_version"] == "0.0.shadow"
    assert data["collected"] == {"gw0": 1} and set(data["timings"]) == {"controller", "gw0"}
    report.unlink()
    pytester.inline_run(*xdist, "test_plain.py").assertoutcome(passed=1)
    data = json.loads(report.read_text())
    assert [(a["process"], a["onnxruntime_version"]) for a in data["audits"]] == [("gw0", None)]
    assert data["provenance"]["ort_imported_version"] == onnxruntime.__version__


def test_a_teeth_started_early_waits_for_its_keep_file_and_a_file_that_never_comes_is_a_usage_error(pytester, monkeypatch):
    """With ORT_MATRIX_KEEP_WAIT_S, the processes collect, then wait for the keep file the engine writes
    once require_cudnn's census is stored; the marks say when the wait began and ended. A file that never comes
    stops the run as a usage error naming the file and the bound, never a run of every test."""
    import threading
    pytester.makepyfile(test_wait='''
def test_kept():
    pass

def test_dropped():
    pass
''')
    report, keep = pytester.path / "report.json", pytester.path / "keep.json"
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
    monkeypatch.setenv("ORT_MATRIX_KEEP", str(keep))
    monkeypatch.setenv("ORT_MATRIX_KEEP_WAIT_S", "30")
    for name in ("ORT_MATRIX_PROGRESS", "ORT_MATRIX_DIGEST_FD", "ORT_MATRIX_CUDA_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    main, written, ended = threading.main_thread(), {}, threading.Event()

    def waiting() -> bool:  # the probe's wait_for is on the main thread's stack: it waits for the file now
        frame = sys._current_frames().get(main.ident)
        while frame is not None and not (frame.f_code.co_filename.endswith("keepwait.py")
                                         and "wait_for" in frame.f_code.co_name):  # mutmut renames it x_wait_for...
            frame = frame.f_back
        return frame is not None

    def write_late():  # the keep file comes once the probe waits for it, however long collection took
        while not waiting() and not ended.is_set():  # a run that never waits fails on the missing file
            time.sleep(0.01)
        written["at"] = round(time.time(), 3)  # as the marks are: rounding keeps their order
        keep.write_text(json.dumps(["test_wait.py::test_kept"]))

    late = threading.Thread(target=write_late, daemon=True)
    late.start()
    rec = pytester.inline_run(*PLUGIN)
    ended.set()
    late.join(timeout=60)
    rec.assertoutcome(passed=1)
    marks = json.loads(report.read_text())["timings"]["controller"]
    assert marks["keep_wait_start"] <= written["at"] <= marks["kept"]  # it waited for the file
    assert marks["kept"] - written["at"] < 20  # then went on at once
    assert marks["keep_wait_start"] <= marks["kept"] <= marks["first_test_start"]

    keep.unlink()
    report.unlink()
    monkeypatch.setenv("ORT_MATRIX_KEEP_WAIT_S", "0.3")
    result = pytester.runpytest_inprocess(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*ort_matrix_probe: the node ids to keep did not arrive in {keep} within 0.3 s*"])
    assert "passed" not in result.stdout.str()  # no test ran
    monkeypatch.setenv("ORT_MATRIX_KEEP_WAIT_S", "soon")
    result = pytester.runpytest_inprocess(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ORT_MATRIX_KEEP_WAIT_S='soon' is not a number of seconds*"])


@pytest.mark.parametrize("given, quiet", [("1", True), ("0", False), (None, False)], ids=["quiet", "off", "unset"])
def test_quiet_threads_are_armed_only_by_its_variable_set_to_1(pytester, monkeypatch, given, quiet):
    """ORT_MATRIX_QUIET_THREADS=1 arms quiet.py in an inline run (what the probe reads of it, mapped here); any
    other value, or none, leaves a session's spinning keys unset."""
    pytester.makepyfile(tinyort=TINYORT)
    pytester.makepyfile(test_spin=f'''
import onnxruntime as ort
from tinyort import model

def test_spin():
    options = ort.InferenceSession(model(), providers=["CPUExecutionProvider"]).get_session_options()
    read = type(options).get_session_config_entry
    try:
        got = getattr(read, "__wrapped__", read)(options, "session.intra_op.allow_spinning")
    except RuntimeError:
        got = None
    assert got == ({quiet!r} and "0 (ort-gpu-matrix quiet_threads)" or None)
''')
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(pytester.path / "report.json"))
    monkeypatch.delenv("ORT_MATRIX_CUDA_OPTIONS", raising=False)
    if given is None:
        monkeypatch.delenv("ORT_MATRIX_QUIET_THREADS", raising=False)
    else:
        monkeypatch.setenv("ORT_MATRIX_QUIET_THREADS", given)
    rec = pytester.inline_run(*PLUGIN)
    rec.assertoutcome(passed=1)
