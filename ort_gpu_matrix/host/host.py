"""Resolve a cell against this host before anything is built.

Resolved once per nox process, when the sessions are registered (that decides
what `nox` runs by default), and handed to the session that runs the cell.

Everything that depends on the machine (interpreters, library files, a torch
environment, the suite's files) is checked here, so a session fails with one
clear message instead of half-way through a build.
"""
from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..config.model import ORT_SOURCE_REF, Matrix, Ort
from ..plan.cells import Cell
from ..util.errors import MatrixError, Problem
from ..util.packaged import builtin_vars
from . import driver
from .elf import fits, header_problem

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Resolved:
    """A cell with every path made absolute and checked."""

    interpreter: str
    ort_install: str  # requirement string, wheel path or URL
    ort_wheel: Path | None  # a local wheel: hashed into the venv's fingerprint
    torch_site: str | None  # site-packages of a reused torch environment
    preload: tuple[str, ...]  # real paths, in load order
    wheelhouse: tuple[str, ...]
    suite_root: str
    test_files: tuple[str, ...]
    pythonpath: tuple[str, ...]
    pinned: tuple[str, ...] = ()  # the files that must serve the tests (mapped, won by name), however loaded
    loader_spec: str | None = None  # ORT_MATRIX_LOADER for the probe: "torch_first", "ort_preload_dlls:<dir>"


class _Checker:
    def __init__(self, matrix: Matrix):
        self.matrix = matrix
        self.problems: list[Problem] = []

    def bad(self, key: str, problem: str, fix: str) -> None:
        self.problems.append(Problem(str(self.matrix.path), key, problem, fix))

    def expand(self, text: str, key: str) -> str | None:
        known = {**os.environ, **builtin_vars()}  # ${ORT_GPU_MATRIX_SUITES}: the package's, whatever is exported
        missing = [v for v in _VAR.findall(text) if v not in known]
        if missing and _names_an_ort_checkout(text, missing[0], key):
            # `nox -l` shows the problem alone, so the problem itself says how to set it
            self.bad(key, f"uses ${{{missing[0]}}}, which is not set: set {missing[0]} to an ORT checkout "
                     "(the dir holding VERSION_NUMBER)", f"export {missing[0]}=/path/to/onnxruntime before running nox")
            return None
        if missing:
            self.bad(key, f"uses ${{{missing[0]}}}, which is not set", f"export {missing[0]}=... before running nox")
            return None
        return _VAR.sub(lambda m: known[m.group(1)], text)

    def path(self, text: str, key: str, base: Path | None = None) -> Path | None:
        expanded = self.expand(text, key)
        if expanded is None:
            return None
        p = Path(expanded).expanduser()
        return (p if p.is_absolute() else (base or self.matrix.base) / p).resolve()


def _names_an_ort_checkout(text: str, var: str, key: str) -> bool:
    """`var` stands for the root of an ORT checkout: an [ort.<id>] source, or a path that goes on into its
    onnxruntime/ dir (root = "${ORT_SOURCE}/onnxruntime/test/python/transformers")."""
    if key.startswith("ort.") and key.endswith(".source"):
        return True
    return re.search(rf"\$\{{{re.escape(var)}\}}/onnxruntime(/|$)", text) is not None


def _ort_source(c: _Checker, ort: Ort) -> Path | None:
    """The checked root of an ORT checkout a suite root refers to with {ort.source}."""
    key = f"ort.{ort.id}.source"
    p = c.path(ort.source or "", key)
    if p is None:
        return None
    fix = "point source at the root of an ORT checkout (the dir holding VERSION_NUMBER)"
    if not p.is_dir():
        c.bad(key, f"{p} is not a directory", fix)
    elif not (p / "VERSION_NUMBER").is_file():
        c.bad(key, f"{p} holds no VERSION_NUMBER: it is not the root of an ORT checkout", fix)
    else:
        return p
    return None


def _suite_root(c: _Checker, cell: Cell) -> Path | None:
    """The suite's root: under the cell's ORT source when it begins with {ort.source}, else as written."""
    suite = cell.suite
    key = f"suite.{suite.id}.root"
    if not suite.from_ort_source:
        return c.path(suite.root, key)
    source = _ort_source(c, cell.ort)
    rest = suite.root[len(ORT_SOURCE_REF):].lstrip("/")
    if source is None or not rest:
        return source
    return c.path(rest, key, base=source)


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


def _shape(name: str, real: str, deep: bool) -> str | None:
    """Why `real` cannot be pinned as `name`: its header always; its soname too when `deep` (run time, doctor)."""
    if deep:
        return fits(name, Path(real))
    problem = header_problem(Path(real))
    return f"{real} {problem}" if problem else None


def _libs(c: _Checker, cell: Cell, deep: bool = False) -> tuple[str, ...]:
    libs = cell.libs
    key = f"libs.{libs.id}"
    if libs.none or libs.pip:
        return ()  # a pip set's files exist once it is installed (libsets.py), just before the run
    found: list[str] = []
    if libs.search:
        for name, pattern in (("cudart", "libcudart.so.*"), ("cudnn", "libcudnn.so.9")):
            hits = []
            for d in libs.search:
                p = c.path(d, f"{key}.search")
                if p is not None:
                    hits += sorted(glob.glob(str(p / pattern)))
            if hits:
                why = _shape(name, os.path.realpath(hits[0]), deep)
                if why:
                    c.bad(f"{key}.search", f"{hits[0]} was found, but {why}",
                          f"put the real lib{name} first in search, or pin {name} = \"/path/{pattern}\"")
                found.append(os.path.realpath(hits[0]))
            else:
                c.bad(f"{key}.search", f"no {pattern} in {list(libs.search)}",
                      f"add the directory that holds {pattern}, or pin {name} = \"/path/{pattern}\"")
        return tuple(found)
    for name in ("cudart", "cudnn"):
        value = getattr(libs, name)
        if value is None:
            continue
        p = c.path(value, f"{key}.{name}")
        if p is None:
            continue
        if not p.is_file():
            c.bad(f"{key}.{name}", f"{p} does not exist on this host",
                  f"point {name} at the real file (try: ldconfig -p | grep lib{name}), or use none = true")
            continue
        why = _shape(name, os.path.realpath(p), deep)
        if why:
            c.bad(f"{key}.{name}", f"{why}: ld.so would skip it and pin nothing",
                  f"point {name} at the real lib{name}.so.<N> (try: ldconfig -p | grep lib{name})")
        found.append(os.path.realpath(p))
    return tuple(found)


def _in_wheelhouse(requirement: str, dirs: list[str]) -> bool:
    """Some wheel in `dirs` satisfies the requirement (by name and version): an offline install can work."""
    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return True  # the installer will say what is wrong with it
    name = canonicalize_name(req.name)
    for d in dirs:
        for wheel in glob.glob(os.path.join(glob.escape(d), "*.whl")):
            try:
                wname, version, _, _ = parse_wheel_filename(os.path.basename(wheel))
            except InvalidWheelFilename:
                continue
            if wname == name and req.specifier.contains(version, prereleases=True):
                return True
    return False


def pinned_files(matrix: Matrix, cell: Cell) -> tuple[tuple[str, ...], list[Problem]]:
    """The files the cell's libs set pins on this host, and everything wrong with them, soname included.

    `check` (run for every cell by `nox -l`) reads only their ELF headers; this is the full check, made
    by the doctor and just before a cell builds anything."""
    c = _Checker(matrix)
    files = _libs(c, cell, deep=True)
    return files, c.problems


def resolve(matrix: Matrix, cell: Cell) -> Resolved:
    """Check the cell against this host; raise MatrixError naming every problem."""
    c = _Checker(matrix)
    interpreter = find_interpreter(cell.python)
    if interpreter is None:
        pythons = matrix.settings.pythons
        key = (f"{cell.key}.python" if cell.key.startswith("pairing.include") else
               f"matrix.pythons[{pythons.index(cell.python)}]" if cell.python in pythons else "matrix.pythons")
        how = install_command(cell.python)
        c.bad(key, f"no python {cell.python} for {cell.name}: {LOOKED} (install it: {how})",
              f"{how}, or drop {cell.python} from the matrix")
    ort = cell.ort
    ort_install, wheel = ort.requirement or "", None
    if ort.wheel:
        expanded = c.expand(ort.wheel, f"ort.{ort.id}.wheel")
        if expanded and re.match(r"^[a-z+]+://", expanded):
            ort_install = expanded
        elif expanded:
            p = c.path(expanded, f"ort.{ort.id}.wheel")
            if p is None or not p.is_file():
                c.bad(f"ort.{ort.id}.wheel", f"{p} does not exist", "point wheel at a downloaded .whl, or use requirement")
            else:
                ort_install, wheel = str(p), p
    torch_site = None
    if cell.torch.environment:
        env = c.path(cell.torch.environment, f"torch.{cell.torch.id}.environment")
        site = env / "lib" / f"python{cell.python}" / "site-packages" if env else None
        if site is not None and not site.is_dir():
            c.bad(f"torch.{cell.torch.id}.environment", f"{site} does not exist (python {cell.python})",
                  "point environment at a venv or prefix of the same python version that has torch installed")
        elif site is not None:
            torch_site = str(site)
    preload = _libs(c, cell)
    wheelhouse: list[str] = []
    for i, w in enumerate(matrix.settings.wheelhouse):
        p = c.path(w, f"matrix.wheelhouse[{i}]")
        if p is not None and not p.is_dir():
            c.bad(f"matrix.wheelhouse[{i}]", f"{p} is not a directory", "create it, or remove the entry")
        elif p is not None:
            wheelhouse.append(str(p))
    if matrix.settings.offline:
        pip = [(f"libs.{cell.libs.id}.pip[{i}]", spec) for i, spec in enumerate(cell.libs.pip)]
        for where, requirement in ((f"ort.{ort.id}.requirement", ort.requirement),
                                   (f"torch.{cell.torch.id}.requirement", cell.torch.requirement), *pip):
            if requirement and wheelhouse and not _in_wheelhouse(requirement, wheelhouse):
                c.bad(where, f"offline, and no wheel for {requirement} in {', '.join(wheelhouse)}",
                      f"pip download {shlex.quote(requirement)} -d {wheelhouse[0]} on a machine with network")
    suite = cell.suite
    skey = f"suite.{suite.id}"
    root = _suite_root(c, cell)
    files: list[str] = []
    pythonpath: list[str] = []
    if root is not None and not root.is_dir():
        c.bad(f"{skey}.root", f"{root} is not a directory", "point root at the directory that holds the tests")
    elif root is not None:
        for pattern in suite.files:
            hits = sorted(glob.glob(str(root / pattern), recursive=True))
            if not hits:
                c.bad(f"{skey}.files", f"{pattern!r} matches nothing under {root}", "fix the name or glob, relative to root")
            files += [os.path.realpath(h) for h in hits]
        for entry in suite.pythonpath:
            p = c.path(entry, f"{skey}.pythonpath", base=root)
            if p is not None and not p.is_dir():
                c.bad(f"{skey}.pythonpath", f"{p} is not a directory", "list directories relative to root")
            elif p is not None:
                pythonpath.append(str(p))
    expect = matrix.expect_path(suite)
    if expect is not None and not expect.is_file():  # a calibrate run writes it; until then no cell of the suite runs
        c.bad(f"{skey}.expect_file", f"{expect} does not exist",
              f"write it with `nox -s calibrate -- {cell.name}` (or --write PATH), or remove expect_file")
    for key, problem, fix in driver.problems(cell, preload, torch_site):  # the driver this cell's CUDA needs
        c.bad(key, problem, fix)
    if c.problems:
        raise MatrixError(c.problems)
    return Resolved(interpreter or "", ort_install, wheel, torch_site, preload, tuple(wheelhouse),
                    str(root), tuple(dict.fromkeys(files)), tuple(pythonpath), pinned=preload,
                    loader_spec="torch_first" if cell.libs.loader == "torch_first" else None)


def check(matrix: Matrix, cell: Cell) -> Resolved | MatrixError:
    """The cell resolved, or why this host cannot run it: decides nox's default sessions."""
    try:
        return resolve(matrix, cell)
    except MatrixError as exc:
        return exc
