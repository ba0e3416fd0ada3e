"""Read matrix.toml into the typed model, reporting every problem at once.

Validation here is structural and host-independent, so `nox -l` works on any
machine; what depends on the host (library files, interpreters, a torch
environment) is checked by host.py just before a session builds anything.
Keys, types and defaults come from model.py; the cross-key rules are here.
"""
from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import MatrixError, Problem
from ..modes import MODES, SPECS
from ..overrides import Overrides, Workspace
from ..testenv import RESERVED_FIX, reserved
from .duplicates import duplicate
from .model import (
    BACKENDS,
    ID_PATTERN,
    LOADERS,
    PYTHON_PATTERN,
    TEETH_SCOPES,
    Libs,
    Matrix,
    Ort,
    Settings,
    Suite,
    Torch,
    keys_of,
)
from .pairings import expand

T = TypeVar("T")
TOP = "(top level)"


def _kind(hint: Any) -> Any:
    """The type a key holds: X for X | None (absent keys keep their default)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


class Reader:
    """Collects every problem instead of stopping at the first."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[Problem] = []
        self.renamed: set[str] = set()  # required keys a near-miss key already points at

    def bad(self, key: str, problem: str, fix: str) -> None:
        self.problems.append(Problem(self.file, key, problem, fix))

    def table(self, data: Any, key: str, allowed: set[str], elsewhere: dict[str, str] | None = None) -> dict[str, Any]:
        """`elsewhere`: keys that belong to a sibling table (another mode's expect), named as such."""
        if not isinstance(data, dict):
            fix = "write it as an inline table: { key = value, ... }" if key.endswith("]") else f"write it as [{key}] with keys"
            self.bad(key, f"must be a table, found {type(data).__name__}", fix)
            return {}
        for k in sorted(set(data) - allowed):
            where = k if key == TOP else f"{key}.{k}"
            if elsewhere and k in elsewhere:
                self.bad(where, f"unknown key here: {k} is read only by [{elsewhere[k]}]",
                         f"move it to [{elsewhere[k]}], or use one of: {', '.join(sorted(allowed))}")
                continue
            near = difflib.get_close_matches(k, sorted(allowed - set(data)), n=1, cutoff=0.75)
            if near:
                self.bad(where, f"unknown key (did you mean `{near[0]}`?)", f"rename {k} to {near[0]}")
                self.renamed.add(f"{key}.{near[0]}")
            else:
                self.bad(where, "unknown key", f"remove it, or use one of: {', '.join(sorted(allowed))}")
        return data

    def regexes(self, key: str, value: str | tuple[str, ...]) -> None:
        """A list is checked item by item (key[i]), a single pattern under its own key."""
        items = [(f"{key}[{i}]", p) for i, p in enumerate(value)] if isinstance(value, tuple) else [(key, value)]
        for where, pattern in items:
            try:
                re.compile(pattern)
            except re.error as exc:
                self.bad(where, f"is not a valid regex ({exc})", "escape special characters such as ( [ + ?")

    def value(self, raw: Any, key: str, name: str, hint: Any, default: Any, minimum: int | None = None) -> Any:
        """One key's value checked against its declared type; the default when it is wrong."""
        kind = _kind(hint)
        origin, args = typing.get_origin(kind), typing.get_args(kind)
        if kind is str:
            if isinstance(raw, str):
                return raw
            if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                hint = " (TOML reads 3.10 as 3.1)" if name == "python" else ""
                self.bad(key, f"is the TOML number {raw!r}, not a string{hint}",
                         f'quote it: {name} = "{raw}"' + (' (python 3.10 is "3.10")' if hint else ""))
            else:
                self.bad(key, f"must be a string, found {raw!r}", f'write {name} = "..."')
        elif kind is bool:
            if isinstance(raw, bool):
                return raw
            self.bad(key, f"must be true or false, found {raw!r}", f"write {name} = true")
        elif kind is int:
            least = minimum if minimum is not None else 0
            if isinstance(raw, int) and not isinstance(raw, bool) and raw >= least:
                return raw
            self.bad(key, f"must be a whole number >= {least}, found {raw!r}",
                     f"write {name} = {default if default is not None else least}")
        elif origin is tuple and args[0] is str:
            if isinstance(raw, list) and all(isinstance(v, str) for v in raw):
                return tuple(raw)
            numbers = [v for v in raw if isinstance(v, (int, float)) and not isinstance(v, bool)] \
                if isinstance(raw, list) else []
            if numbers:
                hint = " (TOML reads 3.10 as 3.1)" if name == "pythons" else ""
                self.bad(key, f"holds the TOML number {numbers[0]!r}, not a string{hint}",
                         f'quote every item: {name} = ["{numbers[0]}"]' + (' (python 3.10 is "3.10")' if hint else ""))
            else:
                self.bad(key, f"must be a list of strings, found {raw!r}", f'write {name} = ["..."]')
        elif origin is tuple:
            if isinstance(raw, list):
                return tuple(self.entry(item, f"{key}[{i}]", args[0]) for i, item in enumerate(raw))
            self.bad(key, "must be a list of tables", f'write {name} = [{{ test = "regex", reason = "why" }}]')
        elif origin is dict:
            if isinstance(raw, dict) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in raw.values()):
                return {k: str(v) for k, v in raw.items()}
            self.bad(key, "must be a table of strings", f'write {name} = {{ NAME = "value" }}')
        else:  # pragma: no cover - a model type the reader does not know is a bug here
            raise TypeError(f"unsupported key type {kind!r} for {key}")
        return default

    def entry(self, data: Any, key: str, cls: type[T], elsewhere: dict[str, str] | None = None, **fixed: Any) -> T:
        """A table read as `cls`: unknown keys, missing required keys, types and regexes checked."""
        specs = keys_of(cls)
        if not isinstance(data, dict):
            self.table(data, key, set())  # says it must be a table; its keys cannot be judged
            return cls(**fixed)
        data = self.table(data, key, {s.name for s in specs}, elsewhere)
        values = {}
        for s in specs:
            k = f"{key}.{s.name}"
            if s.name not in data:
                if s.required and k not in self.renamed:  # a misspelt key already said "did you mean"
                    example = s.example or '"..."'
                    self.bad(k, "is missing", f"add {s.name} = {example} ({s.doc})")
                continue
            raw = data[s.name]
            if s.one_or_list and isinstance(raw, str):
                raw = [raw]
            value = self.value(raw, k, s.name, s.hint, s.default, s.minimum)
            if s.one_or_list and value is not None and not value:
                self.bad(k, "is empty", f'write {s.name} = "label", or remove it')
            if s.regex and value is not None:
                self.regexes(k, value)
            values[s.attr] = value
        return cls(**fixed, **values)

    def ids(self, data: dict[str, Any], section: str) -> dict[str, Any]:
        tables = data.get(section, {})
        if not isinstance(tables, dict):
            self.bad(section, "must hold tables", f"write [{section}.<id>] tables")
            return {}
        out = {}
        for ident, body in tables.items():
            if not re.fullmatch(ID_PATTERN, ident):
                self.bad(f"{section}.{ident}", "id may hold only letters, digits, '_' and '.'",
                         "rename it: ids become parts of session names")
            if isinstance(body, dict):
                out[ident] = body
            else:
                self.bad(f"{section}.{ident}", "must be a table", f"write [{section}.{ident}]")
        return out

    def python(self, key: str, version: str) -> None:
        if not re.fullmatch(PYTHON_PATTERN, version):
            self.bad(key, f"must be a python version such as \"3.12\" (or \"this\"), found {version!r}", 'write "3.12"')

    def one_form(self, body: dict[str, Any], key: str, forms: tuple[tuple[str, ...], ...]) -> None:
        present = ["/".join(f) for f in forms if any(k in body for k in f)]
        if len(present) != 1:
            names = ", ".join("/".join(f) for f in forms)
            found = f"found {', '.join(present)}" if present else "found none"
            self.bad(key, f"needs exactly one of {names} ({found})", f"keep one of: {names}")


def _settings(r: Reader, data: dict[str, Any], overrides: Overrides) -> Settings:
    s = r.entry(data.get("matrix", {}), "matrix", Settings)
    for b in s.backends:
        if b not in BACKENDS:
            r.bad("matrix.backend", f"unknown venv backend {b!r}",
                  f"use one or more of {'|'.join(BACKENDS)}, e.g. \"uv|virtualenv\"")
    for mode in s.modes or ():
        if mode not in MODES:
            r.bad("matrix.modes", f"unknown mode {mode!r}", f"use some of {list(MODES)}")
    if s.modes == ():
        r.bad("matrix.modes", "is empty: every pairing would run nothing", f"list some of {list(MODES)}, or remove the key")
    for i, version in enumerate(s.pythons):
        r.python(f"matrix.pythons[{i}]", version)
    if not re.fullmatch(ID_PATTERN, s.prefix):
        r.bad("matrix.prefix", "may hold only letters, digits, '_' and '.'", 'write prefix = "gpu"')
    # MATRIX_WHEELHOUSE / MATRIX_OFFLINE=1 let a host without network run a shipped matrix unedited
    s = dataclasses.replace(s, wheelhouse=s.wheelhouse + overrides.wheelhouse, offline=s.offline or overrides.offline)
    if s.offline and not s.wheelhouse:
        r.bad("matrix.offline", "is true (or MATRIX_OFFLINE=1) but no wheelhouse is given: nothing could be installed",
              "add wheelhouse = [\"/path/to/wheels\"], or set MATRIX_WHEELHOUSE")
    return s


def _entries(r: Reader, data: dict[str, Any], section: str, cls: type[T]) -> dict[str, T]:
    """[section.<id>] tables read as `cls`, each in exactly one of the class's FORMS."""
    forms: tuple[tuple[str, ...], ...] = getattr(cls, "FORMS", ())
    flags = [f[0] for f in forms if len(f) == 1 and any(s.name == f[0] and s.hint is bool for s in keys_of(cls))]
    out = {}
    for ident, body in r.ids(data, section).items():
        key = f"{section}.{ident}"
        entry = r.entry(body, key, cls, id=ident)
        if not any(f"{key}.{k}" in r.renamed for f in forms for k in f):  # "did you mean" already covers it
            r.one_form(body, key, forms)
        for k, needs in getattr(cls, "REQUIRES", {}).items():
            if k in body and not all(n in body for n in needs):
                r.bad(f"{key}.{k}", f"only applies with `{'`, `'.join(needs)}`", f"remove {k}, or add {', '.join(needs)}")
        for flag in flags:
            if body.get(flag) is False:
                others = " or ".join("/".join(f) for f in forms if f != (flag,))
                r.bad(f"{key}.{flag}", f"{flag} = false declares nothing", f"write {flag} = true, or use {others}")
        out[ident] = entry
        if isinstance(entry, Libs):
            _libs_rules(r, key, entry)
    return out


def _libs_rules(r: Reader, key: str, libs: Libs) -> None:
    """Each loader with the form it needs, and pip specs that parse as requirements."""
    if libs.loader not in LOADERS:
        r.bad(f"{key}.loader", f"unknown loader {libs.loader!r}", f"use one of: {', '.join(LOADERS)}")
    elif libs.loader == "ort_preload_dlls" and not libs.pip:
        r.bad(f"{key}.loader", "ort_preload_dlls needs a pip set: preload_dlls(directory=...) reads nvidia/*/lib",
              'add pip = ["nvidia-cudnn-cu13==..."], or use loader = "preload"')
    elif libs.loader == "torch_first" and not libs.none:
        r.bad(f"{key}.loader", "torch_first pins nothing: torch's own libraries serve ORT",
              'write none = true with it, or use loader = "preload"')
    for i, spec in enumerate(libs.pip):
        try:
            Requirement(spec)
        except InvalidRequirement as exc:
            r.bad(f"{key}.pip[{i}]", f"is not a pip requirement ({str(exc).splitlines()[0]})", 'write it as "nvidia-cudnn-cu13==9.12.0.46"')


def _suites(r: Reader, data: dict[str, Any]) -> dict[str, Suite]:
    out = {}
    for ident, body in r.ids(data, "suite").items():
        key = f"suite.{ident}"
        suite = r.entry({k: v for k, v in body.items() if k != "expect"}, key, Suite, id=ident)
        if "files" in body and not suite.files:
            r.bad(f"{key}.files", "is empty", 'add files = ["test_*.py"] (relative to root)')
        if suite.teeth_scope not in TEETH_SCOPES:
            near = difflib.get_close_matches(suite.teeth_scope, TEETH_SCOPES, n=1, cutoff=0.6)
            r.bad(f"{key}.teeth_scope", f"{suite.teeth_scope!r} is not a teeth scope"
                  + (f" (did you mean `{near[0]}`?)" if near else ""), f"use one of: {', '.join(TEETH_SCOPES)}")
        for name in sorted(suite.env):
            why = reserved(name)
            if why:
                r.bad(f"{key}.env.{name}", f"is set by the harness itself ({why})",
                      "remove it from suite.env; " + RESERVED_FIX.get(name, "the harness sets it for every run"))
        tables = r.table(body.get("expect", {}), f"{key}.expect", set(MODES))
        # each mode reads only the keys it uses: a key another mode uses is rejected, never ignored
        owner: dict[str, str] = {}  # each expect key -> the first mode's table that reads it
        for m, spec_ in SPECS.items():
            for k in keys_of(spec_.expect_type):
                owner.setdefault(k.name, f"{key}.expect.{m.value}")
        expect = {m.value: r.entry(tables.get(m.value, {}), f"{key}.expect.{m.value}", s.expect_type,
                                   {k: where for k, where in owner.items()
                                    if k not in {x.name for x in keys_of(s.expect_type)}})
                  for m, s in SPECS.items()}
        out[ident] = dataclasses.replace(suite, expect=expect)
    return out


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed file; every way reading it can fail is a MatrixError naming the file and the fix."""
    def fail(key: str, problem: str, fix: str) -> MatrixError:
        return MatrixError([Problem(str(path), key, problem, fix)])

    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise fail("(file)", "does not exist", "create it, or point MATRIX_TOML at your matrix file") from None
    except IsADirectoryError:
        raise fail("(file)", "is a directory, not a file",
                   f"point MATRIX_TOML at the .toml file itself, e.g. {path / 'matrix.toml'}") from None
    except PermissionError:
        raise fail("(file)", "cannot be read (permission denied)", f"chmod u+r {path}") from None
    except OSError as exc:
        raise fail("(file)", f"cannot be read ({exc.strerror})", "check the path and the disk") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise fail("(file)", f"is not UTF-8 text (byte {exc.object[exc.start]:#04x} on line {line})",
                   "save it as UTF-8, as TOML requires") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        dup = duplicate(text)
        if dup is not None:
            raise fail(*dup) from None
        raise fail("(syntax)", f"is not valid TOML: {exc}", "fix the TOML syntax at that line") from None


def load_matrix(path: Path, overrides: Overrides | None = None) -> Matrix:
    """Parse and validate; raise MatrixError listing every problem."""
    overrides = overrides or Overrides.from_environ()
    path = path.resolve()
    data = read_toml(path)
    r = Reader(str(path))
    r.table(data, TOP, {"$schema", "matrix", "ort", "torch", "libs", "pairing", "suite"})
    if "$schema" in data and not isinstance(data["$schema"], str):
        r.bad("$schema", f"must be a string, found {data['$schema']!r}", '"$schema" = "./matrix.schema.json"')
    settings = _settings(r, data, overrides)
    orts, torches = _entries(r, data, "ort", Ort), _entries(r, data, "torch", Torch)
    libs, suites = _entries(r, data, "libs", Libs), _suites(r, data)
    pairings = expand(r, data, settings, {"ort": tuple(orts), "torch": tuple(torches), "libs": tuple(libs)},
                      tuple(suites))
    if r.problems:
        raise MatrixError(r.problems)
    return Matrix(path, settings, orts, torches, libs, suites, pairings, Workspace.for_matrix(path, overrides))
