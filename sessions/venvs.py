"""One venv per pairing, rebuilt only when its fingerprint changes.

A CUDA torch is several GB, so the modes of a cell share one venv, and an
unchanged fingerprint installs nothing. A venv is built in a temporary sibling
and renamed into place, so a failed build never leaves a half venv behind.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .cells import Cell
from .fsutil import swap_dir, write_json
from .hostcheck import Resolved
from .matrix import Matrix

FINGERPRINT = "ort-matrix-fingerprint.json"
TORCH_PTH = "_ort_matrix_torch_env.pth"


class BuildError(Exception):
    """An install step failed; the message says which and how it ended."""


@dataclass(frozen=True)
class Venv:
    path: Path
    python: Path
    site_packages: Path
    fingerprint: dict
    rebuilt: bool


def venvs_dir(matrix: Matrix) -> Path:
    """MATRIX_VENVS lets several matrices (and the test suite) share built venvs."""
    env = os.environ.get("MATRIX_VENVS")
    return Path(env).resolve() if env else matrix.base / ".matrix" / "venvs"


def fingerprint(matrix: Matrix, cell: Cell, r: Resolved) -> dict:
    t = cell.torch
    return {
        "python": cell.python,
        "interpreter": r.interpreter,
        "ort": r.ort_install,
        "ort_sha256": r.ort_sha256,
        "with": list(cell.ort.with_),
        "torch": {"requirement": t.requirement, "index_url": t.index_url, "environment": r.torch_site, "skip": t.skip},
        "wheelhouse": list(r.wheelhouse),
        "offline": matrix.settings.offline,
        "tools": list(matrix.settings.tools),
        "suite_requirements": list(cell.suite.requirements),
    }


def venv_name(matrix: Matrix, cell: Cell) -> str:
    """Named for what is installed: pairings that differ only in libs or suite share one venv."""
    return f"{matrix.settings.prefix}-{cell.python}-{cell.ort.id}-{cell.torch.id}"


def _pick_backend(choices: tuple[str, ...], torch_env: bool) -> str:
    for b in choices:
        if b == "uv" and torch_env:
            continue  # uv ignores .pth paths, so it would reinstall what the torch environment has (measured)
        if b == "uv" and shutil.which("uv"):
            return b
        if b == "virtualenv":
            try:
                import virtualenv  # noqa: F401
            except ImportError:
                continue
            return b
        if b == "venv":
            return b
    hint = " (uv cannot serve a pairing that reuses a torch environment)" if torch_env else ""
    raise BuildError(f"none of the venv backends {'|'.join(choices)} is available{hint}: "
                     "pip install virtualenv (or uv), or add venv to matrix.backend")


def _run(cmd: list[str], log: Callable[[str], None]) -> None:
    log("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-25:])
        raise BuildError(f"`{' '.join(cmd[:4])} ...` failed with exit {proc.returncode}:\n{tail}")


def _index_args(matrix: Matrix, r: Resolved) -> list[str]:
    args = ["--no-index"] if matrix.settings.offline else []
    for w in r.wheelhouse:
        args += ["--find-links", w]
    return args


def _build(matrix: Matrix, cell: Cell, r: Resolved, where: Path, log: Callable[[str], None]) -> str:
    backend = _pick_backend(matrix.settings.backend, bool(r.torch_site))
    py = where / "bin" / "python"
    if backend == "uv":
        _run(["uv", "venv", "--quiet", "--python", r.interpreter, str(where)], log)
        pip = ["uv", "pip", "install", "--python", str(py)]
    else:
        if backend == "virtualenv":
            _run([sys.executable, "-m", "virtualenv", "--quiet", "-p", r.interpreter, str(where)], log)
        else:
            _run([r.interpreter, "-m", "venv", str(where)], log)
        pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if r.torch_site:
        # before installing, so pip counts the environment's numpy, protobuf, ... as installed
        site = site_packages(where, cell.python)
        site.mkdir(parents=True, exist_ok=True)
        (site / TORCH_PTH).write_text(r.torch_site + "\n")
    index = _index_args(matrix, r)
    t = cell.torch
    if t.requirement:
        extra = ["--index-url", t.index_url] if t.index_url and not matrix.settings.offline else []
        _run([*pip, *index, *extra, t.requirement], log)
    _run([*pip, *index, r.ort_install, *cell.ort.with_, *matrix.settings.tools, *cell.suite.requirements], log)
    return backend


def site_packages(venv: Path, python: str) -> Path:
    return venv / "lib" / f"python{python}" / "site-packages"


def ensure_venv(matrix: Matrix, cell: Cell, r: Resolved, log: Callable[[str], None] = print) -> Venv:
    """Reuse the cell's venv when its fingerprint matches, else build a new one in full."""
    root = venvs_dir(matrix)
    target = root / venv_name(matrix, cell)
    fp = fingerprint(matrix, cell, r)
    stamp = target / FINGERPRINT
    if stamp.is_file() and (target / "bin" / "python").exists():
        try:
            if json.loads(stamp.read_text()).get("fingerprint") == fp:
                log(f"reusing venv {target} (fingerprint unchanged)")
                return Venv(target, target / "bin" / "python", site_packages(target, cell.python), fp, False)
        except json.JSONDecodeError:
            pass
        log(f"fingerprint of {target} changed: rebuilding")
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.build.", dir=root))
    try:
        backend = _build(matrix, cell, r, tmp, log)
        write_json(tmp / FINGERPRINT, {"fingerprint": fp, "backend": backend})
        os.chmod(tmp, 0o755)
        swap_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"built venv {target} with {backend}")
    return Venv(target, target / "bin" / "python", site_packages(target, cell.python), fp, True)
