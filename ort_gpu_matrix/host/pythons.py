"""Which python serves a cell's X.Y on this host: PATH, pyenv's versions, /usr/bin, then uv's pythons.

A cell names a version, never a path, so one matrix runs on a laptop with pyenv and on a CI image
with only /usr/bin. A binary named python3.12 is trusted by its name; a script (a pyenv shim) is
asked, because a shim answers for whatever version pyenv selects in the caller's directory.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_ELF = b"\x7fELF"


def _named_version(exe: str) -> str | None:
    """`3.12` for a real binary named python3.12: trusted without starting it. Scripts (pyenv shims) are not."""
    real = os.path.realpath(exe)
    match = re.fullmatch(r"python(\d+\.\d+)", os.path.basename(real))
    try:
        with open(real, "rb") as f:
            is_binary = f.read(4) == _ELF
    except OSError:
        return None
    return match.group(1) if match and is_binary else None


_NOT_A_SHIM = "not a pyenv shim"


def _pyenv_target(shim: str, name: str) -> str | None:
    """The interpreter a pyenv shim would run, found as pyenv finds it, without starting pyenv.

    pyenv picks the versions from PYENV_VERSION, else the nearest .python-version from the cwd up,
    else <root>/version, and runs the first that has `name`. Returns that file; None when none
    has it (the shim would fail); _NOT_A_SHIM when this is no pyenv shim, or `system` is among
    the versions, so only asking the shim can tell.
    """
    root = Path(shim).parent.parent
    if Path(shim).parent.name != "shims" or not (root / "versions").is_dir():
        return _NOT_A_SHIM
    versions = os.environ.get("PYENV_VERSION", "").split(":")
    if not any(versions):
        here = Path.cwd()
        for d in (here, *here.parents):
            if (d / ".python-version").is_file():
                versions = (d / ".python-version").read_text().split()
                break
        else:
            versions = (root / "version").read_text().split() if (root / "version").is_file() else []
    if "system" in versions:
        return _NOT_A_SHIM
    for v in versions:
        exe = root / "versions" / v / "bin" / name
        if exe.is_file():
            return str(exe)
    return None


def _asked_version(exe: str) -> str | None:
    try:
        out = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _is(exe: str, version: str) -> bool:
    """`exe` really is python `version`: by its real name when that is a binary, else by asking it."""
    named = _named_version(exe)
    return (named if named is not None else _asked_version(exe)) == version


@dataclass(frozen=True)
class Interpreter:
    """A python X.Y and the place it was found, which `nox -l` and the doctor show."""

    path: str
    found: str  # one of the places below, looked at in this order


ON_PATH, PYENV, USR_BIN, RUNNING, UV = "PATH", "pyenv", "/usr/bin", "the python running nox", "uv"
LOOKED = "none on PATH, in pyenv's versions, in /usr/bin or among uv's pythons"


def pyenv_root() -> Path:
    """Where pyenv keeps its versions, as pyenv itself decides it: $PYENV_ROOT, else ~/.pyenv."""
    return Path(os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv"))


def find_uv() -> str | None:
    """uv on PATH, else the binary the `uv` package ships (pip install uv puts it beside the interpreter)."""
    found = shutil.which("uv")
    if found:
        return found
    try:
        import uv

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        return None


def _on_path(version: str) -> str | None:
    for name in (f"python{version}", "python3", "python"):
        exe = shutil.which(name)
        if not exe:
            continue
        target = _pyenv_target(exe, name)
        if target is None:
            continue  # a pyenv shim with no such interpreter behind it
        exe = exe if target == _NOT_A_SHIM else target
        if _is(exe, version):
            return exe
    return None


def _release(exe: str) -> tuple[int, ...]:
    """3.12.10 sorts after 3.12.9: the numbers of a pyenv version dir's name."""
    return tuple(int(n) for n in re.findall(r"[0-9]+", Path(exe).parent.parent.name))


def _in_pyenv(version: str) -> str | None:
    """The newest X.Y.* pyenv has installed, selected or not; read from its dir, without the pyenv binary."""
    versions = glob.escape(str(pyenv_root() / "versions"))
    for exe in sorted(glob.glob(f"{versions}/{version}.*/bin/python{version}"), key=_release, reverse=True):
        if _is(exe, version):
            return exe
    return None


def _from_uv(version: str) -> str | None:
    """A uv-managed python already installed: `uv python find`, never a download (one process: asked last)."""
    uv = find_uv()
    if uv is None:
        return None
    cmd = [uv, "python", "find", "--system", "--managed-python", "--no-python-downloads", version]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    exe = out.stdout.strip()
    return exe if out.returncode == 0 and exe and _is(exe, version) else None


@cache
def locate(version: str) -> Interpreter | None:
    """A python that really is `version`, and where it was found, starting as few processes as possible.

    `nox -l` resolves every cell, so binaries whose real name gives their version and pyenv shims (read
    as pyenv reads them) answer without a process; only other scripts, which can lie about what they
    run, are asked. PATH comes first (what the user chose, and where nox itself looks), then what pyenv
    has installed but not selected, /usr/bin, the python running nox, and last uv's managed pythons,
    which cost a process.
    """
    exe = _on_path(version)
    if exe:
        return Interpreter(exe, ON_PATH)
    exe = _in_pyenv(version)
    if exe:
        return Interpreter(exe, PYENV)
    exe = f"{USR_BIN}/python{version}"
    if os.path.isfile(exe) and _is(exe, version):
        return Interpreter(exe, USR_BIN)
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        # the base interpreter's real file: the same path however nox was started (a venv, pipx, python3.X -m)
        return Interpreter(os.path.realpath(getattr(sys, "_base_executable", sys.executable)), RUNNING)
    exe = _from_uv(version)
    return Interpreter(exe, UV) if exe else None


def find_interpreter(version: str) -> str | None:
    found = locate(version)
    return found.path if found else None


def install_command(version: str) -> str:
    """What would install python `version` here: with the tools this host already uses for pythons."""
    commands = [f"pyenv install {version}"] if (pyenv_root() / "versions").is_dir() else []
    if find_uv():
        commands.append(f"uv python install {version}")
    return " or ".join(commands) or f"pip install uv, then uv python install {version}"
