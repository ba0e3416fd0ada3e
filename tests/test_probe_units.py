"""The probe's fd tap and library audit in-process: the same code the test venvs run, called here
so mutmut's mutants of ort_matrix_probe/fdtap.py and audit.py meet a test without a subprocess; test_probe.py
and test_audit.py prove them in real test processes."""
from __future__ import annotations

import ctypes
import os

import pytest
from helpers import FAKE_CUDART, FAKE_CUDNN, build_so

from ort_matrix_probe import audit as au
from ort_matrix_probe.fdtap import FdTap, tiers_in


def test_tiers_in_finds_every_token_in_order_through_colour_codes():
    data = (b"\x1b[1;32mSdpaKernel=CUDNN_FLASH_ATTENTION\x1b[0m\nAttentionKernelOptions: use_math=1\n"
            b"xSdpaKernel=MATH SdpaKernel=\x1b[0mMATH\nSdpaKernel=lower SdpaKernel=\n")
    assert tiers_in(data) == ["CUDNN_FLASH_ATTENTION", "MATH", "MATH"]
    assert tiers_in(b"") == []


@pytest.mark.parametrize("buffer", ["memfd", "pipe"])
def test_the_tap_sees_what_native_code_writes_and_gives_every_byte_back(capfd, monkeypatch, buffer):
    if buffer == "pipe":  # a Python or OS without memfd_create: a pipe and a reader thread
        monkeypatch.delattr(os, "memfd_create")
    got = []
    tap = FdTap(lambda data, cuda: got.append((data, cuda)))
    tap.enter(False)
    os.write(1, b"SdpaKernel=MATH\n")
    tap.enter(True)  # an overlapping run: one window
    os.write(1, b"two\n")
    tap.exit()
    assert got == []
    libc = ctypes.CDLL(None)
    libc.printf(b"buffered in libc\n")  # left in libc's stdout buffer: flushed before fd 1 is restored
    tap.exit()
    assert got == [(b"SdpaKernel=MATH\ntwo\nbuffered in libc\n", True)]
    assert capfd.readouterr().out == "SdpaKernel=MATH\ntwo\nbuffered in libc\n"
    tap.enter(False)  # a new window forgets the last one's CUDA
    os.write(1, b"x" * 200000)  # more than a pipe holds: the reader drains while the run goes on
    tap.exit()
    assert got[1] == (b"x" * 200000, False)
    assert capfd.readouterr().out == "x" * 200000


def test_the_tap_of_fd_2_gives_stderr_back(capfd):
    got = []
    tap = FdTap(lambda data, cuda: got.append(data), fd=2)
    tap.enter(True)
    os.write(2, b"[E:onnxruntime:Default] Failed to load library\n")
    os.write(1, b"not tapped\n")
    tap.exit()
    assert got == [b"[E:onnxruntime:Default] Failed to load library\n"]
    out = capfd.readouterr()
    assert out.err == "[E:onnxruntime:Default] Failed to load library\n" and out.out == "not tapped\n"


def test_around_taps_each_call_and_asks_the_session_about_cuda(capfd):
    got = []
    tap = FdTap(lambda data, cuda: got.append((data, cuda)))

    def run(session, n, k=0):
        os.write(1, f"SdpaKernel=MATH {session} {n} {k}\n".encode())
        return n + k

    wrapped = tap.around(run, lambda s: s == "cuda")
    assert wrapped("cuda", 1, k=2) == 3 and wrapped("cpu", 5) == 5
    assert got == [(b"SdpaKernel=MATH cuda 1 2\n", True), (b"SdpaKernel=MATH cpu 5 0\n", False)]
    assert tap.around(lambda: 7, lambda s: True)() == 7 and got[2] == (b"", False)  # no session: no CUDA

    def boom(session):
        raise RuntimeError("x")

    try:
        tap.around(boom, lambda s: True)("s")
    except RuntimeError:
        pass
    assert got[3] == (b"", True)
    os.write(1, b"after\n")
    assert capfd.readouterr().out.endswith("after\n")  # fd 1 restored after an exception


def test_file_version_from_the_name_or_the_dist_that_owns_it(tmp_path):
    assert au.file_version("/x/libcudnn.so.9.14.0") == "9.14.0"
    assert au.file_version("/x/libcudart.so.13.0") == "13.0"
    assert au.file_version("/x/libcudnn.so.9") is None
    site = tmp_path / "site-packages"
    lib = site / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    info = site / "nvidia_cudnn_cu13-9.19.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: nvidia-cudnn-cu13\nVersion: 9.19.0\n")
    assert au.file_version(str(lib / "libcudnn.so.9")) == "9.19.0"
    assert au.file_version(str(lib / "libcudart.so.13")) is None  # a runtime looks for the runtime's dist
    rt = site / "nvidia_cuda_runtime_cu13-13.0.96.dist-info"
    rt.mkdir()
    (rt / "METADATA").write_text("Name: x\nVersion:  13.0.96 \n")
    assert au.file_version(str(lib / "libcudart.so.13")) == "13.0.96"
    deep = tmp_path / "a" / "b" / "c" / "d" / "e" / "f"
    deep.mkdir(parents=True)
    (tmp_path / "a" / "nvidia_cudnn_x.dist-info").mkdir()
    (tmp_path / "a" / "nvidia_cudnn_x.dist-info" / "METADATA").write_text("Version: 1\n")
    assert au.file_version(str(deep / "libcudnn.so.9")) is None  # five levels up, no further
    assert au.file_version(str(tmp_path / "a" / "b" / "c" / "d" / "e" / "libcudnn.so.9")) == "1"


def test_by_name_reported_version_mapped_files_and_audit(tmp_path, monkeypatch):
    cudnn = build_so(tmp_path / "libcudnn.so.9.14.0", "libcudnn.so.9", FAKE_CUDNN % 91400)
    cudart = build_so(tmp_path / "libcudart.so.13", "libcudart.so.13", FAKE_CUDART % 13020)
    other = build_so(tmp_path / "libother.so.1", "libother.so.1", "int f(void) { return 1; }\n")
    link = tmp_path / "libcudnn.so.9"
    link.symlink_to(cudnn.name)
    assert au.reported_version(str(link)) == 91400 and au.reported_version(str(cudart)) == 13020
    assert au.reported_version(str(tmp_path / "missing.so")) is None
    assert au.reported_version(str(other)) is None
    hit = au.by_name(["libnothing.so.1", str(link)], "cudnnGetVersion")
    assert hit == {"soname": str(link), "file": str(cudnn), "version": 91400}
    assert au.by_name([str(cudart)], "cudaRuntimeGetVersion") == {"soname": str(cudart), "file": str(cudart),
                                                                   "version": 13020}
    assert au.by_name(["libnothing.so.1"], "x") == {"soname": "libnothing.so.1", "file": None, "version": None,
                                                    "error": "not found"}
    assert au.by_name([], "x")["soname"] is None
    mapped = au.mapped_files()
    assert str(cudnn) in mapped and str(cudart) in mapped and mapped == sorted(set(mapped))
    monkeypatch.setenv("LD_PRELOAD", f"{cudart}::/nowhere/libcudart.so.13.0.1")
    monkeypatch.delitem(__import__("sys").modules, "onnxruntime", raising=False)
    a = au.audit()
    assert a["pid"] == os.getpid() and a["preload"] == [str(cudart), "/nowhere/libcudart.so.13.0.1"]
    assert str(cudnn) in a["mapped"] and str(cudart) in a["mapped"] and str(other) not in a["mapped"]
    assert {"file": str(cudnn), "file_version": "9.14.0", "reports": 91400} in a["cudnn_copies"]
    # by soname: the first libcudnn.so.9 this process loaded, which is this test's file unless an earlier run of
    # the same test in this process (mutmut runs the selection more than once) loaded its own copy first
    # the same process (conftest's fake libraries, other tests) may have loaded one of that soname before
    for lib, soname, symbol in (("cudnn", "libcudnn.so.9", "cudnnGetVersion"),
                                ("cudart", "libcudart.so.13", "cudaRuntimeGetVersion")):
        hit = a["by_name"][lib]
        assert hit == au.by_name([soname], symbol) and hit["soname"] == soname and "error" not in hit
        assert hit["file"] in a["mapped"] and isinstance(hit["version"], int)
    assert a["onnxruntime_file"] is None and a["onnxruntime_version"] is None
    import onnxruntime
    a = au.audit()
    assert a["onnxruntime_file"] == os.path.realpath(onnxruntime.__file__)
    assert a["onnxruntime_version"] == onnxruntime.__version__ == au.imported_version()


def test_a_window_leaves_no_file_descriptor_open(capfd):
    tap = FdTap(lambda data, cuda: None)
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        tap.enter(True)
        os.write(1, b"SdpaKernel=MATH\n")
        tap.exit()
    assert sorted(os.listdir("/proc/self/fd")) == before
    capfd.readouterr()


def test_the_probe_predicts_the_tests_sys_path_from_pytests_own_config(tmp_path):
    """What the libs set's loader is told sys.path will be: read from the early config as pytest will use it."""
    from pathlib import Path
    from types import SimpleNamespace as NS

    from ort_matrix_probe.plugin import _future_sys_path
    from ort_matrix_probe.syspath import Prediction
    sub = tmp_path / "tests" / "sub"
    sub.mkdir(parents=True)
    (tmp_path / "tests" / "conftest.py").write_text("")
    (tmp_path / "tests" / "pkg").mkdir()
    (tmp_path / "tests" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "tests" / "pkg" / "conftest.py").write_text("")
    (sub / "test_a.py").write_text("")
    target = f"{sub / 'test_a.py'}::test_x"

    def config(ns, ini=("/ini/a",), root=tmp_path):
        def getini(name):
            if name != "pythonpath":
                raise ValueError(name)
            return [Path(p) for p in ini]
        return NS(known_args_namespace=ns, getini=getini, rootpath=root)

    tests = str(tmp_path / "tests")
    ns = NS(file_or_dir=[target, str(tmp_path / "tests" / "pkg")], importmode="append", confcutdir=tests)
    assert _future_sys_path(config(ns)) == Prediction(("/ini/a",), (tests, str(sub)))
    ns = NS(file_or_dir=[target], importmode="prepend", confcutdir=None)  # no --confcutdir: pytest's rootdir
    assert _future_sys_path(config(ns, root=sub)) == Prediction((str(sub), "/ini/a"))
    assert _future_sys_path(config(ns, root=tmp_path)) == Prediction((tests, str(sub), "/ini/a"))
    assert _future_sys_path(config(NS(file_or_dir=[target]), ini=(), root=sub)) == Prediction((str(sub),))  # prepend
    assert _future_sys_path(config(NS(file_or_dir=None, importmode="importlib"), root=sub)) == Prediction(("/ini/a",))

    def no_ini(name):
        raise ValueError(name)
    assert _future_sys_path(NS(known_args_namespace=NS(file_or_dir=[target]), getini=no_ini, rootpath=sub)) == \
        Prediction((str(sub),))


def test_a_tee_tap_writes_through_at_once_and_never_twice(capfd):
    """The EP census taps fd 2 around a session's creation: what ORT logs there must reach the log even if the
    process dies before the window closes, so each chunk goes through as it comes."""
    import time

    got = []
    tap = FdTap(lambda data, cuda: got.append(data), fd=2, tee=True)
    tap.enter(True)
    os.write(2, b"Failed to load library libonnxruntime_providers_cuda.so\n")
    deadline = time.monotonic() + 60  # only a bound against a tap that never writes through: the loop ends on it
    seen = ""
    while "Failed" not in seen and time.monotonic() < deadline:  # through before the window closes
        seen += capfd.readouterr().err
        time.sleep(0.01)
    assert seen == "Failed to load library libonnxruntime_providers_cuda.so\n"
    tap.exit()
    assert got == [b"Failed to load library libonnxruntime_providers_cuda.so\n"]
    assert capfd.readouterr().err == ""  # not written back a second time


def test_set_providers_from_another_thread_during_a_run_is_no_run_time_fallback():
    """Session.run's fallback rebuilds the session inside its own run; a test that switches a session to the
    CPU from another thread while a run is in progress asked for what it got."""
    import threading

    from ort_matrix_probe.epcensus import CUDA_EP, EpCensus

    class Session:
        def get_providers(self):
            return self._providers

    def create(session, providers, *rest):
        session._providers = [p for p in providers] + (["CPUExecutionProvider"] if CUDA_EP in providers else [])

    inside, done = threading.Event(), threading.Event()

    def run(session):
        inside.set()
        assert done.wait(5)
        return 1

    census = EpCensus(lambda: "t::a")
    built, ran = census.wrap_create(create), census.wrap_run(run)
    s = Session()
    built(s, [CUDA_EP, "CPUExecutionProvider"])
    worker = threading.Thread(target=ran, args=(s,))
    worker.start()
    assert inside.wait(5)
    built(s, ["CPUExecutionProvider"])  # this thread, not the one in run()
    done.set()
    worker.join()
    (entry,) = census.take("t::a")
    assert "fallback" not in entry and entry["served"] == ["CPUExecutionProvider"]


def test_the_first_tap_of_a_process_opens_libc_and_flushes_what_it_buffered(capfd, monkeypatch):
    """_flush_native opens the C library once, on first use: a process whose first window holds a printf."""
    from ort_matrix_probe import fdtap
    monkeypatch.setattr(fdtap, "_LIBC", [])
    got = []
    tap = FdTap(lambda data, cuda: got.append(data))
    tap.enter(True)
    ctypes.CDLL(None).printf(b"first window\n")
    tap.exit()
    assert got == [b"first window\n"] and len(fdtap._LIBC) == 1
    assert capfd.readouterr().out == "first window\n"


def test_a_tee_tap_writes_each_byte_through_once_and_closes_its_pipe(capfd):
    """The EP census's tap of fd 2: bytes go through as they come (not again at the end), and the reader closes
    the pipe's read end when it has drained it, so a process that creates many sessions runs out of nothing."""
    got = []
    tap = FdTap(lambda data, cuda: got.append((data, cuda)), fd=2, tee=True)
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        tap.enter(True)
        os.write(2, b"y" * 100000)
        tap.exit()
    assert sorted(os.listdir("/proc/self/fd")) == before
    assert got == [(b"y" * 100000, True)] * 3
    assert capfd.readouterr().err == "y" * 300000


def test_a_window_of_more_than_a_read_gives_every_byte_back_in_order(capfdbinary):
    """The in-memory file is read back in 1 MiB blocks: 3 MiB and a bit come back whole and in order."""
    got = []
    tap = FdTap(lambda data, cuda: got.append(data))
    data = bytes(range(256)) * (3 * 4096 + 7)
    tap.enter(False)
    os.write(1, data)
    tap.exit()
    assert got == [data]
    assert capfdbinary.readouterr().out == data


def test_the_stack_names_each_cuda_library_with_its_major_version_and_file(tmp_path):
    cudnn12 = build_so(tmp_path / "a" / "libcudnn.so.9.10.2", "libcudnn.so.9",
                       FAKE_CUDNN % 91002 + "unsigned long cudnnGetCudartVersion(void) { return 12080; }\n")
    # a pip copy whose library says nothing of its CUDA: the -cuNN of the wheel that owns it
    wheel = tmp_path / "site" / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    build_so(wheel, "libcudnn.so.9", FAKE_CUDNN % 91900)
    (tmp_path / "site" / "nvidia_cudnn_cu13-9.19.0.56.dist-info").mkdir()
    (tmp_path / "site" / "nvidia_cudnn_cu13-9.19.0.56.dist-info" / "METADATA").write_text("Version: 9.19.0.56\n")
    cublas = build_so(tmp_path / "b" / "libcublasLt.so.12.8.4.1", "libcublasLt.so.12", "int x = 1;\n")
    cudart = build_so(tmp_path / "c" / "libcudart.so.13", "libcudart.so.13", FAKE_CUDART % 13000)
    nothing = build_so(tmp_path / "d" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % 90000)  # no major anywhere
    got = au.stack([str(cudnn12), str(wheel), str(cublas), str(cudart), str(nothing), "/x/libonnxruntime.so"])
    assert got == [
        {"library": "cudnn", "file": str(cudnn12), "cuda_major": 12, "version": "9.10.2"},
        {"library": "cudnn", "file": str(wheel), "cuda_major": 13, "version": "9.19.0.56"},
        {"library": "cublasLt", "file": str(cublas), "cuda_major": 12, "version": "12.8.4.1"},
        {"library": "cudart", "file": str(cudart), "cuda_major": 13, "version": None},
        {"library": "cudnn", "file": str(nothing), "cuda_major": None, "version": None},
    ]


def test_a_pip_cublas_is_versioned_by_its_wheel_and_a_cudnn_for_cuda_13_says_13(tmp_path):
    site = tmp_path / "site"
    cublas = build_so(site / "nvidia" / "cublas" / "lib" / "libcublas.so.12", "libcublas.so.12", "int x = 1;\n")
    (site / "nvidia_cublas_cu12-12.8.4.1.dist-info").mkdir()
    (site / "nvidia_cublas_cu12-12.8.4.1.dist-info" / "METADATA").write_text("Name: nvidia-cublas-cu12\nVersion: 12.8.4.1\n")
    cudnn13 = build_so(tmp_path / "n" / "libcudnn.so.9", "libcudnn.so.9",
                       FAKE_CUDNN % 91400 + "unsigned long cudnnGetCudartVersion(void) { return 13000; }\n")
    assert au.stack([str(cublas), str(cudnn13)]) == [
        {"library": "cublas", "file": str(cublas), "cuda_major": 12, "version": "12.8.4.1"},
        {"library": "cudnn", "file": str(cudnn13), "cuda_major": 13, "version": None}]


def test_a_runtime_that_reports_an_error_has_no_version(tmp_path):
    failing = build_so(tmp_path / "libcudart.so.12", "libcudart.so.12",
                       "int cudaRuntimeGetVersion(int *v) { *v = 99; return 35; }\n")
    assert au.reported_version(str(failing)) is None
    assert au.by_name([str(failing)], "cudaRuntimeGetVersion")["version"] is None


def test_a_mapped_file_whose_path_holds_spaces_is_listed_whole(tmp_path):
    lib = build_so(tmp_path / "a dir with  spaces" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % 91000)
    ctypes.CDLL(str(lib))
    assert str(lib) in au.mapped_files()


def test_the_audit_reads_the_preload_for_the_runtime_it_asks_for_by_name(monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/nowhere/libcudart.so.12.8.90::/nowhere/libcudnn.so.9")
    a = au.audit()
    assert a["preload"] == ["/nowhere/libcudart.so.12.8.90", "/nowhere/libcudnn.so.9"]
    assert a["by_name"]["cudart"]["soname"] == "libcudart.so.12"  # the preloaded runtime's soname, asked first
    monkeypatch.delenv("LD_PRELOAD")
    a = au.audit()
    assert a["preload"] == [] and a["by_name"]["cudart"]["soname"] in ("libcudart.so.13", "libcudart.so.12",
                                                                      "libcudart.so.11")


def test_two_cuda_majors_in_one_site_packages_are_told_apart_by_each_dists_record(tmp_path):
    site = tmp_path / "site"
    lib12 = build_so(site / "nvidia" / "cublas" / "lib" / "libcublas.so.12", "libcublas.so.12", "int x = 1;\n")
    lib13 = build_so(site / "nvidia" / "cu13" / "lib" / "libcublas.so.13", "libcublas.so.13", "int x = 1;\n")
    for dist, version, rel in (("nvidia_cublas-13.1.0.3", "13.1.0.3", "nvidia/cu13/lib/libcublas.so.13"),
                               ("nvidia_cublas_cu12-12.8.4.1", "12.8.4.1", "nvidia/cublas/lib/libcublas.so.12")):
        info = site / f"{dist}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Name: x\nVersion: {version}\n")
        (info / "RECORD").write_text(f"{rel},sha256=x,1\n{dist}.dist-info/METADATA,,\n")
    assert (au.file_version(str(lib12)), au.file_version(str(lib13))) == ("12.8.4.1", "13.1.0.3")


def test_a_cudnns_major_comes_from_its_wheel_then_its_own_graph_library_then_itself(tmp_path):
    both = FAKE_CUDNN % 91000 + "unsigned long cudnnGetCudartVersion(void) { return %d; }\n"
    # a shim that would answer 12 (another copy's sub-libraries loaded first), beside its own graph library's 13
    shim = build_so(tmp_path / "sys" / "libcudnn.so.9", "libcudnn.so.9", both % 12080)
    build_so(tmp_path / "sys" / "libcudnn_graph.so.9", "libcudnn_graph.so.9", both % 13000)
    assert au.cudnn_cuda_major(str(shim)) == 13
    # a wheel's -cuNN wins over what the library says
    site = tmp_path / "site"
    wheel = build_so(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", "libcudnn.so.9", both % 13000)
    (site / "nvidia_cudnn_cu12-9.10.2.21.dist-info").mkdir()
    assert au.cudnn_cuda_major(str(wheel)) == 12
