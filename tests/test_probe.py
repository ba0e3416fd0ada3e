"""The probe as a pytest plugin, through pytester: real pytest runs, real onnxruntime (CPU), real fd 1."""
import json

import onnxruntime  # imported once, here: pytester drops modules a test imports, and numpy cannot load twice
import pytest
from helpers import REPO, build_so

PLUGIN = ("-p", "ort_matrix_probe.plugin", "-p", "no:cacheprovider")

TINYORT = '''
import os
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper


def model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


class Printing:
    """A real session whose native run also prints the tier, on fd 1, as ORT's CUDA kernels do."""

    def __init__(self, inner, tier):
        self.inner, self.tier = inner, tier

    def run(self, *a, **k):
        os.write(1, b"AttentionKernelOptions: CUDNN_FLASH_ATTENTION=1 MATH=1\\n")
        os.write(1, b"\\x1b[1;32mOperator=Attention SdpaKernel=" + self.tier + b"\\x1b[0m\\n")
        return self.inner.run(*a, **k)

    def __getattr__(self, name):
        return getattr(self.inner, name)


CUDA = ("CUDAExecutionProvider", "CPUExecutionProvider")  # asked for; the CPU wheel falls back to CPU


def session(tier=b"CUDNN_FLASH_ATTENTION", providers=CUDA):
    s = ort.InferenceSession(model(), providers=list(providers))
    s._sess = Printing(s._sess, tier)
    return s


def feed():
    return {"x": np.array([1.0, 2.0], dtype=np.float32)}
'''


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the subprocess imports the probe from this checkout
    pytester.makepyfile(tinyort=TINYORT)
    report = pytester.path / "report.json"
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
    monkeypatch.delenv("ORT_MATRIX_CUDA_OPTIONS", raising=False)
    return pytester, report


def test_every_outcome_lands_in_the_report(suite):
    pytester, report = suite
    pytester.makepyfile(test_outcomes='''
import pytest

@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")

def test_pass(): pass
def test_fail(): assert 1 == 2, "one is not two"
def test_skip(): pytest.skip("not here")
@pytest.mark.xfail(reason="known")
def test_xfail(): assert False
def test_teardown(broken_teardown): pass
''')
    result = pytester.runpytest_subprocess(*PLUGIN)
    assert result.ret == 1
    data = json.loads(report.read_text())
    assert data["report_version"] == 6 and data["exitstatus"] == 1
    outcomes = {k.split("::")[1]: v["outcome"] for k, v in data["tests"].items()}
    assert outcomes == {"test_pass": "passed", "test_fail": "failed", "test_skip": "skipped",
                        "test_xfail": "xfailed", "test_teardown": "passed"}
    tests = {k.split("::")[1]: v for k, v in data["tests"].items()}
    assert tests["test_fail"]["message"].startswith("AssertionError: one is not two")
    assert tests["test_skip"]["message"] == "not here"
    assert tests["test_teardown"]["teardown_error"] == "RuntimeError: teardown broke"
    (audit,) = data["audits"]
    assert audit["onnxruntime_file"] is None  # nothing imported onnxruntime
    assert data["provenance"]["ort"]["version"] == onnxruntime.__version__


def test_the_census_counts_tier_tokens_per_test_and_never_the_options_line(suite):
    pytester, report = suite
    pytester.makepyfile(test_census='''
import os
import threading
from tinyort import session, feed

def test_cudnn():
    s = session()
    s.run(None, feed())
    s.run(None, feed())

def test_math():
    session(b"MATH").run(None, feed())

def test_printed_outside_run():
    os.write(1, b"SdpaKernel=CUDNN_FLASH_ATTENTION\\n")  # not during a run: not ORT's dispatch line

def test_printed_while_only_a_cpu_session_runs():
    s = session(b"MATH", providers=("CPUExecutionProvider",))
    s.run(None, feed())  # a CPU session cannot dispatch a CUDA kernel: its tokens are not counted
''')
    result = pytester.runpytest_subprocess(*PLUGIN)
    assert result.ret == 0
    data = json.loads(report.read_text())
    tests = {k.split("::")[1]: v["sdpa"] for k, v in data["tests"].items()}
    assert tests == {"test_cudnn": ["CUDNN_FLASH_ATTENTION", "CUDNN_FLASH_ATTENTION"], "test_math": ["MATH"],
                     "test_printed_outside_run": [], "test_printed_while_only_a_cpu_session_runs": []}
    assert data["unattributed_sdpa"] == ["MATH"]


def test_runs_that_overlap_share_one_tap_and_lose_no_token_or_byte(suite):
    """A CUDA session's run in a thread, and a CPU session's whole run inside it: both tokens the CUDA run
    printed are counted for the test (before and after the CPU run ended), and both reach the test's fd 1."""
    pytester, report = suite
    pytester.makepyfile(test_overlap='''
import os
import threading
import onnxruntime as ort
from tinyort import feed, model

inside, done = threading.Event(), threading.Event()


class Slow:
    """A CUDA kernel's native run: prints a tier, waits while another session runs, prints another."""

    def __init__(self, inner):
        self.inner = inner

    def run(self, *a, **k):
        os.write(1, b"SdpaKernel=MATH\\n")
        inside.set()
        assert done.wait(30)
        os.write(1, b"SdpaKernel=CUDNN_FLASH_ATTENTION\\n")
        return self.inner.run(*a, **k)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_overlap(capfd):
    cuda = ort.InferenceSession(model(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    cuda._sess = Slow(cuda._sess)
    cpu = ort.InferenceSession(model(), providers=["CPUExecutionProvider"])
    errors = []

    def slow_run():
        try:
            cuda.run(None, feed())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=slow_run)
    thread.start()
    assert inside.wait(30)
    cpu.run(None, feed())  # opens and closes while the CUDA run is still going
    done.set()
    thread.join(30)
    assert errors == []
    out = capfd.readouterr().out
    assert out.count("SdpaKernel=") == 2, out
''')
    result = pytester.runpytest_subprocess(*PLUGIN)
    assert result.ret == 0, result.stdout.str()
    data = json.loads(report.read_text())
    (test,) = data["tests"].values()
    assert test["sdpa"] == ["MATH", "CUDNN_FLASH_ATTENTION"]
    assert data["unattributed_sdpa"] == []


def test_a_token_native_code_leaves_in_its_stdio_buffer_is_counted(suite, tmp_path, monkeypatch):
    """ORT prints through C stdio, which a pipe on fd 1 makes fully buffered: the tap flushes it before closing."""
    pytester, report = suite
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # it would make C's stdout unbuffered too
    say = build_so(tmp_path / "libsay.so", "libsay.so", "#include <stdio.h>\nvoid say(const char *s) { fputs(s, stdout); }\n")
    pytester.makepyfile(test_stdio=f'''
import ctypes
import onnxruntime as ort
from tinyort import feed, model

SAY = ctypes.CDLL({str(say)!r})


class Native:
    def __init__(self, inner):
        self.inner = inner

    def run(self, *a, **k):
        SAY.say(b"Operator=Attention SdpaKernel=MATH\\n")  # buffered by libc, not yet on fd 1
        return self.inner.run(*a, **k)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_buffered():
    s = ort.InferenceSession(model(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    s._sess = Native(s._sess)
    s.run(None, feed())
''')
    result = pytester.runpytest_subprocess(*PLUGIN)
    assert result.ret == 0, result.stdout.str()
    (test,) = json.loads(report.read_text())["tests"].values()
    assert test["sdpa"] == ["MATH"]


def test_forced_options_reach_the_cuda_ep_and_are_counted_per_test(suite, monkeypatch):
    pytester, report = suite
    monkeypatch.setenv("ORT_MATRIX_CUDA_OPTIONS", '{"sdpa_kernel": 16}')
    pytester.makepyfile(test_inject='''
from ort_matrix_probe import inject
from tinyort import session

def test_named():
    before = len(inject.INJECTIONS)
    session(providers=("CUDAExecutionProvider", "CPUExecutionProvider"))
    (entry,) = inject.INJECTIONS[before:]
    assert entry["passed"]["providers"][0] == ("CUDAExecutionProvider", {"sdpa_kernel": "16"})

def test_cpu_only_is_left_alone():
    before = len(inject.INJECTIONS)
    session(providers=("CPUExecutionProvider",))
    assert inject.INJECTIONS[before:] == []
''')
    result = pytester.runpytest_subprocess(*PLUGIN)
    assert result.ret == 0, result.stdout.str()
    tests = {k.split("::")[1]: v for k, v in json.loads(report.read_text())["tests"].items()}
    assert tests["test_named"]["injections"] == 1 and tests["test_cpu_only_is_left_alone"]["injections"] == 0


QUIET = '''
import os

import onnxruntime as ort
import pytest
from tinyort import model

IDENTITY_MODEL = model()
KEYS = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")
QUIET = os.environ.get("ORT_MATRIX_QUIET_THREADS") == "1"
MARK = "0 (ort-gpu-matrix quiet_threads)"


def entries(options, raw=False):
    """What a test sees of the two keys (None: never set), or (raw) what ORT holds, past the probe's answer."""
    read = getattr(type(options).get_session_config_entry, "__wrapped__", None) if raw else None
    read = read or type(options).get_session_config_entry
    got = []
    for key in KEYS:
        try:
            got.append(read(options, key))
        except RuntimeError:
            got.append(None)
    return got


def test_no_options_given():
    sess = ort.InferenceSession(IDENTITY_MODEL, providers=["CPUExecutionProvider"])
    assert entries(sess.get_session_options()) == [None, None]  # as without the harness
    assert entries(sess.get_session_options(), raw=True) == ([MARK, MARK] if QUIET else [None, None])


def test_own_options_kept():
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    sess = ort.InferenceSession(IDENTITY_MODEL, options, providers=["CPUExecutionProvider"])
    for seen in (options, sess.get_session_options()):
        assert entries(seen) == ["1", None]
        assert entries(seen, raw=True) == (["1", MARK] if QUIET else ["1", None])


def test_recreated_by_set_providers():
    sess = ort.InferenceSession(IDENTITY_MODEL, providers=["CPUExecutionProvider"])
    sess.set_providers(["CPUExecutionProvider"])
    assert entries(sess.get_session_options(), raw=True) == ([MARK, MARK] if QUIET else [None, None])


def test_options_reused_for_several_sessions_get_no_warning(capfd):
    options = ort.SessionOptions()
    for _ in range(3):
        sess = ort.InferenceSession(IDENTITY_MODEL, options, providers=["CPUExecutionProvider"])
    assert "already exists" not in capfd.readouterr().err
    assert entries(sess.get_session_options(), raw=True) == ([MARK, MARK] if QUIET else [None, None])


def build_like_code_that_forgot_to_turn_spinning_off():
    return ort.InferenceSession(IDENTITY_MODEL, ort.SessionOptions(), providers=["CPUExecutionProvider"])


def test_code_that_forgot_spinning_still_fails_its_check():
    options = build_like_code_that_forgot_to_turn_spinning_off().get_session_options()
    with pytest.raises(RuntimeError):  # never set by the code under test: the harness's MARK does not answer
        options.get_session_config_entry("session.intra_op.allow_spinning")
'''


@pytest.mark.parametrize("quiet", ["1", None], ids=["quiet", "as-is"])
def test_quiet_threads_turn_every_sessions_spinning_off_unless_the_test_set_it(suite, monkeypatch, quiet):
    """A suite's quiet_threads: each session, built from no options, its own, or again by set_providers, has
    ORT's spinning off, and a value the test set itself stands; without it, nothing is set. A test sees none of
    it: the options read as the test left them, so a check that its code turned spinning off is not passed for it."""
    pytester, report = suite
    if quiet:
        monkeypatch.setenv("ORT_MATRIX_QUIET_THREADS", quiet)
    else:
        monkeypatch.delenv("ORT_MATRIX_QUIET_THREADS", raising=False)
    pytester.makepyfile(test_quiet=QUIET)
    result = pytester.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=5)


def test_sessions_in_one_process_patch_afresh_and_leave_ort_as_it_was(pytester, monkeypatch):
    """Two inline pytest sessions: each patches ORT for itself, and ORT is unpatched after each."""
    monkeypatch.setenv("ORT_MATRIX_CUDA_OPTIONS", '{"sdpa_kernel": "16"}')
    monkeypatch.delenv("ORT_MATRIX_REPORT", raising=False)
    original_run = onnxruntime.InferenceSession.run
    pytester.makepyfile(test_patched='''
import onnxruntime

def test_run_is_wrapped_once():
    run = onnxruntime.InferenceSession.run
    assert getattr(run, "_ort_matrix_probe", False)
    assert not getattr(run.__wrapped__, "_ort_matrix_probe", False)
    assert getattr(onnxruntime.InferenceSession.__init__, "_ort_matrix_probe", False)
''')
    for _ in range(2):
        pytester.inline_run(*PLUGIN).assertoutcome(passed=1)
        assert onnxruntime.InferenceSession.run is original_run
        assert not getattr(onnxruntime.InferenceSession.__init__, "_ort_matrix_probe", False)


def test_the_probes_state_lives_in_config_stash(pytester, monkeypatch):
    monkeypatch.delenv("ORT_MATRIX_REPORT", raising=False)
    pytester.makepyfile(test_stash='''
from ort_matrix_probe.plugin import PROBE

def test_state(pytestconfig):
    probe = pytestconfig.stash[PROBE]
    assert probe.current.endswith("::test_state")
    assert pytestconfig.pluginmanager.get_plugin("ort_matrix_probe.session") is probe
''')
    pytester.inline_run(*PLUGIN).assertoutcome(passed=1)


def test_a_bad_isolation_mode_is_refused_before_ort_is_patched(pytester, monkeypatch):
    """ORT_MATRIX_ISOLATION=bogus is a usage error, found before the probe patches ORT or loads libraries: a
    refused session leaves ORT as it was (an in-process session after it is not disturbed)."""
    monkeypatch.setenv("ORT_MATRIX_ISOLATION", "bogus")
    monkeypatch.delenv("ORT_MATRIX_REPORT", raising=False)
    original_run, original_init = onnxruntime.InferenceSession.run, onnxruntime.InferenceSession.__init__
    pytester.makepyfile(test_never='def test_never():\n    pass\n')
    result = pytester.runpytest_inprocess(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ORT_MATRIX_ISOLATION='bogus': expected one of restore, report, off*"])
    assert onnxruntime.InferenceSession.run is original_run
    assert onnxruntime.InferenceSession.__init__ is original_init
