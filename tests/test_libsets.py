"""pip libs sets and loaders, with real wheels the tests build around real .so files (cc), installed offline."""
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import CELL, FAKE_CUDNN, PY, SUITES, build_so, once_per_run
from test_index import _write_wheel, tiny_torch


def cudnn_wheel(where: Path, version: str, reports: int, tmp: Path) -> Path:
    """nvidia-cudnn-cu13 <version>: nvidia/cudnn/lib/libcudnn.so.9 (built by cc), as NVIDIA lays the wheel out."""
    lib = build_so(tmp / f"cudnn-{version}" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % reports)
    info = f"nvidia_cudnn_cu13-{version}.dist-info"
    files = {
        "nvidia/cudnn/lib/libcudnn.so.9": lib.read_bytes(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: nvidia-cudnn-cu13\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    wheel = where / f"nvidia_cudnn_cu13-{version}-py3-none-any.whl"
    _write_wheel(wheel, files, info)
    return wheel


@pytest.fixture(scope="module")
def house(tmp_path_factory, wheelhouse):
    """The test venv's wheels, two cuDNN wheels and a tiny torch: everything an offline run needs."""
    def build(top: Path) -> None:
        d = top / "house"
        d.mkdir()
        for w in wheelhouse.glob("*.whl"):
            shutil.copy(w, d)
        cudnn_wheel(d, "9.12.0.46", 91200, top / "built")
        cudnn_wheel(d, "9.28.1.4", 92801, top / "built")
        tiny_torch(d)

    return once_per_run(tmp_path_factory, "libsets-house", build) / "house"


def _write(harness, house, libs: str, files=("test_allpass.py",), root=SUITES / "verdicts", torch=None):
    harness.venvs = harness.tmp / "own-venvs"
    harness.write(list(files), root=root, libs=libs, matrix_extra=f'offline = true\nwheelhouse = ["{house}"]')
    if torch:
        harness.matrix.write_text(harness.matrix.read_text().replace("[torch.none]\nskip = true",
                                                                     f'[torch.none]\nrequirement = "{torch}"'))


def _cudnn_by_name(result):
    (audit,) = result["libraries"]["audits"]
    return audit["by_name"]["cudnn"]


def test_a_pip_set_is_installed_once_outside_the_venv_and_pinned(harness, house):
    _write(harness, house, 'pip = ["nvidia-cudnn-cu13==9.12.0.46"]')
    first = harness.nox("-s", CELL)
    r = first.result("normal")
    assert r["verdict"] == "pass", (r["reasons"], first.output[-3000:])
    assert "installing libs set x (1 wheels)…" in first.output and "--no-index" in first.output
    (libset,) = [p for p in (harness.venvs / ".libs").glob("x-*") if p.is_dir()]
    pinned = str(libset / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9")
    assert r["env"]["LD_PRELOAD"] == pinned and r["env"]["LD_LIBRARY_PATH"] == str(Path(pinned).parent)
    assert _cudnn_by_name(r)["file"] == pinned and _cudnn_by_name(r)["version"] == 91200
    assert not list((harness.venvs).glob(f"{'t'}-*/lib/python{PY}/site-packages/nvidia"))  # not in the test venv
    second = harness.nox("-s", CELL)
    assert f"reusing libs set x ({libset})" in second.output and "installing libs set" not in second.output
    assert second.result("normal")["verdict"] == "pass"


def test_another_version_is_another_set(harness, house):
    _write(harness, house, 'pip = ["nvidia-cudnn-cu13==9.12.0.46"]')
    harness.nox("-s", CELL)
    _write(harness, house, 'pip = ["nvidia-cudnn-cu13==9.28.1.4"]')
    r = harness.nox("-s", CELL).result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    assert len(list((harness.venvs / ".libs").glob("x-*.lock"))) == 2  # two fingerprints, two dirs
    assert _cudnn_by_name(r)["version"] == 92801
    assert "9.28.1.4" in json.dumps(r["libraries"])  # the shipped version, from the dist-info beside the file


def test_offline_without_the_wheel_is_refused_before_anything_is_installed(harness, house):
    _write(harness, house, 'pip = ["nvidia-cudnn-cu13==9.99.0"]')
    run = harness.nox("-s", CELL)
    assert run.proc.returncode != 0
    assert f"libs.x.pip[0]: offline, and no wheel for nvidia-cudnn-cu13==9.99.0 in {house}" in run.output
    assert not (harness.venvs / ".libs").exists()


def test_ort_preload_dlls_is_called_before_the_tests_and_its_libraries_are_required(harness, house):
    """The CPU wheel's preload_dlls loads nothing (no CUDA build), so the set is never mapped: an honest FAIL.
    (The order against torch: tests/test_preload_dlls.py.)"""
    _write(harness, house, 'pip = ["nvidia-cudnn-cu13==9.12.0.46"]\nloader = "ort_preload_dlls"',
           files=("test_imports_ort.py",), root=SUITES / "libsets")
    r = harness.nox("-s", CELL).result("normal")
    (audit,) = r["libraries"]["audits"]
    (libset,) = [p for p in (harness.venvs / ".libs").glob("x-*") if p.is_dir()]
    directory = os.path.realpath(libset / "nvidia" / "cudnn" / "lib")  # preload_dlls looks in one flat dir
    ort = audit["onnxruntime_file"]
    assert ort.startswith(r["venv"]["path"])
    assert audit["loader"] == {"loader": "ort_preload_dlls", "directory": directory, "called": True,
                               "onnxruntime_already_imported": False, "torch_already_imported": False,
                               "resolved": ort, "resolved_at_end": ort, "mapped": []}
    assert not r["env"].get("LD_PRELOAD")  # ORT's own mechanism, not ld.so's
    assert r["verdict"] == "fail"
    assert any("libcudnn.so.9 was never mapped in the test process" in x for x in r["reasons"]), r["reasons"]


def test_torch_first_imports_torch_before_onnxruntime(harness, house):
    _write(harness, house, 'none = true\nloader = "torch_first"', files=("test_imports_ort.py",),
           root=SUITES / "libsets", torch="torch==2.99.0")
    r = harness.nox("-s", CELL).result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    (audit,) = r["libraries"]["audits"]
    assert audit["loader"] == {"loader": "torch_first", "onnxruntime_already_imported": False, "torch_imported": True}


def test_torch_first_without_torch_fails(harness, house):
    _write(harness, house, 'none = true\nloader = "torch_first"', files=("test_imports_ort.py",), root=SUITES / "libsets")
    r = harness.nox("-s", CELL).result("normal")
    assert r["verdict"] == "fail"
    assert any("loader torch_first failed in the test process: ModuleNotFoundError" in x for x in r["reasons"]), r["reasons"]




def test_a_loader_acts_before_a_conftest_that_imports_onnxruntime(harness, house):
    _write(harness, house, 'none = true\nloader = "torch_first"', files=("test_after_conftest.py",),
           root=SUITES / "libsets_conftest", torch="torch==2.99.0")
    r = harness.nox("-s", CELL).result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    (audit,) = r["libraries"]["audits"]
    assert audit["loader"]["onnxruntime_already_imported"] is False and audit["loader"]["torch_imported"] is True


def test_a_libs_set_whose_files_are_gone_is_reinstalled_not_trusted(harness, house):
    _write(harness, house, 'pip = ["nvidia-cudnn-cu13==9.12.0.46"]')
    harness.nox("-s", CELL)
    (libset,) = [p for p in (harness.venvs / ".libs").glob("x-*") if p.is_dir()]
    (libset / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9").unlink()
    run = harness.nox("-s", CELL)
    assert "reinstalling libs set x: its files are not the ones it was installed with" in run.output, run.output[-2000:]
    r = run.result("normal")
    assert r["verdict"] == "pass" and _cudnn_by_name(r)["version"] == 91200, r["reasons"]


def test_a_run_whose_test_process_sent_no_audit_fails(harness):
    """An xdist worker that ends before pytest's session end sends no audit: nothing about the libraries is known."""
    harness.write(["test_vanish_at_teardown.py"], root=SUITES / "vanish", suite_extra='pytest_args = ["-n", "1"]')
    r = harness.nox("-s", CELL).result("normal")
    assert r["verdict"] == "fail"
    assert "no library audit came back from test process(es) gw0: what served their tests is unknown" in r["reasons"]
