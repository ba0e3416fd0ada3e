"""Read matrix.toml into typed, validated declarations.

Validation here is structural and host-independent, so `nox -l` works on any
machine; what depends on the host (library files, interpreters, a torch
environment) is checked by hostcheck.py just before a session builds anything.
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import MatrixError, Problem

MODES = ("normal", "require_cudnn", "teeth")
TEETH_MESSAGE = "AssertionError: 'CUDNN_FLASH_ATTENTION' != 'MATH'"
DEFAULT_TOOLS = ("pytest>=8", "pytest-xdist")
BACKENDS = ("uv", "virtualenv", "venv")


@dataclass(frozen=True)
class Settings:
    prefix: str
    pythons: tuple[str, ...]
    backend: tuple[str, ...]
    wheelhouse: tuple[str, ...]  # as written; expanded by hostcheck
    offline: bool
    suite: str | None
    modes: tuple[str, ...]
    tools: tuple[str, ...]


@dataclass(frozen=True)
class Ort:
    id: str
    requirement: str | None
    wheel: str | None  # as written: a path (relative to the matrix file) or a URL
    with_: tuple[str, ...]


@dataclass(frozen=True)
class Torch:
    id: str
    requirement: str | None = None
    index_url: str | None = None
    environment: str | None = None
    skip: bool = False


@dataclass(frozen=True)
class Libs:
    id: str
    cudart: str | None = None
    cudnn: str | None = None
    search: tuple[str, ...] = ()
    none: bool = False


@dataclass(frozen=True)
class Rule:
    """A regex on node ids and why it is tolerated."""

    test: str
    reason: str


@dataclass(frozen=True)
class Expect:
    min_passed: int = 1
    allowed_skips: tuple[str, ...] = ()
    known_failures: tuple[Rule, ...] = ()
    message: str = TEETH_MESSAGE
    min_failures: int = 1
    require_kernel: str | None = None
    forbid_kernels: tuple[str, ...] = ()
    dispatch_tests: str | None = None
    known_toothless: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class Suite:
    id: str
    root: str  # as written; expanded by hostcheck
    files: tuple[str, ...]
    pythonpath: tuple[str, ...]
    pytest_args: tuple[str, ...]
    requirements: tuple[str, ...]
    env: dict[str, str]
    provider_options: dict[str, str]
    expect: dict[str, Expect]


@dataclass(frozen=True)
class Pairing:
    python: str
    ort: str
    torch: str
    libs: str
    suite: str
    modes: tuple[str, ...]
    key: str  # where it was declared, for error messages


@dataclass(frozen=True)
class Matrix:
    path: Path
    settings: Settings
    ort: dict[str, Ort]
    torch: dict[str, Torch]
    libs: dict[str, Libs]
    suites: dict[str, Suite]
    pairings: tuple[Pairing, ...]
    results_dir: Path = field(default=Path())

    @property
    def base(self) -> Path:
        return self.path.parent


class _Reader:
    """Collects every problem instead of stopping at the first."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[Problem] = []

    def bad(self, key: str, problem: str, fix: str) -> None:
        self.problems.append(Problem(self.file, key, problem, fix))

    def table(self, data: Any, key: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(data, dict):
            self.bad(key, f"must be a table, found {type(data).__name__}", f"write it as [{key}] with keys")
            return {}
        for k in sorted(set(data) - allowed):
            self.bad(f"{key}.{k}", "unknown key", f"remove it, or use one of: {', '.join(sorted(allowed))}")
        return data

    def str_(self, data: dict, key: str, name: str, default: str | None = None) -> str | None:
        value = data.get(name, default)
        if value is not None and not isinstance(value, str):
            self.bad(f"{key}.{name}", f"must be a string, found {value!r}", f'write {name} = "..."')
            return default
        return value

    def strs(self, data: dict, key: str, name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = data.get(name, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.bad(f"{key}.{name}", f"must be a list of strings, found {value!r}", f'write {name} = ["..."]')
            return default
        return tuple(value)

    def bool_(self, data: dict, key: str, name: str) -> bool:
        value = data.get(name, False)
        if not isinstance(value, bool):
            self.bad(f"{key}.{name}", f"must be true or false, found {value!r}", f"write {name} = true")
            return False
        return value

    def int_(self, data: dict, key: str, name: str, default: int) -> int:
        value = data.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            self.bad(f"{key}.{name}", f"must be a whole number >= 0, found {value!r}", f"write {name} = {default}")
            return default
        return value

    def regexes(self, key: str, patterns: tuple[str, ...]) -> None:
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                self.bad(f"{key}[{i}]", f"is not a valid regex ({exc})", "escape special characters such as ( [ + ?")

    def str_table(self, data: dict, key: str, name: str) -> dict[str, str]:
        value = data.get(name, {})
        if not isinstance(value, dict) or not all(isinstance(v, (str, int)) for v in value.values()):
            self.bad(f"{key}.{name}", "must be a table of strings", f'write {name} = {{ NAME = "value" }}')
            return {}
        return {k: str(v) for k, v in value.items()}

    def ids(self, data: dict, section: str) -> dict[str, dict]:
        tables = data.get(section, {})
        if not isinstance(tables, dict):
            self.bad(section, "must hold tables", f"write [{section}.<id>] tables")
            return {}
        out = {}
        for ident, body in tables.items():
            if not re.fullmatch(r"[A-Za-z0-9_.]+", ident):
                self.bad(f"{section}.{ident}", "id may hold only letters, digits, '_' and '.'",
                         "rename it: ids become parts of session names")
            if isinstance(body, dict):
                out[ident] = body
            else:
                self.bad(f"{section}.{ident}", "must be a table", f"write [{section}.{ident}]")
        return out

    def rules(self, data: dict, key: str, name: str) -> tuple[Rule, ...]:
        value = data.get(name, [])
        out = []
        if not isinstance(value, list):
            self.bad(f"{key}.{name}", "must be a list of tables", f'write {name} = [{{ test = "regex", reason = "why" }}]')
            return ()
        for i, item in enumerate(value):
            k = f"{key}.{name}[{i}]"
            if not isinstance(item, dict) or not isinstance(item.get("test"), str) or not isinstance(item.get("reason"), str):
                self.bad(k, "needs a string `test` (regex on node id) and a string `reason`",
                         '{ test = "test_x", reason = "tracked in issue N" }')
                continue
            self.table(item, k, {"test", "reason"})
            self.regexes(k + ".test", (item["test"],))
            out.append(Rule(item["test"], item["reason"]))
        return tuple(out)


def _settings(r: _Reader, data: dict) -> Settings:
    m = r.table(data.get("matrix", {}), "matrix",
                {"prefix", "pythons", "backend", "wheelhouse", "offline", "suite", "modes", "tools"})
    backend = tuple((r.str_(m, "matrix", "backend", "uv|virtualenv") or "uv|virtualenv").split("|"))
    for b in backend:
        if b not in BACKENDS:
            r.bad("matrix.backend", f"unknown venv backend {b!r}", f"use one or more of {'|'.join(BACKENDS)}, e.g. \"uv|virtualenv\"")
    modes = r.strs(m, "matrix", "modes", MODES)
    for mode in modes:
        if mode not in MODES:
            r.bad("matrix.modes", f"unknown mode {mode!r}", f"use some of {list(MODES)}")
    pythons = r.strs(m, "matrix", "pythons", ())
    prefix = r.str_(m, "matrix", "prefix", "gpu") or "gpu"
    if not re.fullmatch(r"[A-Za-z0-9_.]+", prefix):
        r.bad("matrix.prefix", "may hold only letters, digits, '_' and '.'", 'write prefix = "gpu"')
    # MATRIX_WHEELHOUSE / MATRIX_OFFLINE=1 let a host without network run a shipped matrix unedited
    extra = tuple(p for p in os.environ.get("MATRIX_WHEELHOUSE", "").split(os.pathsep) if p)
    return Settings(
        prefix=prefix,
        pythons=pythons,
        backend=backend,
        wheelhouse=r.strs(m, "matrix", "wheelhouse") + extra,
        offline=r.bool_(m, "matrix", "offline") or os.environ.get("MATRIX_OFFLINE") == "1",
        suite=r.str_(m, "matrix", "suite"),
        modes=modes,
        tools=r.strs(m, "matrix", "tools", DEFAULT_TOOLS),
    )


def _one_of(r: _Reader, body: dict, key: str, forms: tuple[str, ...]) -> None:
    present = [f for f in forms if f in body]
    if len(present) != 1:
        found = f"found {', '.join(present)}" if present else "found none"
        r.bad(key, f"needs exactly one of {', '.join(forms)} ({found})", f"keep one of: {', '.join(forms)}")


def _orts(r: _Reader, data: dict) -> dict[str, Ort]:
    out = {}
    for ident, body in r.ids(data, "ort").items():
        key = f"ort.{ident}"
        r.table(body, key, {"requirement", "wheel", "with"})
        _one_of(r, body, key, ("requirement", "wheel"))
        out[ident] = Ort(ident, r.str_(body, key, "requirement"), r.str_(body, key, "wheel"), r.strs(body, key, "with"))
    return out


def _torches(r: _Reader, data: dict) -> dict[str, Torch]:
    out = {}
    for ident, body in r.ids(data, "torch").items():
        key = f"torch.{ident}"
        r.table(body, key, {"requirement", "index_url", "environment", "skip"})
        _one_of(r, body, key, ("requirement", "environment", "skip"))
        if "index_url" in body and "requirement" not in body:
            r.bad(f"{key}.index_url", "only applies with `requirement`", "remove index_url, or add requirement")
        if body.get("skip") is False:
            r.bad(f"{key}.skip", "skip = false declares nothing", "write skip = true, or use requirement/environment")
        out[ident] = Torch(ident, r.str_(body, key, "requirement"), r.str_(body, key, "index_url"),
                           r.str_(body, key, "environment"), r.bool_(body, key, "skip"))
    return out


def _libs(r: _Reader, data: dict) -> dict[str, Libs]:
    out = {}
    for ident, body in r.ids(data, "libs").items():
        key = f"libs.{ident}"
        r.table(body, key, {"cudart", "cudnn", "search", "none"})
        pinned = "cudart" in body or "cudnn" in body
        forms = [name for name, on in (("cudart/cudnn", pinned), ("search", "search" in body), ("none", "none" in body)) if on]
        if len(forms) != 1:
            r.bad(key, f"needs exactly one form: cudart/cudnn paths, search, or none = true (found {forms or 'none'})",
                  "keep one form")
        if body.get("none") is False:
            r.bad(f"{key}.none", "none = false declares nothing", "write none = true, or give cudart/cudnn")
        out[ident] = Libs(ident, r.str_(body, key, "cudart"), r.str_(body, key, "cudnn"),
                          r.strs(body, key, "search"), r.bool_(body, key, "none"))
    return out


_EXPECT_KEYS = {"min_passed", "allowed_skips", "known_failures", "message", "min_failures",
                "require_kernel", "forbid_kernels", "dispatch_tests", "known_toothless"}


def _expect(r: _Reader, body: dict, key: str) -> Expect:
    r.table(body, key, _EXPECT_KEYS)
    skips = r.strs(body, key, "allowed_skips")
    r.regexes(f"{key}.allowed_skips", skips)
    dispatch_tests = r.str_(body, key, "dispatch_tests")
    if dispatch_tests is not None:
        r.regexes(f"{key}.dispatch_tests", (dispatch_tests,))
    return Expect(
        min_passed=r.int_(body, key, "min_passed", 1),
        allowed_skips=skips,
        known_failures=r.rules(body, key, "known_failures"),
        message=r.str_(body, key, "message", TEETH_MESSAGE) or TEETH_MESSAGE,
        min_failures=r.int_(body, key, "min_failures", 1),
        require_kernel=r.str_(body, key, "require_kernel"),
        forbid_kernels=r.strs(body, key, "forbid_kernels"),
        dispatch_tests=dispatch_tests,
        known_toothless=r.rules(body, key, "known_toothless"),
    )


def _suites(r: _Reader, data: dict) -> dict[str, Suite]:
    out = {}
    for ident, body in r.ids(data, "suite").items():
        key = f"suite.{ident}"
        r.table(body, key, {"root", "files", "pythonpath", "pytest_args", "requirements", "env",
                            "provider_options", "expect"})
        if "root" not in body:
            r.bad(f"{key}.root", "is missing", 'add root = "tests/gpu" (relative to the matrix file)')
        files = r.strs(body, key, "files")
        if not files:
            r.bad(f"{key}.files", "is missing or empty", 'add files = ["test_*.py"] (relative to root)')
        expect_tables = r.table(body.get("expect", {}), f"{key}.expect", set(MODES))
        expect = {mode: _expect(r, expect_tables.get(mode, {}), f"{key}.expect.{mode}") for mode in MODES}
        out[ident] = Suite(
            id=ident,
            root=r.str_(body, key, "root") or "",
            files=files,
            pythonpath=r.strs(body, key, "pythonpath", (".",)),
            pytest_args=r.strs(body, key, "pytest_args"),
            requirements=r.strs(body, key, "requirements"),
            env=r.str_table(body, key, "env"),
            provider_options=r.str_table(body, key, "provider_options"),
            expect=expect,
        )
    return out


_AXES = ("python", "ort", "torch", "libs")


def _pairings(r: _Reader, data: dict, s: Settings, orts: dict, torches: dict, libs: dict,
              suites: dict) -> tuple[Pairing, ...]:
    p = r.table(data.get("pairing", {}), "pairing", {"include", "exclude"})
    declared = {"python": s.pythons, "ort": tuple(orts), "torch": tuple(torches), "libs": tuple(libs)}
    candidates: list[tuple[str, dict]] = []
    if "include" in p:
        include = p["include"] if isinstance(p["include"], list) else []
        if not isinstance(p["include"], list):
            r.bad("pairing.include", "must be a list of tables", 'include = [{ python = "3.12", ort = "...", torch = "...", libs = "..." }]')
        for i, entry in enumerate(include):
            key = f"pairing.include[{i}]"
            entry = r.table(entry, key, {*_AXES, "suite", "modes"})
            for axis in _AXES:
                if not isinstance(entry.get(axis), str):
                    r.bad(f"{key}.{axis}", "is missing", f"name one of: {', '.join(declared[axis]) or '(none declared)'}")
            candidates.append((key, entry))
    else:
        for axis in _AXES:
            if not declared[axis]:
                where = "matrix.pythons" if axis == "python" else f"[{axis}.<id>]"
                r.bad(where, f"no {axis} declared, so the matrix has no pairings", f"declare at least one {axis}")
        import itertools
        for n, combo in enumerate(itertools.product(*(declared[a] for a in _AXES))):
            candidates.append((f"pairing (combination {n})", dict(zip(_AXES, combo))))
    exclude = p.get("exclude", [])
    if not isinstance(exclude, list):
        r.bad("pairing.exclude", "must be a list of tables", 'exclude = [{ libs = "cu118" }]')
        exclude = []
    for i, entry in enumerate(exclude):
        r.table(entry, f"pairing.exclude[{i}]", set(_AXES) | {"suite"})
    out = []
    for key, entry in candidates:
        for axis in _AXES[1:]:
            ident = entry.get(axis)
            if isinstance(ident, str) and ident not in declared[axis]:
                r.bad(f"{key}.{axis}", f"unknown {axis} id {ident!r}",
                      f"declare [{axis}.{ident}] or use one of: {', '.join(declared[axis]) or '(none declared)'}")
        suite = entry.get("suite", s.suite)
        if suite is None:
            r.bad(f"{key}.suite", "the pairing has no suite", 'set [matrix] suite = "<id>" or give the entry suite = "<id>"')
        elif suite not in suites:
            r.bad(f"{key}.suite" if "suite" in entry else "matrix.suite", f"unknown suite {suite!r}",
                  f"declare [suite.{suite}] or use one of: {', '.join(suites) or '(none declared)'}")
        modes = entry.get("modes", list(s.modes))
        if not isinstance(modes, list) or any(m not in MODES for m in modes):
            r.bad(f"{key}.modes", f"must be a list drawn from {list(MODES)}", 'modes = ["normal"]')
            modes = list(s.modes)
        full = {**entry, "suite": suite}
        if any(all(full.get(k) == v for k, v in ex.items()) for ex in exclude if isinstance(ex, dict)):
            continue
        if all(isinstance(entry.get(a), str) for a in _AXES) and isinstance(suite, str):
            out.append(Pairing(entry["python"], entry["ort"], entry["torch"], entry["libs"], suite, tuple(modes), key))
    if not out and not r.problems:
        r.bad("pairing", "no pairing is left after exclude", "loosen pairing.exclude or add pairing.include entries")
    return tuple(out)


def matrix_path() -> Path:
    """MATRIX_TOML selects another matrix; the default is the matrix.toml beside the noxfile."""
    env = os.environ.get("MATRIX_TOML")
    return Path(env).resolve() if env else Path(__file__).resolve().parent.parent / "matrix.toml"


def load_matrix(path: Path | None = None) -> Matrix:
    """Parse and validate; raise MatrixError listing every problem."""
    path = (path or matrix_path()).resolve()
    r = _Reader(str(path))
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise MatrixError([Problem(str(path), "(file)", "does not exist",
                                   "create it, or point MATRIX_TOML at your matrix file")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError([Problem(str(path), "(syntax)", f"is not valid TOML: {exc}", "fix the TOML syntax at that line")]) from None
    r.table(data, "(top level)", {"matrix", "ort", "torch", "libs", "pairing", "suite"})
    settings = _settings(r, data)
    orts, torches, libs, suites = _orts(r, data), _torches(r, data), _libs(r, data), _suites(r, data)
    pairings = _pairings(r, data, settings, orts, torches, libs, suites)
    if r.problems:
        raise MatrixError(r.problems)
    results = os.environ.get("MATRIX_RESULTS")
    results_dir = Path(results).resolve() if results else path.parent / ".matrix" / "results"
    return Matrix(path, settings, orts, torches, libs, suites, pairings, results_dir)
