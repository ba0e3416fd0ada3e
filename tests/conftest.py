"""Shared fixtures: one venv per test session, real nox runs against small matrices."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

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


def run_dir(tmp_path_factory, name: str) -> Path:
    """A dir shared by every xdist worker of this test run (each worker's basetemp is one level below the run's),
    or this session's own when there are no workers. Never a fixed path: the run's basetemp is pytest's 0700 one."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        d = tmp_path_factory.getbasetemp().parent / name
        d.mkdir(mode=0o700, exist_ok=True)
        return d
    return tmp_path_factory.mktemp(name, numbered=False)


def once_per_run(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """A dir that build(dir) fills once for the whole test run, then shared by every xdist worker: wheels, a built
    tool, a baseline sweep. Under a lock, so the second worker waits for the first and reuses its work; a build
    that raised leaves no mark, so the next fixture to ask builds it again (and fails the same way). What is built
    here must stay as built: a test that changes it works on its own copy."""
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # without workers: this session's own
    d, done = run / name, run / f"{name}.built"
    with FileLock(run / f"{name}.lock"):
        if not done.exists():
            if d.exists():
                shutil.rmtree(d)  # a build that raised half-way
            d.mkdir(mode=0o700)
            build(d)
            done.touch()
    return d


@pytest.fixture(scope="session")
def venvs(tmp_path_factory) -> Path:
    """Built venvs, shared by every test of this run and by its xdist workers: the first run builds, the rest
    reuse. The engine's own locks let two workers' runs share them (a build under the exclusive lock, runs under
    the shared one); a test that needs a venv of another fingerprint builds it in its own dir ("own-venvs"), so the
    shared one is never rebuilt under another worker's test."""
    return run_dir(tmp_path_factory, "venvs")


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    """Every wheel the test venv needs, fetched once per run, so installs can run with --no-index."""
    return once_per_run(tmp_path_factory, "wheelhouse", lambda d: subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(d),
         ORT_CPU, "onnx==1.20.1", "pytest>=8", "pytest-xdist"], check=True))


def _fingerprints(venvs: Path) -> dict[str, dict]:
    out = {}
    for f in venvs.glob("*/ort-matrix-fingerprint.json"):
        try:
            out[f.parent.name] = json.loads(f.read_text())
        except (OSError, ValueError):
            pass  # being rebuilt right now, under the engine's lock
    return out


@pytest.fixture(autouse=True)
def _the_shared_venvs_keep_their_fingerprints(request):
    """The shared venvs serve both xdist workers at once: a test that rebuilt one with another fingerprint would make
    the other worker's tests rebuild it back, or see a venv they did not ask for. Every fingerprint a shared venv
    held is recorded for the whole run (under .fingerprints-seen/), and a second one fails the test that finds it,
    naming the fields that changed: that test, or one before it, needs its own venvs dir."""
    if "venvs" not in request.fixturenames:
        yield
        return
    from ort_gpu_matrix.envs.venvs import changed_fields

    shared = request.getfixturevalue("venvs")
    seen = shared / ".fingerprints-seen"
    seen.mkdir(exist_ok=True)
    before = _fingerprints(shared)
    yield
    problems = []
    for name, fp in [*sorted(before.items()), *sorted(_fingerprints(shared).items())]:
        record = seen / f"{name}.json"
        try:
            with open(record, "x") as f:  # the first fingerprint seen in this run wins
                json.dump(fp, f)
            continue
        except FileExistsError:
            pass
        try:
            first = json.loads(record.read_text())
        except ValueError:
            continue  # the other worker is writing it this instant
        if first != fp:
            problems.append(f"{name} (changed: {', '.join(changed_fields(first, fp))})")
    assert not problems, (f"the shared venv(s) {'; '.join(problems)} held another fingerprint earlier in this run: "
                          f"this test or one before it rebuilt it; a test that needs another fingerprint builds in its "
                          f"own dir (harness.venvs = tmp_path / 'own-venvs')")


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


PF_EXITING = 0x4  # a task's flag (/proc/PID/stat, field 9) from the moment it starts to exit
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)  # in the pending masks of /proc/PID/status (SigPnd, ShdPnd)


def still_running(pids: list[int]) -> list[int]:
    """The processes that can still run code of their own. Not one that is gone, a zombie (dead, waiting for a
    reaper that may not exist here), exiting, or with a SIGKILL pending: a SIGKILL takes effect when the process is
    next scheduled, so right after it was sent the process is still listed but can do nothing more. Read at once:
    no wait guesses how long a busy machine takes to schedule it, and a process the run left alone still counts."""
    running = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except (FileNotFoundError, ProcessLookupError):
            continue
        if state not in ("Z", "X") and not any(_task_ending(task) for task in tasks):
            running.append(pid)
    return running


def _task_ending(task: Path) -> bool:
    """One thread of a process: exiting, or a SIGKILL waits for it (every thread gets one when the process does)."""
    try:
        flags = int((task / "stat").read_text().rsplit(")", 1)[1].split()[6])
        status = dict(line.split(":", 1) for line in (task / "status").read_text().splitlines() if ":" in line)
    except (FileNotFoundError, ProcessLookupError):
        return False  # this thread ended; the process's state says the rest
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    return bool(flags & PF_EXITING or pending & SIGKILL_BIT)
