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
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..config.model import ORT_SOURCE_REF, Ort, expect_path
from ..config.overrides import Workspace
from ..plan.cells import Cell
from ..util.errors import MatrixError, Problem
from ..util.packaged import builtin_vars
from . import driver
from .elf import fits, header_problem
from .pythons import LOOKED, find_interpreter, install_command

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
    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self.problems: list[Problem] = []

    def bad(self, key: str, problem: str, fix: str) -> None:
        self.problems.append(Problem(str(self.workspace.matrix_file), key, problem, fix))

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
        return (p if p.is_absolute() else (base or self.workspace.base) / p).resolve()


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


def pinned_files(cell: Cell, workspace: Workspace) -> tuple[tuple[str, ...], list[Problem]]:
    """The files the cell's libs set pins on this host, and everything wrong with them, soname included.

    `check` (run for every cell by `nox -l`) reads only their ELF headers; this is the full check, made
    by the doctor and just before a cell builds anything."""
    c = _Checker(workspace)
    files = _libs(c, cell, deep=True)
    return files, c.problems


def _interpreter(c: _Checker, cell: Cell) -> str:
    interpreter = find_interpreter(cell.python)
    if interpreter is None:
        pythons = cell.settings.pythons
        key = (f"{cell.key}.python" if cell.key.startswith("pairing.include") else
               f"matrix.pythons[{pythons.index(cell.python)}]" if cell.python in pythons else "matrix.pythons")
        how = install_command(cell.python)
        c.bad(key, f"no python {cell.python} for {cell.name}: {LOOKED} (install it: {how})",
              f"{how}, or drop {cell.python} from the matrix")
    return interpreter or ""


def _ort_install(c: _Checker, ort: Ort) -> tuple[str, Path | None]:
    """What pip installs for the build (a requirement, a URL or a checked local wheel), and the wheel file."""
    if not ort.wheel:
        return ort.requirement or "", None
    key = f"ort.{ort.id}.wheel"
    expanded = c.expand(ort.wheel, key)
    if expanded and re.match(r"^[a-z+]+://", expanded):
        return expanded, None
    if expanded:
        p = c.path(expanded, key)
        if p is None or not p.is_file():
            c.bad(key, f"{p} does not exist", "point wheel at a downloaded .whl, or use requirement")
        else:
            return str(p), p
    return ort.requirement or "", None


def _torch_site(c: _Checker, cell: Cell) -> str | None:
    if not cell.torch.environment:
        return None
    key = f"torch.{cell.torch.id}.environment"
    env = c.path(cell.torch.environment, key)
    site = env / "lib" / f"python{cell.python}" / "site-packages" if env else None
    if site is not None and not site.is_dir():
        c.bad(key, f"{site} does not exist (python {cell.python})",
              "point environment at a venv or prefix of the same python version that has torch installed")
        return None
    return None if site is None else str(site)


def _wheelhouse(c: _Checker, cell: Cell) -> list[str]:
    """The checked wheelhouse dirs; offline, every requirement must have its wheel in one of them."""
    wheelhouse: list[str] = []
    for i, w in enumerate(cell.settings.wheelhouse):
        p = c.path(w, f"matrix.wheelhouse[{i}]")
        if p is not None and not p.is_dir():
            c.bad(f"matrix.wheelhouse[{i}]", f"{p} is not a directory", "create it, or remove the entry")
        elif p is not None:
            wheelhouse.append(str(p))
    if cell.settings.offline:
        pip = [(f"libs.{cell.libs.id}.pip[{i}]", spec) for i, spec in enumerate(cell.libs.pip)]
        for where, requirement in ((f"ort.{cell.ort.id}.requirement", cell.ort.requirement),
                                   (f"torch.{cell.torch.id}.requirement", cell.torch.requirement), *pip):
            if requirement and wheelhouse and not _in_wheelhouse(requirement, wheelhouse):
                c.bad(where, f"offline, and no wheel for {requirement} in {', '.join(wheelhouse)}",
                      f"pip download {shlex.quote(requirement)} -d {wheelhouse[0]} on a machine with network")
    return wheelhouse


def _suite_files(c: _Checker, cell: Cell, root: Path | None) -> tuple[list[str], list[str]]:
    """The suite's test files (its globs, expanded) and its pythonpath, both under its checked root."""
    suite = cell.suite
    skey = f"suite.{suite.id}"
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
    expect = expect_path(c.workspace.base, suite)
    if expect is not None and not expect.is_file():  # a calibrate run writes it; until then no cell of the suite runs
        c.bad(f"{skey}.expect_file", f"{expect} does not exist",
              f"write it with `nox -s calibrate -- {cell.name}` (or --write PATH), or remove expect_file")
    return files, pythonpath


def resolve(cell: Cell, workspace: Workspace) -> Resolved:
    """Check the cell against this host; raise MatrixError naming every problem."""
    c = _Checker(workspace)
    interpreter = _interpreter(c, cell)
    ort_install, wheel = _ort_install(c, cell.ort)
    torch_site = _torch_site(c, cell)
    preload = _libs(c, cell)
    wheelhouse = _wheelhouse(c, cell)
    root = _suite_root(c, cell)
    files, pythonpath = _suite_files(c, cell, root)
    for key, problem, fix in driver.problems(cell, preload, torch_site):  # the driver this cell's CUDA needs
        c.bad(key, problem, fix)
    if c.problems:
        raise MatrixError(c.problems)
    return Resolved(interpreter, ort_install, wheel, torch_site, preload, tuple(wheelhouse),
                    str(root), tuple(dict.fromkeys(files)), tuple(pythonpath), pinned=preload,
                    loader_spec="torch_first" if cell.libs.loader == "torch_first" else None)


def check(cell: Cell, workspace: Workspace) -> Resolved | MatrixError:
    """The cell resolved, or why this host cannot run it: decides nox's default sessions."""
    try:
        return resolve(cell, workspace)
    except MatrixError as exc:
        return exc
