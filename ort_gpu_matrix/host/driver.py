"""The NVIDIA driver against what a cell's CUDA build needs, before anything is built.

A cell that pins pip libraries runs on any host with a recent enough driver: no CUDA toolkit, no
system cuDNN. What it cannot do without is the driver (libcuda.so.1, which no wheel ships), and
that driver must be new enough for the CUDA major the cell's libraries were built for. A CUDA 13
cell on a 535 driver gets `cudaErrorInsufficientDriver` at the first CUDA call: ORT then falls
back to the CPU, every GPU test skips, and the run says little about why. So the check is made
here, once per process, and a cell the driver cannot serve is not runnable, with the reason.

Which cells need a driver: those whose ORT is a CUDA build (a distribution named *gpu* or *cuda*).
A CPU onnxruntime pinning libraries (as the tests do with libraries they build) needs none.

Which CUDA major a cell needs, from what its parts say:
  - a pip libs set: the wheels' names (nvidia-cudnn-cu12, nvidia-cuda-runtime-cu12 -> 12) or the
    version of a CUDA 13 wheel that has no suffix (nvidia-cuda-runtime==13.0.96 -> 13);
  - pinned files: the CUDA runtime's name (cudart = ".../libcudart.so.13", or the file search found -> 13);
  - torch: its index (https://download.pytorch.org/whl/cu130 -> 13) or local version (+cu129 -> 12),
    or the runtime a reused torch environment bundles (nvidia/*/lib/libcudart.so.13);
  - ORT: its index (ORT's onnxruntime-cuda-12 feed -> 12).
The strictest minimum applies. With none of these (a PyPI onnxruntime-gpu, nothing pinned), the
cell only needs some driver.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..plan.cells import Cell

# The minimum Linux x86_64 driver of each CUDA major, under CUDA minor version compatibility: any
# 12.x toolkit runs on a 12.0 driver, any 13.x on a 13.0 driver. NVIDIA gives the branches (CUDA 12.x
# >= 525, CUDA 13.x >= 580) in "Minor Version Compatibility",
#   https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
# and the exact versions, those of the x.0 GA releases (CUDA 12.0 GA >= 525.60.13, CUDA 13.0 GA
# >= 580.65.06), in the CUDA Toolkit Release Notes' table "CUDA Toolkit and Corresponding Driver Versions",
#   https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
# CUDA 11.x (>= 450.80.02, the same page) is listed so an old pin gets an answer, not a guess.
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}

QUERY = ("--query-gpu=driver_version", "--format=csv,noheader")


@dataclass(frozen=True)
class Driver:
    """The driver nvidia-smi reports, or why there is none to report."""

    version: str | None
    why_none: str | None = None


def as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"[0-9]+", version))


@cache
def installed() -> Driver:
    """The driver of this host, from `nvidia-smi` (the first GPU's; one driver serves them all)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return Driver(None, "nvidia-smi is not on PATH")
    try:
        out = subprocess.run([exe, *QUERY], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Driver(None, f"nvidia-smi could not be run ({exc})")
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0 or not lines or not as_tuple(lines[0]):
        said = (out.stdout + out.stderr).strip().splitlines()
        return Driver(None, f"nvidia-smi exited {out.returncode}: {said[0][:200] if said else 'no output'}")
    return Driver(lines[0])


def is_cuda_build(cell: Cell) -> bool:
    """The cell's ORT is a CUDA build: it cannot do its job without an NVIDIA driver."""
    name = ""
    if cell.ort.requirement:
        try:
            name = canonicalize_name(Requirement(cell.ort.requirement).name)
        except InvalidRequirement:
            return False
    elif cell.ort.wheel:
        try:
            name = str(parse_wheel_filename(os.path.basename(cell.ort.wheel))[0])
        except InvalidWheelFilename:
            return False
    return "gpu" in name or "cuda" in name


_SUFFIX = re.compile(r"-cu([0-9]+)$")
_UNSUFFIXED = {"nvidia-cuda-runtime", "nvidia-cublas"}  # CUDA 13 wheels: their version's major is CUDA's
_SONAME = re.compile(r"libcudart\.so\.([0-9]+)")
_TORCH_INDEX = re.compile(r"/cu([0-9]{2,3})/?$")
_LOCAL = re.compile(r"\+cu([0-9]{2,3})")
_ORT_INDEX = re.compile(r"cuda-?([0-9]+)")


def _cu(digits: str) -> int:
    """cu130 -> 13, cu129 -> 12, cu118 -> 11."""
    return int(digits[:-1])


def _pip_major(spec: str) -> int | None:
    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return None
    name = canonicalize_name(req.name)
    m = _SUFFIX.search(name)
    if m:
        return int(m.group(1))
    pinned = [s.version for s in req.specifier if s.operator in ("==", "===")]
    if name in _UNSUFFIXED and pinned and as_tuple(pinned[0]):
        return as_tuple(pinned[0])[0]
    return None


def cuda_majors(cell: Cell, pinned: tuple[str, ...], torch_site: str | None) -> list[tuple[int, str, str]]:
    """Every CUDA major the cell's parts say they need: (major, key, what said it)."""
    found: list[tuple[int, str, str]] = []
    for i, spec in enumerate(cell.libs.pip):
        major = _pip_major(spec)
        if major is not None:
            found.append((major, f"libs.{cell.libs.id}.pip[{i}]", spec))
    named = [(f"libs.{cell.libs.id}.cudart", cell.libs.cudart)] if cell.libs.cudart else []
    for key, path in named + [(f"libs.{cell.libs.id}", p) for p in pinned]:
        m = _SONAME.search(os.path.basename(path))
        if m:
            found.append((int(m.group(1)), key, os.path.basename(path)))
            break
    t = cell.torch
    if t.index_url and (m := _TORCH_INDEX.search(t.index_url)):
        found.append((_cu(m.group(1)), f"torch.{t.id}.index_url", t.index_url))
    elif t.requirement and (m := _LOCAL.search(t.requirement)):
        found.append((_cu(m.group(1)), f"torch.{t.id}.requirement", t.requirement))
    if torch_site:
        for hit in sorted(glob.glob(os.path.join(glob.escape(torch_site), "nvidia", "*", "lib", "libcudart.so.*"))):
            m = _SONAME.search(os.path.basename(hit))
            if m:
                found.append((int(m.group(1)), f"torch.{t.id}.environment", f"its {os.path.basename(hit)}"))
                break
    if cell.ort.index_url and (m := _ORT_INDEX.search(cell.ort.index_url)):
        found.append((int(m.group(1)), f"ort.{cell.ort.id}.index_url", cell.ort.index_url))
    return found


def needed(cell: Cell, pinned: tuple[str, ...], torch_site: str | None) -> tuple[str, int, str, str] | None:
    """The strictest (minimum driver, CUDA major, key, what said it), or None when no part names a major."""
    known = [(MIN_DRIVER[m], m, key, why) for m, key, why in cuda_majors(cell, pinned, torch_site) if m in MIN_DRIVER]
    return max(known, key=lambda k: as_tuple(k[0])) if known else None


def problems(cell: Cell, pinned: tuple[str, ...], torch_site: str | None,
             driver: Driver | None = None) -> list[tuple[str, str, str]]:
    """(key, problem, fix) when this host's driver cannot serve the cell; [] when it can or it needs none."""
    if not is_cuda_build(cell):
        return []
    driver = driver or installed()
    need = needed(cell, pinned, torch_site)
    ort_key = f"ort.{cell.ort.id}." + ("requirement" if cell.ort.requirement else "wheel")
    if driver.version is None:
        wants = (f"an NVIDIA driver >= {need[0]} for CUDA {need[1]} ({need[3]})" if need else
                 f"an NVIDIA driver (its ORT, {cell.ort.requirement or cell.ort.wheel}, is a CUDA build)")
        return [(need[2] if need else ort_key, f"needs {wants}, and this host has none: {driver.why_none}",
                 "run it on a host with an NVIDIA GPU and its driver (nvidia-smi must work)")]
    if need and as_tuple(driver.version) < as_tuple(need[0]):
        older = [f"CUDA {m} needs >= {v}" for m, v in sorted(MIN_DRIVER.items())
                 if as_tuple(v) <= as_tuple(driver.version)]
        return [(need[2], f"driver {driver.version} is too old for CUDA {need[1]} ({need[3]}): CUDA {need[1]}.x "
                          f"needs a driver >= {need[0]}",
                 f"upgrade the NVIDIA driver to {need[0]} or newer"
                 + (f", or run a cell of an older CUDA ({'; '.join(older)})" if older else ""))]
    return []
