"""One mode run: pytest in a private 0700 dir, with the pairing's libraries pinned.

The test process gets exactly what the recipe needs and nothing it could pick
up by accident: no inherited PYTHONPATH/LD_PRELOAD, no repo-root cwd (which
would shadow the wheel with an ORT source dir), no ini file from above the
suite, and `-P` so that its cwd is never put on sys.path.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

import ort_matrix_probe
from ort_matrix_probe.schema import ProbeReport

from .cells import Cell
from .fsutil import copy_atomic, private_dir
from .host import Resolved
from .modes import spec
from .venvs import Venv

PROBE = "ort_matrix_probe"
PROBE_PLUGIN = f"{PROBE}.plugin"
PROBE_SOURCE = Path(ort_matrix_probe.__file__).parent
SCRUBBED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "LD_PRELOAD", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
            "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "ORT_TEST_REQUIRE_CUDNN_SDPA")


@dataclass
class RunOutcome:
    exit_code: int
    workdir: Path
    log: Path
    junit: Path
    report: ProbeReport | None
    env: dict[str, str]
    started: float
    duration_s: float
    command: list[str] = field(default_factory=list)


def mode_env(cell: Cell, r: Resolved, venv: Venv, mode: str, workdir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The full environment of the test process, and the part of it the result records."""
    mode_spec = spec(mode)
    options = {**cell.suite.provider_options, **mode_spec.forced_options}
    applied = {
        "LD_PRELOAD": ":".join(r.preload),
        "LD_LIBRARY_PATH": ":".join(dict.fromkeys(os.path.dirname(p) for p in r.preload)),
        "PYTHONPATH": ":".join(r.pythonpath),
        "ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO": "1",
        "ORT_MATRIX_CUDA_OPTIONS": json.dumps(options),
        **({"ORT_TEST_REQUIRE_CUDNN_SDPA": "1"} if mode_spec.require_cudnn else {}),
        **cell.suite.env,
    }
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED and not k.startswith("ORT_MATRIX_")}
    env.update({k: v for k, v in applied.items() if v})
    env.update({
        "PATH": f"{venv.path / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv.path),
        "PYTHONSAFEPATH": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "ORT_MATRIX_REPORT": str(workdir / "report.json"),
    })
    return env, applied


def _tee(cmd: list[str], env: dict[str, str], cwd: Path, log: Path, echo: Callable[[str], None]) -> int:
    with log.open("w") as sink:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            sink.write(line)
            echo(line.rstrip("\n"))
        return proc.wait()


def install_probe(venv: Venv) -> None:
    """Copy the probe package into the venv: the test process imports it from there, never from this repo."""
    target = venv.site_packages / PROBE
    target.mkdir(parents=True, exist_ok=True)
    sources = {p.name for p in PROBE_SOURCE.glob("*.py")}
    for name in sorted(sources):
        copy_atomic(PROBE_SOURCE / name, target / name)
    for stale in target.glob("*.py"):
        if stale.name not in sources:
            stale.unlink()


def run_mode(cell: Cell, r: Resolved, venv: Venv, mode: str, session: str, posargs: list[str],
             echo: Callable[[str], None] = print) -> RunOutcome:
    install_probe(venv)
    workdir = private_dir(f"ort-matrix-{session}-")
    ini = workdir / "pytest.ini"
    ini.write_text("[pytest]\n")
    junit, log = workdir / "junit.xml", workdir / "pytest.log"
    env, applied = mode_env(cell, r, venv, mode, workdir)
    safe_path = ["-P"] if Version(cell.python) >= Version("3.11") else []  # older: PYTHONSAFEPATH is moot, cwd is private
    cmd = [str(venv.python), *safe_path, "-m", "pytest", "-p", PROBE_PLUGIN, "-c", str(ini), "--rootdir", r.suite_root,
           "--confcutdir", r.suite_root, "-o", f"cache_dir={workdir / '.pytest_cache'}",
           f"--junitxml={junit}", *cell.suite.pytest_args, *posargs, *r.test_files]
    started = time.time()
    code = _tee(cmd, env, workdir, log, echo)
    duration = time.time() - started
    report_path = workdir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    return RunOutcome(code, workdir, log, junit, report, applied, started, round(duration, 3), cmd)


def keep_artifacts(outcome: RunOutcome, results_dir: Path, session: str, keep_workdir: bool) -> dict[str, str | None]:
    """Copy the log, junit XML and plugin report next to the result; drop the private dir."""
    kept: dict[str, str | None] = {}
    for name, src, suffix in (("log", outcome.log, ".log"), ("junit", outcome.junit, ".junit.xml"),
                              ("report", outcome.workdir / "report.json", ".report.json")):
        dst = results_dir / f"{session}{suffix}"
        if src.is_file():
            copy_atomic(src, dst)
            kept[name] = str(dst)
        else:
            kept[name] = None
    if not keep_workdir:
        shutil.rmtree(outcome.workdir, ignore_errors=True)
    return kept

