"""Shared fixtures: one venv per test session, real nox runs against small matrices."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# A shell without job control starts a background command (`pytest ... &`, a CI step's `&`) with SIGINT
# ignored, and an ignored signal stays ignored across exec: every nox the tests start would then shrug off the
# Ctrl-C the interrupt tests send it, and those tests would time out. The tests send it on purpose, so they give
# their children the default back (a handler of ours is reset to the default at exec; SIG_IGN is not).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A machine may forbid bytecode (PYTHONDONTWRITEBYTECODE=1, as this project's CI machines do): every nox the
# tests start would then compile the engine from source again. The tests let it be cached (in the checkout's
# git-ignored __pycache__ dirs); the test processes the engine starts keep theirs in their venv either way.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

pytest_plugins = ["pytester"]
collect_ignore = ["fixtures"]  # suites the harness runs, never collected here

REPO = Path(__file__).resolve().parent.parent
SUITES = REPO / "tests" / "fixtures" / "suites"
CHECKOUT_ROOT = REPO / "tests" / "fixtures" / "ort_checkout"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
CELL = f"t-{PY}-x"
VENV = f"t-{PY}-cpu-none"  # venvs are named for what they install
ORT_CPU = "onnxruntime==1.32.0"

MATRIX = """\
[matrix]
prefix = "t"
pythons = ["{py}"]
backend = "uv|virtualenv"
suite = "s"
modes = {modes}
{matrix_extra}

[ort.cpu]
requirement = "{ort}"
with = ["onnx==1.20.1"]

[torch.none]
skip = true

[libs.x]
{libs}

[suite.s]
root = "{root}"
files = {files}
pythonpath = {pythonpath}
{suite_extra}
"""


@dataclass
class NoxRun:
    proc: subprocess.CompletedProcess
    results_dir: Path

    @property
    def output(self) -> str:
        return self.proc.stdout

    def result(self, mode: str) -> dict:
        return json.loads((self.results_dir / f"{CELL}-{mode}.json").read_text())


def nox(*args: str, matrix: Path, results: Path, venvs: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real nox, in a subprocess, against the repo's own noxfile."""
    full = {**os.environ, "MATRIX_TOML": str(matrix), "MATRIX_RESULTS": str(results), "MATRIX_VENVS": str(venvs),
            **(env or {})}
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args], env=full,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)


class Harness:
    def __init__(self, tmp_path: Path, venvs: Path):
        self.tmp = tmp_path
        self.venvs = venvs
        self.matrix = tmp_path / "matrix.toml"
        self.results = tmp_path / "results"

    def write(self, files: list[str], root: Path = SUITES / "verdicts", modes=("normal",), expect: str = "",
              libs: str = "none = true", suite_extra: str = "", matrix_extra: str = "",
              pythonpath=("..",), ort: str = ORT_CPU) -> Path:
        self.matrix.write_text(MATRIX.format(
            py=PY, modes=json.dumps(list(modes)), matrix_extra=matrix_extra, libs=libs, root=root,
            files=json.dumps(files), pythonpath=json.dumps(list(pythonpath)), suite_extra=suite_extra + "\n" + expect,
            ort=ort))
        return self.matrix

    def nox(self, *args: str, env: dict | None = None) -> NoxRun:
        return NoxRun(nox(*args, matrix=self.matrix, results=self.results, venvs=self.venvs, env=env), self.results)

    def run(self, files: list[str], session: str = CELL, env: dict | None = None, **kw) -> NoxRun:
        self.write(files, **kw)
        return self.nox("-s", session, env=env)


@pytest.fixture(autouse=True)
def _mutmut_stats_stay_in_process(monkeypatch):
    """Under mutmut's stats run (MUTANT_UNDER_TEST=stats) a child Python that imports the mutated tree would look
    for mutmut's config in its own cwd and fail; its hits are never recorded anyway. The test process keeps the
    mode (mutmut holds it in-process too), children lose it. A mutant's name is still inherited by children, so
    a mutant reaches the probe a subprocess loads (docs/mutations.md)."""
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        monkeypatch.delenv("MUTANT_UNDER_TEST")


@pytest.fixture(scope="session")
def venvs(tmp_path_factory) -> Path:
    """Built venvs, shared by every test of this session: the first run builds, the rest reuse."""
    return tmp_path_factory.mktemp("venvs")


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    """Every wheel the test venv needs, fetched once, so installs can run with --no-index."""
    d = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(d),
                    ORT_CPU, "onnx==1.20.1", "pytest>=8", "pytest-xdist"], check=True)
    return d


@pytest.fixture
def harness(tmp_path: Path, venvs: Path) -> Harness:
    return Harness(tmp_path, venvs)


FAKE_CUDNN = "unsigned long cudnnGetVersion(void) { return %d; }\n"
FAKE_CUDART = "int cudaRuntimeGetVersion(int *v) { *v = %d; return 0; }\n"


def build_so(out: Path, soname: str, source: str) -> Path:
    """A real shared library with the given SONAME, built by the system compiler."""
    if shutil.which("cc") is None:
        pytest.fail("a C compiler (cc) is needed to build the shared libraries these tests load")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src)], check=True)
    return out


@pytest.fixture(scope="session")
def fake_libs(tmp_path_factory) -> dict[str, Path]:
    """Stand-ins for the system CUDA runtime and cuDNN, and for torch's bundled cuDNN."""
    d = tmp_path_factory.mktemp("libs")
    real = build_so(d / "system" / "libcudnn.so.9.14.0", "libcudnn.so.9", FAKE_CUDNN % 91400)
    (d / "system" / "libcudnn.so.9").symlink_to(real.name)  # as a distro lays it out
    site = d / "torch-env" / "site-packages"
    torch_cudnn = build_so(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % 91900)
    (site / "nvidia_cudnn_cu13-9.19.0.dist-info").mkdir()
    (site / "nvidia_cudnn_cu13-9.19.0.dist-info" / "METADATA").write_text("Name: nvidia-cudnn-cu13\nVersion: 9.19.0\n")
    return {
        "cudart": build_so(d / "system" / "libcudart.so.13", "libcudart.so.13", FAKE_CUDART % 13000),
        "cudnn": d / "system" / "libcudnn.so.9",
        "cudnn_real": real,
        "torch_cudnn": torch_cudnn,
    }
