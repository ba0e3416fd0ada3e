"""`init`'s starter matrix: what it finds on a host (real .so files built by cc), and that every variant loads."""
import dataclasses

import pytest
from helpers import FAKE_CUDART, FAKE_CUDNN, PY, REPO, build_so

from ort_gpu_matrix.app.starter import InitError, Survey, render, system_sets, write
from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.host.driver import Driver
from ort_gpu_matrix.plan.cells import cells_of
from ort_gpu_matrix.util.packaged import suites_dir


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """Two toolkits (CUDA 12.9 without a cuDNN beside it, CUDA 13.0), a distro dir with cuDNN 9, an empty dir."""
    d = tmp_path_factory.mktemp("host")
    build_so(d / "cuda-12.9" / "lib64" / "libcudart.so.12.9.79", "libcudart.so.12", FAKE_CUDART % 12090)
    (d / "cuda-12.9" / "lib64" / "libcudart.so.12").symlink_to("libcudart.so.12.9.79")
    build_so(d / "cuda-13.0" / "lib64" / "libcudart.so.13", "libcudart.so.13", FAKE_CUDART % 13000)
    build_so(d / "cuda-13.0" / "lib64" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % 91400)
    build_so(d / "distro" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % 91900)
    (d / "empty").mkdir()
    return d


def patterns(host):
    return (f"{host}/cuda-*/lib64", f"{host}/distro", f"{host}/empty", f"{host}/missing")


def test_each_cuda_runtime_major_is_found_with_the_nearest_cudnn(host):
    found = system_sets(patterns(host))
    assert [(s.major, s.cudart, s.cudnn) for s in found] == [
        (12, f"{host}/cuda-12.9/lib64/libcudart.so.12", f"{host}/distro/libcudnn.so.9"),  # not CUDA 13's cuDNN
        (13, f"{host}/cuda-13.0/lib64/libcudart.so.13", f"{host}/cuda-13.0/lib64/libcudnn.so.9"),  # its own dir first
    ]
    assert system_sets((f"{host}/empty",)) == []


def survey(host, version=None, why=None, system=True, ort_source=None):
    return Survey(running=PY, pythons={PY: "/usr/bin/python" + PY, "3.99": None}, driver=Driver(version, why),
                  system=system_sets(patterns(host)) if system else [], ort_source=ort_source)


def _load(tmp_path, text):
    path = tmp_path / "matrix.toml"
    write(path, text)  # write() itself refuses a matrix that does not load
    return {c.name: c for c in cells_of(load_matrix(path))}


@pytest.mark.parametrize("version, pip", [(None, set()), ("535.104.05", {"pip12"}), ("580.65.06", {"pip12", "pip13"})])
def test_every_starter_loads_and_holds_what_the_host_has(host, tmp_path, version, pip):
    s = survey(host, version, None if version else "nvidia-smi is not on PATH")
    cells = _load(tmp_path, render(s))
    libs = {c.libs.id for c in cells.values()}
    assert libs == {"sys12", "sys13", "cpu"} | pip
    assert cells[f"gpu-{PY}-sys13"].libs.cudart == f"{host}/cuda-13.0/lib64/libcudart.so.13"
    assert cells[f"gpu-{PY}-sys13"].ort.requirement == "onnxruntime-gpu==1.31.1" and not cells[f"gpu-{PY}-sys13"].ort.index_url
    assert cells[f"gpu-{PY}-sys12"].torch.index_url == "https://download.pytorch.org/whl/cu129"
    cpu = cells[f"gpu-{PY}-cpu"]
    assert (cpu.python, cpu.ort.requirement, cpu.suite.id, cpu.modes) == (PY, "onnxruntime==1.32.0", "dispatch_cpu", ("normal",))
    text = render(s)
    assert f"#   python {PY}: /usr/bin/python{PY} (runs ort-gpu-matrix)\n#   python 3.99: not found\n" in text
    if version is None:
        assert "#   NVIDIA driver: none (nvidia-smi is not on PATH): no GPU cell can run here" in text


def test_without_system_libraries_or_driver_only_the_cpu_cell_is_written(host, tmp_path):
    s = survey(host, None, "nvidia-smi is not on PATH", system=False)
    assert list(_load(tmp_path, render(s))) == [f"gpu-{PY}-cpu"]
    assert "#   system CUDA runtime: none in " in render(s)


def test_a_runtime_without_cudnn_is_named_and_gets_no_cell(host, tmp_path):
    s = survey(host, "580.65.06")
    s = dataclasses.replace(s, system=[dataclasses.replace(s.system[0], cudnn=None)])
    text = render(s)
    assert f"#   CUDA 12 runtime {host}/cuda-12.9/lib64/libcudart.so.12, but no libcudnn.so.9 beside it" in text
    assert "sys12" not in {c.libs.id for c in _load(tmp_path, text).values()}


def test_the_built_in_suites_are_the_shipped_matrix_s_read_from_the_package(host, tmp_path):
    """The starter's suites must say what the shipped matrix says of the same tests, wherever the package is."""
    write(tmp_path / "m.toml", render(survey(host)))
    starter = load_matrix(tmp_path / "m.toml")
    shipped = load_matrix(REPO / "matrix.toml")
    for suite_id in ("dispatch", "dispatch_cpu"):
        assert starter.suites[suite_id].root == "${ORT_GPU_MATRIX_SUITES}/dispatch"
        assert dataclasses.replace(starter.suites[suite_id], root="") == dataclasses.replace(shipped.suites[suite_id], root="")
    assert (suites_dir() / "dispatch" / "test_dispatch.py").is_file()


def test_write_refuses_an_existing_file_and_a_missing_dir_and_leaves_nothing(host, tmp_path):
    good = render(survey(host))
    (tmp_path / "matrix.toml").write_text("mine\n")
    (tmp_path / "link.toml").symlink_to(tmp_path / "nowhere")  # a dangling link is taken too
    for taken in ("matrix.toml", "link.toml"):
        with pytest.raises(InitError, match="already exists; init never overwrites a file"):
            write(tmp_path / taken, good)
    assert (tmp_path / "matrix.toml").read_text() == "mine\n" and not (tmp_path / "nowhere").exists()
    with pytest.raises(InitError, match="is not a directory"):
        write(tmp_path / "nope" / "matrix.toml", good)
    with pytest.raises(InitError, match="the starter matrix does not load"):
        write(tmp_path / "broken.toml", "[matrix]\nbogus = 1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.toml", "matrix.toml"]
