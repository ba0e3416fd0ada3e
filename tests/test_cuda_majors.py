"""Each test process's CUDA stack against the CUDA major of the cell's ORT build, with real .so files.

The ORT wheel is the CPU wheel re-versioned +cu13, whose build info says CUDA 13.0 (test_preload_dlls). The
suite maps stand-ins of a CUDA runtime, cuBLAS and cuDNN of either major, built with cc: the audit must name
each with its major and file, and a library of the other major is a warning, or a failure where the cell pins.
"""
import os

import pytest
from helpers import CELL, FAKE_CUDART, SUITES, build_so, once_per_run
from test_preload_dlls import CUDA_ORT, house  # noqa: F401 - the offline wheels with the +cu13 ORT

FAKE_CUBLAS = "int cublasGetProperty(int type, int *value) { *value = %d; return 0; }\n"
FAKE_CUDNN_FOR = ("unsigned long cudnnGetVersion(void) { return %d; }\n"
                  "unsigned long cudnnGetCudartVersion(void) { return %d; }\n")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> dict[str, str]:
    """cuBLAS 12 and 13, a CUDA 13 runtime, and two cuDNN 9 copies built for CUDA 13 and CUDA 12."""
    files = {
        "cublas12": ("cu12/libcublas.so.12.8.4.1", "libcublas.so.12", FAKE_CUBLAS % 12),
        "cublas13": ("cu13/libcublas.so.13.0.2.14", "libcublas.so.13", FAKE_CUBLAS % 13),
        "cudart13": ("cu13/libcudart.so.13.0.96", "libcudart.so.13", FAKE_CUDART % 13000),
        "cudnn13": ("cu13/libcudnn.so.9.14.0", "libcudnn.so.9", FAKE_CUDNN_FOR % (91400, 13000)),
        "cudnn12": ("cu12/libcudnn.so.9.10.2", "libcudnn.so.9", FAKE_CUDNN_FOR % (91002, 12080)),
    }
    d = once_per_run(tmp_path_factory, "cuda-majors", lambda d: [build_so(d / f, so, src) for f, so, src in files.values()])
    return {k: str(d / f) for k, (f, _, _) in files.items()}


def _run(harness, house, libs: str, load: list[str]) -> dict:  # noqa: F811 - the fixture's value
    harness.venvs = harness.tmp / "own-venvs"
    harness.write(["test_stack.py"], root=SUITES / "guards", libs=libs, ort=CUDA_ORT,
                  suite_extra=f'env = {{ FAKE_LOAD = "{os.pathsep.join(load)}" }}',
                  matrix_extra=f'offline = true\nwheelhouse = ["{house}"]')
    return harness.nox("-s", CELL).result("normal")


def test_the_audit_names_each_cuda_library_with_its_major_and_another_major_unpinned_is_a_warning(
        harness, house, stand_ins):  # noqa: F811
    s = stand_ins
    r = _run(harness, house, "none = true", [s["cudart13"], s["cublas13"], s["cublas12"]])
    assert r["verdict"] == "pass", r["reasons"]
    assert r["provenance"]["ort"]["cuda_version"] == "13.0"
    (audit,) = r["libraries"]["audits"]
    stack = {(x["library"], x["cuda_major"], x["version"], x["file"]) for x in audit["stack"]}
    assert {("cudart", 13, "13.0.96", s["cudart13"]), ("cublas", 13, "13.0.2.14", s["cublas13"]),
            ("cublas", 12, "12.8.4.1", s["cublas12"])} <= stack, audit["stack"]
    assert (f"a CUDA 12 cublas served the CUDA 13 cell's test process (pid {audit['pid']}): {s['cublas12']} "
            f"(12.8.4.1), beside its CUDA 13 {s['cublas13']}") in r["warnings"], r["warnings"]


def test_a_cudnn_built_for_another_cuda_major_fails_a_cell_that_pins_its_set(harness, house, stand_ins):  # noqa: F811
    s = stand_ins
    r = _run(harness, house, f'cudart = "{s["cudart13"]}"\ncudnn = "{s["cudnn13"]}"', [s["cudnn12"]])
    assert r["verdict"] == "fail"
    (audit,) = r["libraries"]["audits"]
    majors = {x["file"]: x["cuda_major"] for x in audit["stack"] if x["library"] == "cudnn"}
    assert majors == {s["cudnn13"]: 13, s["cudnn12"]: 12}
    assert (f"a CUDA 12 cudnn served the CUDA 13 cell's test process (pid {audit['pid']}): {s['cudnn12']} "
            f"(9.10.2), beside its CUDA 13 {s['cudnn13']}") in r["reasons"], r["reasons"]


def test_one_cuda_major_throughout_is_neither_a_warning_nor_a_reason(harness, house, stand_ins):  # noqa: F811
    s = stand_ins
    r = _run(harness, house, f'cudart = "{s["cudart13"]}"\ncudnn = "{s["cudnn13"]}"', [s["cublas13"]])
    assert r["verdict"] == "pass", r["reasons"]
    assert not [w for w in r["warnings"] if "served the CUDA 13 cell" in w], r["warnings"]


def test_each_test_is_served_by_the_stack_its_own_worker_mapped(harness, house, stand_ins):  # noqa: F811
    """Two xdist workers, one file each: the second maps a CUDA 12 cuBLAS too. The baseline record keeps both
    stacks and which one served each test, so a libs comparison can name the stack per test."""
    from ort_gpu_matrix.store.baseline import ModeRecord
    from ort_gpu_matrix.store.results import Result
    s = stand_ins
    harness.venvs = harness.tmp / "own-venvs"
    harness.write(["test_stack.py", "test_stack_more.py"], root=SUITES / "guards", ort=CUDA_ORT,
                  suite_extra=(f'env = {{ FAKE_LOAD = "{s["cudart13"]}", FAKE_LOAD_MORE = "{s["cublas12"]}" }}\n'
                               'pytest_args = ["-n", "2", "--dist", "loadfile"]'),
                  matrix_extra=f'offline = true\nwheelhouse = ["{house}"]')
    r = harness.nox("-s", CELL).result("normal")
    procs = r["libraries"]["processes"]
    one, more = "test_stack.py::test_load_the_named_cuda_libraries", "test_stack_more.py::test_load_more_cuda_libraries"
    assert set(procs) == {one, more} and procs[one] != procs[more] and procs[one].startswith("gw"), procs
    lib = ModeRecord.of(Result.from_dict(r)).library
    stacks, of = lib["cuda_stacks"], lib["stack_of"]
    assert len(stacks) == 2 and of[one] != of[more], lib
    assert any(s["cublas12"] in line for line in stacks[of[more]]) and not any(s["cublas12"] in line for line in stacks[of[one]])
    assert any(s["cudart13"] in line for line in stacks[of[one]])
