"""`ort-gpu-matrix init`: a starter matrix.toml for the host it runs on, from what the doctor would find.

A newcomer's first matrix should run here and now, so it holds what this host has: the CPU smoke
cell on the python running the tool (any machine), a cell per system CUDA runtime that has a cuDNN
beside it, a pip cell per CUDA major the NVIDIA driver serves (no toolkit needed), and ORT's own
attention tests when ORT_SOURCE points at a checkout. The suites come from the package, so an
empty directory works. What was looked for and not found is said in the file's header, where
the user reads it next to the cells.

The file is written once: never over an existing one, never half (a temporary file, loaded and
checked with the loader first, then hard-linked into place, which fails if the name was taken).
"""
from __future__ import annotations

import glob
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..config.loader import load_matrix
from ..host import driver
from ..host.pythons import find_interpreter
from ..util.errors import MatrixError, UserError
from ..util.fs import UMASK
from ..util.packaged import SUITES_VAR

# Where system CUDA runtimes and cuDNN live on the hosts we know: NVIDIA's toolkit installs
# (the newest first) and the distribution's library dirs (cuDNN's packages install there).
SYSTEM_DIRS = ("/usr/local/cuda-*/lib64", "/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64")
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")

# What each CUDA major runs: ORT's build for it, the torch the PyTorch index builds for it, and the
# pip wheels that bring its runtime and cuDNN (the versions that torch requires itself).
STACKS = {
    12: {"ort": "ort131cu12", "torch": "cu129",
         "pip": ["nvidia-cuda-runtime-cu12==12.9.79", "nvidia-cudnn-cu12==9.10.2.21"]},
    13: {"ort": "ort131", "torch": "cu130",
         "pip": ["nvidia-cuda-runtime==13.0.96", "nvidia-cudnn-cu13==9.19.0.56"]},
}
ORT = {
    "ort131": ('requirement = "onnxruntime-gpu==1.31.1"     # PyPI\'s onnxruntime-gpu 1.30+ are CUDA 13 builds\n'
               'with = ["onnx==1.20.1"]                      # ORT 1.31 reads IR 13 at most; onnx 1.23 writes 14'),
    "ort131cu12": ('requirement = "onnxruntime-gpu==1.31.1"     # ORT\'s CUDA 12 build, from its own feed\n'
                   'index_url = "https://aiinfra.pkgs.visualstudio.com/PublicPackages/_packaging/onnxruntime-cuda-12/pypi/simple/"\n'
                   'with = ["onnx==1.20.1"]'),
    "cpu": 'requirement = "onnxruntime==1.32.0"\nwith = ["onnx==1.20.1"]',
}
TORCH = {
    "cu129": 'requirement = "torch==2.8.0"\nindex_url = "https://download.pytorch.org/whl/cu129"',
    "cu130": 'requirement = "torch==2.11.0"\nindex_url = "https://download.pytorch.org/whl/cu130"',
    "none": "skip = true",
}
ORT_SUITE_ROOT = "${ORT_SOURCE}/onnxruntime/test/python/transformers"

SUITES = f'''[suite.dispatch]                  # the built-in suite, shipped in the package
root = "${{{SUITES_VAR}}}/dispatch"
files = ["test_dispatch.py"]
pythonpath = ["."]

[suite.dispatch.expect.normal]
min_passed = 10
require_kernel = "CUDNN_FLASH_ATTENTION"

[suite.dispatch.expect.require_cudnn]
min_passed = 10
require_kernel = "CUDNN_FLASH_ATTENTION"
forbid_kernels = ["MATH"]
dispatch_tests = "cudnn"

[suite.dispatch.expect.teeth]
message = "AssertionError: 'CUDNN_FLASH_ATTENTION' != 'MATH'"
min_failures = 7
known_toothless = [
  {{ test = "test_attention_values_only_cudnn_path", reason = "value-only parity test on the cuDNN path, kept to prove toothless detection" }},
]

# The same tests on a machine without CUDA: the GPU tests skip, the CPU value tests must pass.
[suite.dispatch_cpu]
root = "${{{SUITES_VAR}}}/dispatch"
files = ["test_dispatch.py"]

[suite.dispatch_cpu.expect.normal]
min_passed = 5
allowed_skips = ["CUDAExecutionProvider is not available", "this pairing has no torch"]
'''

ORT_SUITE = f'''
# ORT's own attention tests, from the checkout ORT_SOURCE points at (export it before running).
[suite.ort_attention]
root = "{ORT_SUITE_ROOT}"
files = ["test_onnx_attention/test_*.py"]
pythonpath = ["."]                       # the tests import test_onnx_attention.common
requirements = ["parameterized", "einops"]
'''


@dataclass(frozen=True)
class SystemSet:
    """A system CUDA runtime of one major, and the cuDNN found to pair with it."""

    major: int
    cudart: str
    cudnn: str | None


@dataclass
class Survey:
    """What this host has for a matrix."""

    running: str  # X.Y of the python running the tool: the CPU cell's "this"
    pythons: dict[str, str | None]
    driver: driver.Driver
    system: list[SystemSet] = field(default_factory=list)
    ort_source: str | None = None


def _toolkit_major(d: str) -> int | None:
    """13 for /usr/local/cuda-13.0/lib64: a dir that belongs to one CUDA toolkit."""
    m = re.search(r"/cuda-([0-9]+)", d)
    return int(m.group(1)) if m else None


def system_sets(patterns: tuple[str, ...] = SYSTEM_DIRS) -> list[SystemSet]:
    """Each CUDA runtime major found (first dir wins), paired with the first libcudnn.so.9 in its own dir,
    then in the others in order, skipping another CUDA major's toolkit (its cuDNN is built for that one)."""
    dirs: list[str] = []
    for pattern in patterns:
        hits = sorted(glob.glob(pattern), key=lambda d: [int(n) for n in re.findall(r"[0-9]+", d)], reverse=True)
        dirs += [d for d in hits if os.path.isdir(d) and d not in dirs]
    sets: dict[int, SystemSet] = {}
    for d in dirs:
        for cudart in sorted(glob.glob(os.path.join(glob.escape(d), "libcudart.so.[0-9]*"))):
            m = re.fullmatch(r"libcudart\.so\.([0-9]+)", os.path.basename(cudart))
            if not m or int(m.group(1)) in sets:
                continue
            major = int(m.group(1))
            near = [d, *(x for x in dirs if _toolkit_major(x) in (None, major))]
            cudnn = next((c for c in (os.path.join(x, "libcudnn.so.9") for x in near) if os.path.isfile(c)), None)
            sets[major] = SystemSet(major, cudart, cudnn)
    return [sets[k] for k in sorted(sets)]


def survey(patterns: tuple[str, ...] = SYSTEM_DIRS) -> Survey:
    return Survey(running=f"{sys.version_info[0]}.{sys.version_info[1]}",
                  pythons={v: find_interpreter(v) for v in PYTHONS},
                  driver=driver.installed(), system=system_sets(patterns),
                  ort_source=os.environ.get("ORT_SOURCE") or None)


def _serves(d: driver.Driver, major: int) -> bool:
    return d.version is not None and driver.as_tuple(d.version) >= driver.as_tuple(driver.MIN_DRIVER[major])


def _quote(text: str) -> str:
    """A TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(s: Survey) -> str:
    """The starter matrix's text for what `s` found."""
    notes = ["A starter matrix for this host, written by `ort-gpu-matrix init` from what it found here:"]
    for v, path in s.pythons.items():
        notes.append(f"  python {v}: {path or 'not found'}" + (" (runs ort-gpu-matrix)" if v == s.running else ""))
    if s.driver.version is None:
        notes.append(f"  NVIDIA driver: none ({s.driver.why_none}): no GPU cell can run here")
    else:
        served = [f"CUDA {m}" for m in STACKS if _serves(s.driver, m)]
        notes.append(f"  NVIDIA driver: {s.driver.version}, serves {', '.join(served) or 'none of CUDA 12 and 13'}")
    libs: list[str] = ["[libs.cpu]\nnone = true"]
    cells: list[tuple[str, str, str, str]] = []  # (ort, torch, libs, comment)
    for sys_set in s.system:
        where = f"CUDA {sys_set.major} runtime {sys_set.cudart}"
        if sys_set.major not in STACKS:
            notes.append(f"  {where}: no ORT build of ours for CUDA {sys_set.major}, no cell")
        elif sys_set.cudnn is None:
            notes.append(f"  {where}, but no libcudnn.so.9 beside it or in {', '.join(SYSTEM_DIRS)}: no system cell")
        else:
            notes.append(f"  {where} with cuDNN {sys_set.cudnn}: cell sys{sys_set.major}")
            libs.append(f"[libs.sys{sys_set.major}]                 # the system libraries found here\n"
                        f"cudart = {_quote(sys_set.cudart)}\ncudnn = {_quote(sys_set.cudnn)}")
            stack = STACKS[sys_set.major]
            cells.append((str(stack["ort"]), str(stack["torch"]), f"sys{sys_set.major}", "system CUDA and cuDNN"))
    if not s.system:
        notes.append(f"  system CUDA runtime: none in {', '.join(SYSTEM_DIRS)}")
    for major, stack in STACKS.items():
        if _serves(s.driver, major):
            libs.append(f"[libs.pip{major}]                 # from pip: needs only the driver (>= "
                        f"{driver.MIN_DRIVER[major]})\npip = [{', '.join(_quote(p) for p in stack['pip'])}]")
            cells.append((str(stack["ort"]), str(stack["torch"]), f"pip{major}", "pip CUDA runtime and cuDNN"))
    gpu_python = s.running
    include = [f'  {{ python = "{gpu_python}", ort = "{o}", torch = "{t}", libs = "{lb}" }},   # {why}'
               for o, t, lb, why in cells]
    if s.ort_source:
        notes.append(f"  ORT_SOURCE={s.ort_source}: suite ort_attention"
                     + ("" if cells else " (no GPU cell to run it on here)"))
        include += [f'  {{ python = "{gpu_python}", ort = "{o}", torch = "{t}", libs = "{lb}", '
                    'suite = "ort_attention", modes = ["normal"] },' for o, t, lb, _ in cells]
    include.append('  { python = "this", ort = "cpu", torch = "none", libs = "cpu", suite = "dispatch_cpu", '
                   'modes = ["normal"] },   # any machine: the CPU wheel, a smoke run')
    orts = dict.fromkeys([o for o, _, _, _ in cells] + ["cpu"])
    torches = dict.fromkeys([t for _, t, _, _ in cells] + ["none"])
    head = "\n".join(f"# {n}".rstrip() for n in [*notes, "",
                                       "`ort-gpu-matrix -l` lists the sessions and why a cell cannot run here;",
                                       "`ort-gpu-matrix` runs the doctor and every cell this host can run.",
                                       "Every key: docs/reference/matrix-toml.md in the ort-gpu-matrix repository."])
    parts = [head,
             '[matrix]\nprefix = "gpu"\nsuite = "dispatch"\nmodes = ["normal", "require_cudnn", "teeth"]',
             *(f"[ort.{o}]\n{ORT[o]}" for o in orts),
             *(f"[torch.{t}]\n{TORCH[t]}" for t in torches),
             *libs,
             "[pairing]\ninclude = [\n" + "\n".join(include) + "\n]",
             SUITES.rstrip() + ("\n" + ORT_SUITE.rstrip() if s.ort_source else "")]
    return "\n\n".join(parts) + "\n"


class InitError(UserError):
    """Nothing was written; the message says why and what to do."""


def write(path: Path, text: str) -> None:
    """Write `text` to `path` only if nothing is there, and only once it loads as a matrix."""
    path = path.absolute()
    if not path.parent.is_dir():
        raise InitError(f"{path.parent} is not a directory\n    fix: create it first, or pass --matrix in an existing dir")
    fd, tmp = tempfile.mkstemp(prefix=".matrix-init-", suffix=".toml", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~UMASK)  # as a plain `open` would have made it
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            load_matrix(Path(tmp))
        except MatrixError as exc:  # a bug of ours: say so, leave nothing behind
            raise InitError(f"the starter matrix does not load (a bug in ort-gpu-matrix, please report it):\n"
                            f"{exc.render()}") from None
        try:
            os.link(tmp, path)  # refuses a name that is taken, atomically: never over a file, never half a file
        except FileExistsError:
            raise InitError(f"{path} already exists; init never overwrites a file\n"
                            "    fix: remove it first, or write another: ort-gpu-matrix init --matrix other.toml") from None
    finally:
        os.unlink(tmp)
