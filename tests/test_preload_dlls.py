"""loader = "ort_preload_dlls" on a real tree: preload_dlls before any conftest, test module or torch.

The suite (fixtures/suites/loader_torch) imports a stand-in torch before onnxruntime, as ORT's
tensorscatter tests do; the stand-in loads its own cuDNN copy (9.19, built with cc) by full path.
The pip set is a cuDNN 9.12 wheel the tests build. Two ORT wheels:
- the CPU wheel onnxruntime==1.32.0, whose preload_dlls returns at once (it has no CUDA build
  info), so only the order can be seen: the loader's record and the stand-in torch's own note;
- the same wheel, re-versioned 1.32.0+cu13 with `cuda_version = '13.0'` added to its
  build_and_package_info.py, so ORT's own preload_dlls runs its Linux path and maps the set's
  libcudnn.so.9: there the by-name cuDNN must be the pinned 9.12, torch's copy mapped after it.
"""
import os
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from helpers import CELL, CHECKOUT_ROOT, FAKE_CUDNN, SUITES, build_so, once_per_run
from test_index import INDEX_VERSION, _write_wheel, reversioned
from test_libsets import cudnn_wheel

CUDA_ORT = "onnxruntime==1.32.0+cu13"
LIBS = 'pip = ["nvidia-cudnn-cu13==9.12.0.46"]\nloader = "ort_preload_dlls"'


def cuda_claiming(wheel: Path, where: Path) -> Path:
    """The CPU wheel, re-versioned +cu13, whose build info says it was built with CUDA 13.0."""
    tagged = reversioned(wheel, where)  # 1.32.0+idx
    name, version, rest = tagged.name.split("-", 2)
    new_version = version.replace(INDEX_VERSION, "+cu13")
    old_info, new_info = f"{name}-{version}.dist-info", f"{name}-{new_version}.dist-info"
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(tagged) as z:
        for item in z.namelist():
            if item == f"{old_info}/RECORD":
                continue
            data = z.read(item)
            if item == f"{old_info}/METADATA":
                data = re.sub(rb"^Version: .*$", f"Version: {new_version}".encode(), data, count=1, flags=re.M)
            if item == "onnxruntime/capi/build_and_package_info.py":
                data += b"cuda_version = '13.0'\n"
            files[item.replace(old_info, new_info, 1) if item.startswith(old_info) else item] = data
    tagged.unlink()
    out = where / f"{name}-{new_version}-{rest}"
    _write_wheel(out, files, new_info)
    return out


def _house(tmp_path_factory, wheelhouse, cuda: bool) -> Path:
    """Offline wheels: the test venv's, the cuDNN 9.12 wheel, and the +cu13 ORT when `cuda` (apart:
    onnxruntime==1.32.0 would pick 1.32.0+cu13 too, as PEP 440 lets == match any local version). Once per run."""
    def build(top: Path) -> None:
        d = top / "house"
        d.mkdir()
        for w in wheelhouse.glob("*.whl"):
            shutil.copy(w, d)
        if cuda:
            (ort,) = d.glob("onnxruntime-1.32.0-*.whl")
            cuda_claiming(ort, d)
        cudnn_wheel(d, "9.12.0.46", 91200, top / "built")

    return once_per_run(tmp_path_factory, f"preload-house-{'cuda' if cuda else 'cpu'}", build) / "house"


@pytest.fixture(scope="module")
def cpu_house(tmp_path_factory, wheelhouse):
    return _house(tmp_path_factory, wheelhouse, cuda=False)


@pytest.fixture(scope="module")
def house(tmp_path_factory, wheelhouse):
    return _house(tmp_path_factory, wheelhouse, cuda=True)


@pytest.fixture(scope="module")
def torch_cudnn(tmp_path_factory):
    """The stand-in torch's bundled cuDNN: another file with the same soname, reporting 9.19."""
    lib = Path("nvidia") / "cudnn" / "lib" / "libcudnn.so.9"
    return once_per_run(tmp_path_factory, "preload-torchlib",
                        lambda d: build_so(d / lib, "libcudnn.so.9", FAKE_CUDNN % 91900)) / lib


def _run(harness, house, torch_cudnn, ort=CUDA_ORT, pytest_args=(), root=SUITES / "loader_torch",
         files=("test_torch_first.py",), pythonpath=(".", ".."), plugins=()):
    harness.venvs = harness.tmp / "own-venvs"
    extra = (f'env = {{ FAKE_TORCH_CUDNN = "{torch_cudnn}" }}\npytest_args = {list(pytest_args)!r}\n'
             f'plugins = {list(plugins)!r}').replace("'", '"')
    harness.write(list(files), root=root, libs=LIBS, ort=ort, pythonpath=pythonpath, suite_extra=extra,
                  matrix_extra=f'offline = true\nwheelhouse = ["{house}"]')
    run = harness.nox("-s", CELL)
    return run, run.result("normal")


def _pinned(harness) -> str:
    (libset,) = [p for p in (harness.venvs / ".libs").glob("x-*") if p.is_dir()]
    return os.path.realpath(libset / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9")


def test_preload_dlls_runs_before_a_test_module_that_imports_torch_first(harness, cpu_house, torch_cudnn):
    """The CPU wheel: preload_dlls is called before torch, and maps nothing (an honest FAIL)."""
    run, r = _run(harness, cpu_house, torch_cudnn, ort="onnxruntime==1.32.0")
    (audit,) = r["libraries"]["audits"]
    loader = audit["loader"]
    assert loader["called"] is True and loader["torch_already_imported"] is False, loader
    assert loader["onnxruntime_already_imported"] is False and loader["mapped"] == []
    assert loader["resolved"] == audit["onnxruntime_file"] and audit["onnxruntime_file"].startswith(r["venv"]["path"])
    assert r["outcomes"] == {"test_torch_first.py::test_a_cpu_session_runs": "passed",
                             "test_torch_first.py::test_the_loader_came_before_torch": "passed"}, run.output[-3000:]
    assert r["verdict"] == "fail"  # the CPU build's preload_dlls loads no cuDNN
    assert f"the pinned {_pinned(harness)} was never mapped in the test process (pid {audit['pid']}): the libs " \
           "set's loader (ort_preload_dlls) did not load it, so nothing was pinned" in r["reasons"]


def test_with_a_cuda_build_the_pinned_cudnn_wins_over_torchs(harness, house, torch_cudnn):
    """ORT's own preload_dlls maps the set's libcudnn.so.9 before the stand-in torch maps its copy."""
    run, r = _run(harness, house, torch_cudnn)
    assert r["verdict"] == "pass", (r["reasons"], run.output[-3000:])
    (audit,) = r["libraries"]["audits"]
    pinned = _pinned(harness)
    assert audit["loader"]["mapped"] == [pinned]
    assert audit["by_name"]["cudnn"] == {"soname": "libcudnn.so.9", "file": pinned, "version": 91200}
    assert {c["file"] for c in audit["cudnn_copies"]} == {pinned, str(torch_cudnn)}  # torch's mapped too, after
    assert r["provenance"]["ort"]["version"] == "1.32.0+cu13"


def test_every_xdist_worker_preloads_before_torch(harness, house, torch_cudnn):
    run, r = _run(harness, house, torch_cudnn, pytest_args=("-n", "2"))
    assert r["verdict"] == "pass", (r["reasons"], run.output[-3000:])
    audits = r["libraries"]["audits"]
    assert sorted(a["process"] for a in audits) == ["gw0", "gw1"]
    for a in audits:
        assert a["loader"]["called"] is True and a["loader"]["torch_already_imported"] is False
        assert a["by_name"]["cudnn"]["version"] == 91200


def test_a_source_dir_pytest_would_put_first_is_not_imported_early(harness, house, torch_cudnn):
    """test_at_root.py sits at a checkout root: pytest will insert that root, so its onnxruntime/ wins."""
    run, r = _run(harness, house, torch_cudnn, root=CHECKOUT_ROOT, files=("test_at_root.py",),
                  pythonpath=("onnxruntime/test",))
    source = f"{CHECKOUT_ROOT}/onnxruntime/__init__.py"
    (audit,) = r["libraries"]["audits"]
    assert audit["loader"]["called"] is False and audit["loader"]["resolved"] == source
    assert r["verdict"] == "fail"
    venv = os.path.realpath(r["venv"]["path"])
    assert (f"loader ort_preload_dlls failed in the test process: the tests would import onnxruntime from {source}, "
            f"not from the pairing's venv {venv} (a source dir shadows the wheel): preload_dlls was not called"
            in r["reasons"]), r["reasons"]
    assert any(x.startswith(f"onnxruntime was imported from {source}, not from the pairing's venv")
               for x in r["reasons"]), r["reasons"]


def test_a_shadow_a_conftest_adds_later_is_caught_at_the_end(harness, house, torch_cudnn):
    """The early import gave the tests the wheel; their own sys.path would have given the source dir."""
    run, r = _run(harness, house, torch_cudnn, root=CHECKOUT_ROOT / "sneaky", files=("test_sneaky.py",),
                  pythonpath=(".",))
    source = f"{CHECKOUT_ROOT}/onnxruntime/__init__.py"
    assert r["verdict"] == "fail"
    assert (f"loader ort_preload_dlls: at the session's end the tests' sys.path resolves onnxruntime to {source}, "
            "not to the pairing's venv (a source dir shadows the wheel; the loader's early import hid it)"
            in r["reasons"]), (r["reasons"], run.output[-3000:])


def test_a_plugin_that_imports_torch_first_is_named(harness, house, torch_cudnn):
    """-p plugins are imported before any hook runs: one that imports torch beats the loader, and it says so."""
    run, r = _run(harness, house, torch_cudnn, plugins=("torch",), pytest_args=("-k", "cpu_session"))
    assert r["verdict"] == "fail"
    (audit,) = r["libraries"]["audits"]
    assert audit["loader"]["called"] is True and audit["loader"]["torch_already_imported"] is True
    assert ("loader ort_preload_dlls: torch was imported before preload_dlls ran (by a -p plugin), so torch's "
            "cuDNN may win a by-name load" in r["reasons"]), r["reasons"]
    assert audit["by_name"]["cudnn"]["file"] == str(torch_cudnn)
