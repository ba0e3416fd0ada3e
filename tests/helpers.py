"""What the tests share that is not a fixture: the paths and names of the test matrix, the real nox in a
subprocess, dirs built once per test run, shared libraries built by cc, matrix text, and hand-built Results.

Test modules import these from here; conftest.py holds only fixtures and hooks, and imports what they need from
here too (pytest advises against importing conftest as a module: its name is not unique across a tree).
tests/test_helpers.py keeps it so.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from filelock import FileLock

if TYPE_CHECKING:
    from ort_gpu_matrix.judge.verdicts import Status
    from ort_gpu_matrix.store.results import CellInfo, Result

REPO = Path(__file__).resolve().parent.parent
SUITES = REPO / "tests" / "fixtures" / "suites"
CHECKOUT_ROOT = REPO / "tests" / "fixtures" / "ort_checkout"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
CELL = f"t-{PY}-x"
VENV = f"t-{PY}-cpu-none"  # venvs are named for what they install
ORT_CPU = "onnxruntime==1.32.0"
ONNX = "onnx==1.20.1"


# ---------------------------------------------------------------- matrix text

def cpu_ort(requirement: str = ORT_CPU) -> dict[str, str]:
    """`[ort.cpu]`: an ORT wheel for the CPU (by default the one the tests pin) and the onnx the suites import."""
    return {"cpu": f'requirement = "{requirement}"\nwith = ["{ONNX}"]'}


def tables(kind: str, bodies: Mapping[str, str] | Sequence[str]) -> str:
    """`[<kind>.<id>]` and its body for each id, a blank line between; ids alone (a sequence) get
    `none = true`, which is what a libs set that pins nothing says."""
    if not isinstance(bodies, Mapping):
        bodies = {id_: "none = true" for id_ in bodies}
    return "\n".join(f"[{kind}.{id_}]\n{body}\n" for id_, body in bodies.items())


def matrix_head(*, ort: Mapping[str, str] | None = None, torch: Mapping[str, str] | None = None,
                libs: Mapping[str, str] | Sequence[str] = ("x",), extra: str = "", **keys: object) -> str:
    """The tables most test matrices start with: `[matrix]` with `keys` in the order given (each as JSON, which
    TOML reads alike; `pythons = ["{py}"]` after the prefix unless given, none where given as None) and `extra`
    lines; the ORT entries (the CPU wheel unless given), the torch entries (one that installs nothing unless
    given) and the libs sets (`x`, pinning nothing, unless given). Tables end with a blank line.

    Written once so a test's matrix holds only what the test is about (its pairings, its suites, its
    expectations). Nothing here adds a brace, so a caller may `.format()` the result as a template (`{py}`)."""
    keys = {"prefix": None, "pythons": ["{py}"], **keys}
    lines = ["[matrix]", *(f"{k} = {json.dumps(v)}" for k, v in keys.items() if v is not None)]
    lines += [extra] if extra else []
    return "\n".join(["\n".join(lines) + "\n", tables("ort", ort or cpu_ort()),
                      tables("torch", torch or {"none": "skip = true"}), tables("libs", libs)]) + "\n"


def suite_head(name: str, files: Sequence[str], pythonpath: Sequence[str] | None = (".", "../canary", ".."),
               root: str = "{root}") -> str:
    """`[suite.<name>]` with its root (by default a `{root}` left to format), its files and its pythonpath (by
    default the one a fixture suite that imports the canary's fake_sdpa uses; None: no pythonpath key)."""
    text = f'[suite.{name}]\nroot = "{root}"\nfiles = {json.dumps(list(files))}\n'
    return text if pythonpath is None else text + f"pythonpath = {json.dumps(list(pythonpath))}\n"


# ---------------------------------------------------------------- the real nox

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
    """One cell (CELL) of one suite `s` in tmp_path's matrix.toml, run by the real nox against shared venvs."""

    def __init__(self, tmp_path: Path, venvs: Path):
        self.tmp = tmp_path
        self.venvs = venvs
        self.matrix = tmp_path / "matrix.toml"
        self.results = tmp_path / "results"

    def write(self, files: list[str], root: Path = SUITES / "verdicts", modes=("normal",), expect: str = "",
              libs: str = "none = true", suite_extra: str = "", matrix_extra: str = "",
              pythonpath=("..",), ort: str = ORT_CPU) -> Path:
        head = matrix_head(prefix="t", pythons=[PY], backend="uv|virtualenv", suite="s", modes=list(modes),
                           extra=matrix_extra, ort=cpu_ort(ort), libs={"x": libs})
        self.matrix.write_text(head + suite_head("s", files, pythonpath, root=str(root)) + suite_extra + "\n"
                               + expect + "\n")
        return self.matrix

    def nox(self, *args: str, env: dict | None = None) -> NoxRun:
        return NoxRun(nox(*args, matrix=self.matrix, results=self.results, venvs=self.venvs, env=env), self.results)

    def run(self, files: list[str], session: str = CELL, env: dict | None = None, **kw) -> NoxRun:
        self.write(files, **kw)
        return self.nox("-s", session, env=env)


# nox ends an aborted or failed session's line with a full stop, and when the session took a second or more it puts
# ` (took 2 seconds)` before that full stop. On a loaded CI machine the same session crosses that second one run in
# a few, so a test that wants the message to end the line must accept both, and nothing else.
_NOX_TAIL = r"(?: \(took [^()\n]+\))?\.?\n"


def ends_line(out: str, text: str) -> bool:
    """True where `text` appears in nox's `out` followed only by nox's duration and full stop, then a line break."""
    return re.search(re.escape(text) + _NOX_TAIL, out) is not None


# ---------------------------------------------------------------- built once per test run

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


# ---------------------------------------------------------------- shared libraries

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


# ---------------------------------------------------------------- hand-built Results
# A Result as the harness stores it, with only the fields a test sets differing, so calibrate, baseline, expected
# and unconfirmed run in-process without a nox run. The engine is imported when one is built, not when conftest
# loads this module: a test of the tree or the docs still runs while an engine module does not import.

def cell(name: str = "c1", libs: str = "none", suite: str = "canary") -> CellInfo:
    from ort_gpu_matrix.store.results import CellInfo

    return CellInfo(name, "3.11", "1.32.0", "none", libs, suite)


def result(mode: str = "normal", outcomes: dict[str, str] | None = None, *, name: str = "c1",
           verdict: Status | None = None, **kw: Any) -> Result:
    from ort_gpu_matrix.judge.counts import Counts, Dispatch
    from ort_gpu_matrix.judge.libraries import Libraries
    from ort_gpu_matrix.judge.verdicts import Status
    from ort_gpu_matrix.store.results import Provenance, Result, VenvInfo

    outcomes = dict(outcomes or {})
    fields: dict[str, Any] = dict(
        session=f"{name}-{mode}", mode=mode, cell=cell(name), verdict=Status.PASS if verdict is None else verdict,
        reasons=[], warnings=[],
        counts=Counts(collected=len(outcomes), passed=sum(o == "passed" for o in outcomes.values())),
        pytest_exit_code=0, started="2026-12-01T00:00:00+00:00", duration_s=1.0, env={}, command=[], workdir="/w",
        log=None, junit=None, report=None, provenance=Provenance(), dispatch=Dispatch(), libraries=Libraries(),
        teeth_coverage=None, venv=VenvInfo("/v", {}), outcomes=outcomes)
    return Result(**{**fields, **kw})


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


# ---------------------------------------------------------------- JUnit files, read by a consumer that is not ours

def junit_cases(path: Path) -> dict[tuple[str, str], tuple[str, str, dict[str, list[str]]]]:
    """A --junit-xml file as junitparser (a JUnit consumer, not the project's code) reads it: (testsuite, testcase
    name) -> (passed | failure | error | skipped, the message, the testcase's properties by name)."""
    from junitparser import JUnitXml, Properties

    out = {}
    for suite in JUnitXml.fromfile(str(path)):
        for case in suite:
            found = case.result[0] if case.result else None
            held = case.child(Properties)
            props: dict[str, list[str]] = {}
            for p in held or []:
                props.setdefault(p.name, []).append(p.value)
            kind = "passed" if found is None else type(found).__name__.lower()
            out[(suite.name, case.name)] = (kind, (found.message or "") if found is not None else "", props)
    return out
