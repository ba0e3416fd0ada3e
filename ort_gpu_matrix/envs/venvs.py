"""One venv per install, rebuilt only when its fingerprint changes or it is damaged, and then saying why.

A CUDA torch is several GB, so the modes of a cell share one venv, and an
unchanged fingerprint installs nothing. A venv is built in place, at the path
it will be used from (console scripts keep a shebang to their own
interpreter), under an exclusive lock, with its fingerprint written last: a
venv without one is incomplete and is rebuilt, and a failed build is removed.
Runs that use a venv hold a shared lock on it, so nothing rebuilds it under a
running pytest.
"""
from __future__ import annotations

import csv
import hashlib
import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from filelock import ReadWriteLock

from ..host.host import Resolved
from ..host.pythons import find_uv as find_uv  # host looks for uv's pythons with it too; libsets imports it from here
from ..plan.cells import Cell
from ..util.errors import UserError
from ..util.fs import write_json
from ..util.voice import Voice

FINGERPRINT = "ort-matrix-fingerprint.json"
TORCH_PTH = "_ort_matrix_torch_env.pth"


class BuildError(UserError):
    """An install step failed; the message says which and how it ended."""


@dataclass(frozen=True)
class Venv:
    path: Path
    python: Path
    site_packages: Path
    fingerprint: dict[str, Any]


def sha256_of(path: Path) -> str:
    """Hashed once per file version and process: a GPU wheel is 256 MB."""
    st = path.stat()
    return _sha256(str(path), st.st_size, st.st_mtime_ns)


@cache
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint(cell: Cell, r: Resolved) -> dict[str, Any]:
    """Everything that decides what the venv holds; a change to any of it rebuilds."""
    t = cell.torch
    return {
        "python": cell.python,
        "interpreter": r.interpreter,
        "ort": r.ort_install,
        "ort_sha256": sha256_of(r.ort_wheel) if r.ort_wheel else None,
        "ort_index_url": cell.ort.index_url,
        "with": list(cell.ort.with_),
        "torch": {"requirement": t.requirement, "index_url": t.index_url, "environment": r.torch_site, "skip": t.skip},
        "wheelhouse": list(r.wheelhouse),
        "offline": cell.settings.offline,
        "tools": list(cell.settings.tools),
        "suite_requirements": list(cell.suite.installs),
    }


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The fingerprint keys that differ, nested ones dotted (torch.index_url), as tox says why it recreates."""
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{k}.{sub}" for sub in changed_fields(a, b)]
        elif a != b:
            out.append(k)
    return out


def venv_name(cell: Cell) -> str:
    """Named for what is installed: pairings that differ only in libs, or in suites with the same
    requirements, share one venv. Suite requirements add a short hash, so suites that need
    different packages get venvs of their own instead of rebuilding one in turn."""
    name = f"{cell.settings.prefix}-{cell.python}-{cell.ort.id}-{cell.torch.id}"
    if cell.suite.installs:
        digest = hashlib.sha256("\n".join(sorted(cell.suite.installs)).encode()).hexdigest()[:8]
        name += f"-r{digest}"
    return name


def _pick_backend(choices: tuple[str, ...], torch_env: bool) -> tuple[str, str | None]:
    for b in choices:
        if b == "uv" and torch_env:
            continue  # uv ignores .pth paths, so it would reinstall what the torch environment has (measured)
        if b == "uv":
            uv = find_uv()
            if uv:
                return b, uv
            continue
        if b == "virtualenv":
            try:
                import virtualenv  # noqa: F401
            except ImportError:
                continue
            return b, None
        if b == "venv":
            return b, None
    hint = " (uv cannot serve a pairing that reuses a torch environment)" if torch_env else ""
    raise BuildError(f"none of the venv backends {'|'.join(choices)} is available{hint}: "
                     "pip install virtualenv (or uv), or add venv to matrix.backend")


def _run(cmd: list[str], voice: Voice) -> None:
    voice.log("$ " + shlex.join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-25:])
        raise BuildError(f"`{shlex.join(cmd[:4])} ...` failed with exit {proc.returncode}:\n{tail}")


def index_args(offline: bool, wheelhouse: tuple[str, ...]) -> list[str]:
    """Where installs may look: the wheelhouse dirs, and no index at all when offline (venvs and libs sets)."""
    args = ["--no-index"] if offline else []
    for w in wheelhouse:
        args += ["--find-links", w]
    return args


def _build(cell: Cell, r: Resolved, where: Path, voice: Voice) -> str:
    backend, uv = _pick_backend(cell.settings.backends, bool(r.torch_site))
    asked = [r.ort_install, *cell.ort.with_, *cell.settings.tools, *cell.suite.installs,
             *([cell.torch.requirement] if cell.torch.requirement else [])]
    voice.log(f"building venv {where.name} ({backend}, {len(asked)} packages)…")
    py = where / "bin" / "python"
    if uv is not None:
        _run([uv, "venv", "--quiet", "--python", r.interpreter, str(where)], voice)
        # copies, not uv's default hardlinks into its cache: a test that writes into site-packages would
        # otherwise damage the cache and every venv linked to it (a rebuild would bring the damage back)
        pip = [uv, "pip", "install", "--link-mode=copy", "--python", str(py)]
    else:
        if backend == "virtualenv":
            _run([sys.executable, "-m", "virtualenv", "--quiet", "-p", r.interpreter, str(where)], voice)
        else:
            _run([r.interpreter, "-m", "venv", str(where)], voice)
        pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if r.torch_site:
        # before installing, so pip counts the environment's numpy, protobuf, ... as installed
        site = site_packages(where, cell.python)
        site.mkdir(parents=True, exist_ok=True)
        (site / TORCH_PTH).write_text(r.torch_site + "\n")
    index = index_args(cell.settings.offline, r.wheelhouse)
    t = cell.torch
    if t.requirement:
        extra = ["--index-url", t.index_url] if t.index_url and not cell.settings.offline else []
        _run([*pip, *index, *extra, t.requirement], voice)
    rest = [*cell.ort.with_, *cell.settings.tools, *cell.suite.installs]
    if cell.ort.index_url and not cell.settings.offline:
        # ORT (and what it depends on) from its own index only; the rest from the usual ones
        _run([*pip, *index, "--index-url", cell.ort.index_url, r.ort_install], voice)
        _run([*pip, *index, *rest], voice)
    else:
        _run([*pip, *index, r.ort_install, *rest], voice)
    return backend


def site_packages(venv: Path, python: str) -> Path:
    return venv / "lib" / f"python{python}" / "site-packages"


def importable(site: Path, package: str) -> bool:
    """Whether `package` imports in a venv: from its site-packages, or from a dir a .pth file there adds
    (a reused torch environment brings pytest-xdist that way, and pip then installs no copy of its own)."""
    dirs = [site]
    for pth in site.glob("*.pth"):
        try:
            lines = pth.read_text().splitlines()
        except OSError:
            continue
        dirs += [Path(line.strip()) for line in lines if line.strip() and not line.startswith(("#", "import"))]
    return any((d / package / "__init__.py").is_file() for d in dirs)


_CHECKED_DISTS = ("onnxruntime", "pytest")  # dist-name prefixes whose files must all be in place


def damage(site: Path) -> str | None:
    """The first file missing or truncated among the checked dists' RECORDs, or None when all are whole."""
    for dist_info in sorted(site.glob("*.dist-info")):
        if not dist_info.name.lower().startswith(_CHECKED_DISTS):
            continue
        try:
            rows = list(csv.reader((dist_info / "RECORD").read_text().splitlines()))
        except OSError:
            return f"{dist_info.name}/RECORD is missing"
        for row in rows:
            if len(row) < 3 or row[0].endswith(".pyc") or row[0].startswith(".."):
                continue
            f = site / row[0]
            if not f.is_file():
                return f"{row[0]} is missing (listed in {dist_info.name}/RECORD)"
            if row[2].isdigit() and f.stat().st_size != int(row[2]):
                return f"{row[0]} has {f.stat().st_size} bytes, RECORD says {row[2]} ({dist_info.name})"
    return None


def _stale_because(target: Path, fp: dict[str, Any], python: str) -> str | None:
    """None when the venv at target can be used as it is, else the line that says why it is (re)built."""
    if not target.exists():
        return f"building venv {target}: it does not exist yet"
    if not (target / "bin" / "python").exists():
        return f"rebuilding venv {target}: its bin/python is missing"
    try:
        old = json.loads((target / FINGERPRINT).read_text()).get("fingerprint")
    except (OSError, json.JSONDecodeError, AttributeError):
        return f"rebuilding venv {target}: its {FINGERPRINT} is missing or unreadable (an unfinished build)"
    changed = changed_fields(old if isinstance(old, dict) else {}, fp)
    if changed:
        return f"fingerprint of {target} changed: rebuilding (changed: {', '.join(changed)})"
    broken = damage(site_packages(target, python))
    return f"rebuilding venv {target}: it is damaged: {broken}" if broken else None


def state(cell: Cell, r: Resolved, venvs_dir: Path) -> str:
    """For the doctor: "absent", "up to date", or "stale: <why>", decided as a run would decide it."""
    target = venvs_dir / venv_name(cell)
    if not target.exists():
        return f"absent ({target})"
    why = _stale_because(target, fingerprint(cell, r), cell.python)
    return f"up to date ({target})" if why is None else f"stale: {why}"


def _build_in_place(cell: Cell, r: Resolved, target: Path, fp: dict[str, Any],
                    voice: Voice) -> None:
    shutil.rmtree(target, ignore_errors=True)
    try:
        backend = _build(cell, r, target, voice)
        write_json(target / FINGERPRINT, {"fingerprint": fp, "backend": backend})  # last: marks it complete
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    voice.log(f"built venv {target} with {backend}")


@contextmanager
def ensure_venv(cell: Cell, r: Resolved, venvs_dir: Path, voice: Voice) -> Iterator[Venv]:
    """The cell's venv, reused when its fingerprint matches and it is whole, else built; held shared while in use."""
    root = venvs_dir
    target = root / venv_name(cell)
    fp = fingerprint(cell, r)
    (root / ".locks").mkdir(parents=True, exist_ok=True)
    lock = ReadWriteLock(root / ".locks" / f"{target.name}.lock", is_singleton=False)
    built = False
    leftovers = list(root.glob(f".{target.name}.build.*"))  # what a killed build left, before builds in place
    if leftovers:
        with lock.write_lock():
            for leftover in leftovers:
                voice.log(f"removing {leftover}, left by an unfinished build")
                shutil.rmtree(leftover, ignore_errors=True)
    while True:
        with lock.read_lock():
            if _stale_because(target, fp, cell.python) is None:
                if not built:
                    voice.log(f"reusing venv {target} (fingerprint unchanged)")
                yield Venv(target, target / "bin" / "python", site_packages(target, cell.python), fp)
                return
        with lock.write_lock():  # waits until no run uses the venv
            why = _stale_because(target, fp, cell.python)
            if why is not None:
                if built and "changed:" in why:  # another run rebuilt it for its own fingerprint meanwhile
                    raise BuildError(f"venv {target} was rebuilt meanwhile by another run with a different "
                                     f"fingerprint ({why.split('(', 1)[-1].rstrip(')')}): run the two one after another")
                if built:  # never a loop: what the fresh build left is what the installer gives
                    raise BuildError(f"venv {target} is unusable right after a fresh build ({why.split(': ', 1)[-1]});"
                                     " the installer's cache may hold a damaged copy: clear it (uv cache clean,"
                                     " pip cache purge) and run again")
                voice.log(why)
                _build_in_place(cell, r, target, fp, voice)
                built = True
