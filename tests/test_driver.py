"""The NVIDIA driver against each cell's CUDA: real `nox -l` and doctor runs, with nvidia-smi a real script on PATH."""
import os
import re
import stat
from pathlib import Path

import pytest
from helpers import ORT_CPU, PY, REPO, SUITES, build_so, matrix_head, nox, suite_head

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.host import driver
from ort_gpu_matrix.plan.cells import cells_of

MATRIX = matrix_head(
    pythons=None, suite="s", modes=["normal"],
    ort={"gpu": 'requirement = "onnxruntime-gpu==1.31.1"', "cpu": f'requirement = "{ORT_CPU}"'},
    libs={"pip13": 'pip = ["nvidia-cuda-runtime==13.0.96", "nvidia-cudnn-cu13==9.19.0.56"]',
          "pip12": 'pip = ["nvidia-cuda-runtime-cu12==12.9.79", "nvidia-cudnn-cu12==9.10.2.21"]',
          "any": "none = true"}) + """[pairing]
include = [
  { python = "this", ort = "gpu", torch = "none", libs = "pip13" },
  { python = "this", ort = "gpu", torch = "none", libs = "pip12" },
  { python = "this", ort = "gpu", torch = "none", libs = "any" },
  { python = "this", ort = "cpu", torch = "none", libs = "pip13" },
]
""" + suite_head("s", ["test_allpass.py"], [".."], root=str(SUITES / "verdicts"))

GPU13, GPU12, ANY, CPU = f"gpu-{PY}-pip13-gpu", f"gpu-{PY}-pip12", f"gpu-{PY}-any", f"gpu-{PY}-pip13-cpu"


def fake_smi(bindir: Path, version: str | None, fails: str | None = None) -> dict:
    """A real nvidia-smi stand-in on PATH that answers the three queries the harness makes, as the real one does."""
    bindir.mkdir(parents=True, exist_ok=True)
    exe = bindir / "nvidia-smi"
    if fails:
        exe.write_text(f"#!/bin/sh\ncat <<'EOF'\n{fails}\nEOF\nexit 9\n")
    else:
        exe.write_text(f"""#!/bin/sh
case "$1" in
  --query-gpu=driver_version) echo '{version}' ;;
  --query-gpu=index,name,compute_cap,driver_version) echo '0, NVIDIA Test GPU, 9.0, {version}' ;;
  -L) echo 'GPU 0: NVIDIA Test GPU (UUID: GPU-00000000-test)' ;;
  *) exit 2 ;;
esac
""")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}


def _listing(tmp_path, env) -> dict[str, str]:
    """nox -l: cell -> '' when runnable here, else its reasons."""
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(MATRIX)
    proc = nox("-l", matrix=matrix, results=tmp_path / "results", venvs=tmp_path / "venvs", env=env)
    assert proc.returncode == 0, proc.stdout
    found = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^([*-]) (\S+) \[cells\] .*?(?:\[not runnable here: (.*)\])?$", line)
        if m:
            found[m.group(2)] = m.group(3) or ""
            assert (m.group(1) == "*") == (found[m.group(2)] == ""), line  # runnable cells are nox's defaults
    return found


def test_without_nvidia_smi_no_cuda_cell_is_runnable_and_each_says_why(tmp_path):
    assert driver.installed().version is None or pytest.skip("this host has an NVIDIA driver")
    cells = _listing(tmp_path, {})
    assert cells[GPU13] == ("needs an NVIDIA driver >= 580.65.06 for CUDA 13 (nvidia-cuda-runtime==13.0.96), "
                            "and this host has none: nvidia-smi is not on PATH")
    assert cells[GPU12].startswith("needs an NVIDIA driver >= 525.60.13 for CUDA 12 (nvidia-cuda-runtime-cu12==12.9.79)")
    assert cells[ANY] == ("needs an NVIDIA driver (its ORT, onnxruntime-gpu==1.31.1, is a CUDA build), "
                          "and this host has none: nvidia-smi is not on PATH")
    assert cells[CPU] == ""  # the CPU wheel needs no driver, whatever its libs set names


def test_a_driver_too_old_for_cuda_13_keeps_only_the_cuda_12_cells(tmp_path):
    cells = _listing(tmp_path, fake_smi(tmp_path / "bin", "535.104.05"))
    assert cells[GPU13] == ("driver 535.104.05 is too old for CUDA 13 (nvidia-cuda-runtime==13.0.96): "
                            "CUDA 13.x needs a driver >= 580.65.06")
    assert cells[GPU12] == "" and cells[ANY] == "" and cells[CPU] == ""


def test_a_driver_too_old_for_cuda_12_says_so(tmp_path):
    cells = _listing(tmp_path, fake_smi(tmp_path / "bin", "470.256.02"))
    assert cells[GPU12] == ("driver 470.256.02 is too old for CUDA 12 (nvidia-cuda-runtime-cu12==12.9.79): "
                            "CUDA 12.x needs a driver >= 525.60.13")
    assert cells[GPU13].startswith("driver 470.256.02 is too old for CUDA 13") and cells[ANY] == ""


@pytest.mark.parametrize("version", ["580.65.06", "580.159.04", "610.1"])
def test_a_new_enough_driver_runs_every_cell(tmp_path, version):
    assert set(_listing(tmp_path, fake_smi(tmp_path / "bin", version)).values()) == {""}


def test_an_nvidia_smi_that_fails_is_no_driver_with_its_message(tmp_path):
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    cells = _listing(tmp_path, fake_smi(tmp_path / "bin", None, fails=msg))
    assert cells[GPU13].endswith(f"and this host has none: nvidia-smi exited 9: {msg}")
    assert cells[CPU] == ""


def test_the_doctor_shows_the_driver_what_it_serves_and_what_each_cell_needs(tmp_path):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(MATRIX)
    proc = nox("-s", "doctor", matrix=matrix, results=tmp_path / "r", venvs=tmp_path / "v",
               env=fake_smi(tmp_path / "bin", "535.104.05"))
    out = proc.stdout
    assert proc.returncode == 0, out
    assert ("NVIDIA driver\n  535.104.05 (nvidia-smi): serves CUDA 11.x (>= 450.80.02), 12.x (>= 525.60.13); "
            "too old for CUDA 13.x (needs >= 580.65.06)\n") in out
    assert f"  {GPU13}: CUDA 13, needs >= 580.65.06 (libs.pip13.pip[0]: nvidia-cuda-runtime==13.0.96): not here" in out
    assert f"  {GPU12}: CUDA 12, needs >= 525.60.13 (libs.pip12.pip[0]: nvidia-cuda-runtime-cu12==12.9.79): ok" in out
    assert f"  {ANY}: a CUDA build of ORT, no CUDA major named by its parts: any driver" in out
    # which cells of each CUDA major this host can run: a 535 driver serves CUDA 12, not 13
    assert f"  CUDA 12 cells (driver >= 525.60.13): 1 of 1 can run here: {GPU12}\n" in out
    assert "  CUDA 13 cells (driver >= 580.65.06): 0 of 1 can run here\n" in out
    assert CPU not in out.split("NVIDIA driver")[1].split("torch environments")[0]
    assert "GPU 0: NVIDIA Test GPU, compute capability 9.0, driver 535.104.05" in out


def _cells(tmp_path, text):
    path = tmp_path / "m.toml"
    path.write_text(text)
    return {c.name: c for c in cells_of(load_matrix(path))}


def test_the_cuda_major_comes_from_each_part_that_names_one(tmp_path):
    """pip names, a pinned runtime, torch's index or local version, a torch environment's runtime, ORT's feed."""
    site = tmp_path / "torchenv" / "lib" / f"python{PY}" / "site-packages"
    build_so(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13", "libcudart.so.13", "int x;\n")
    text = MATRIX.replace("[torch.none]", f"""[torch.i129]
requirement = "torch==2.8.0"
index_url = "https://download.pytorch.org/whl/cu129"
[torch.local]
requirement = "torch==2.11.0+cu130"
[torch.env]
environment = "{tmp_path / 'torchenv'}"
[ort.feed]
requirement = "onnxruntime-gpu==1.31.1"
index_url = "https://aiinfra.pkgs.visualstudio.com/PublicPackages/_packaging/onnxruntime-cuda-12/pypi/simple/"
[libs.file]
cudart = "/opt/cuda-12.9/lib64/libcudart.so.12"
[torch.none]""").replace("include = [", """include = [
  { python = "this", ort = "gpu", torch = "i129", libs = "any" },
  { python = "this", ort = "gpu", torch = "local", libs = "any" },
  { python = "this", ort = "gpu", torch = "env", libs = "any" },
  { python = "this", ort = "feed", torch = "none", libs = "any" },
  { python = "this", ort = "gpu", torch = "none", libs = "file" },
  { python = "this", ort = "gpu", torch = "i129", libs = "pip13" },""")
    cells = {c.torch.id + "/" + c.ort.id + "/" + c.libs.id: c for c in _cells(tmp_path, text).values()}

    def need(key, site_dir=None):
        found = driver.needed(cells[key], (), str(site_dir) if site_dir else None)
        return found and found[:3]

    assert need("i129/gpu/any") == ("525.60.13", 12, "torch.i129.index_url")
    assert need("local/gpu/any") == ("580.65.06", 13, "torch.local.requirement")
    assert need("env/gpu/any", site) == ("580.65.06", 13, "torch.env.environment")
    assert need("none/feed/any") == ("525.60.13", 12, "ort.feed.index_url")
    assert need("none/gpu/file") == ("525.60.13", 12, "libs.file.cudart")
    assert need("none/gpu/pip12") == ("525.60.13", 12, "libs.pip12.pip[0]")
    assert need("i129/gpu/pip13") == ("580.65.06", 13, "libs.pip13.pip[0]")  # the strictest of 12 and 13
    assert need("none/gpu/any") is None
    assert not driver.is_cuda_build(cells["none/cpu/pip13"])


def test_the_shipped_pip_cells_pin_nothing_of_the_system_and_only_the_driver_gates_them(tmp_path):
    shipped = load_matrix(REPO / "matrix.toml")
    for libs_id, major in (("pip12", 12), ("pip13", 13)):
        libs = shipped.libs[libs_id]
        assert libs.pip and not (libs.cudart or libs.cudnn or libs.search or libs.none)
        assert any(s.startswith(f"nvidia-cudnn-cu{major}==") for s in libs.pip)
    proc = nox("-l", matrix=REPO / "matrix.toml", results=tmp_path / "r", venvs=tmp_path / "v",
               env=fake_smi(tmp_path / "bin", "580.65.06"))
    for cell in ("gpu-3.12-pip12", "gpu-3.12-pip13"):
        (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"- {cell} [cells]") or
                   ln.startswith(f"* {cell} [cells]")]
        reasons = line.partition("[not runnable here: ")[2].removesuffix("]")
        # on this host python 3.12 may be missing; nothing else stands in the way: no library, no driver
        assert [r for r in reasons.split("; ") if r and "python 3.12" not in r] == [], line
