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
from pathlib import Path
from typing import Any, TypeVar

from packaging.requirements import InvalidRequirement, Requirement

from ..util.errors import MatrixError, Problem
from .duplicates import duplicate
from .model import (
    BACKENDS,
    CPU_NODES,
    FLAKY_OUTCOMES,
    ID_PATTERN,
    ISOLATIONS,
    LOADERS,
    OP_PATTERN,
    ORT_SOURCE_REF,
    TEETH_SCOPES,
    DispatchExpect,
    FlakyRule,
    Libs,
    Matrix,
    Ort,
    Pairing,
    Settings,
    Suite,
    Torch,
    keys_of,
)
from .modes import MODES, SPECS
from .overrides import Overrides, Workspace
from .pairings import expand
from .reader import TOP, Reader, shown
from .reserved import RESERVED_FIX, reserved
from .tiernames import tier_name_problem

T = TypeVar("T")


def _settings(r: Reader, data: dict[str, Any], overrides: Overrides) -> Settings:
    s = r.entry(data.get("matrix", {}), "matrix", Settings)
    for b in dict.fromkeys(s.backends):
        def corrected(near: str, wrong: str = b) -> str:
            return f'write backend = "{"|".join(near if p == wrong else p for p in s.backends)}"'
        r.choice("matrix.backend", b, BACKENDS, "a venv backend",
                 f"use one or more of {'|'.join(BACKENDS)}, e.g. \"uv|virtualenv\"", corrected)
    for i, mode in enumerate(s.modes or ()):
        r.choice(f"matrix.modes[{i}]", mode, MODES, "a mode", f"use some of: {', '.join(MODES)}")
    if s.modes == ():
        r.bad("matrix.modes", "is empty: every pairing would run nothing", f"list some of: {', '.join(MODES)}, or remove the key")
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
    r.choice(f"{key}.loader", libs.loader, LOADERS, "a loader", f"use one of: {', '.join(LOADERS)}",
             lambda near: f'write loader = "{near}"')
    if libs.loader == "ort_preload_dlls" and not libs.pip:
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


def _suites(r: Reader, data: dict[str, Any], base: Path) -> dict[str, Suite]:
    out = {}
    for ident, body in r.ids(data, "suite").items():
        key = f"suite.{ident}"
        suite = r.entry({k: v for k, v in body.items() if k != "expect"}, key, Suite, id=ident)
        if "files" in body and not suite.files:
            r.bad(f"{key}.files", "is empty", 'add files = ["test_*.py"] (relative to root)')
        _root_reference(r, f"{key}.root", suite.root)
        _one_of(r, f"{key}.teeth_scope", suite.teeth_scope, TEETH_SCOPES, "a teeth scope")
        _one_of(r, f"{key}.isolation", suite.isolation, ISOLATIONS, "an isolation")
        _one_of(r, f"{key}.cpu_nodes", suite.cpu_nodes, CPU_NODES, "a cpu_nodes choice")
        _ops(r, f"{key}.shape_ops", suite.shape_ops)
        for name in sorted(suite.env):
            why = reserved(name)
            if why:
                r.bad(f"{key}.env.{name}", f"is set by the harness itself ({why})",
                      "remove it from suite.env; " + RESERVED_FIX.get(name, "the harness sets it for every run"))
        tables = r.table(body.get("expect", {}), f"{key}.expect", set(MODES))
        expect = _expect_tables(r, tables, f"{key}.expect")
        if suite.expect_file is not None:
            expect = _merge_expect_file(r, (base / suite.expect_file).resolve(), key, tables, expect)
        policy = suite.node_policy
        out[ident] = dataclasses.replace(suite, expect={m: dataclasses.replace(e, nodes=policy) for m, e in expect.items()})
    return out


def _one_of(r: Reader, key: str, value: str, choices: tuple[str, ...], what: str) -> None:
    if value not in choices:
        near = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
        r.bad(key, f"{value!r} is not {what}" + (f" (did you mean `{near[0]}`?)" if near else ""),
              f"use one of: {', '.join(choices)}")


def _expect_tables(r: Reader, tables: dict[str, Any], prefix: str) -> dict[str, DispatchExpect]:
    """One expect table per mode, read from `tables` (absent keys take their defaults)."""
    # each mode reads only the keys it uses: a key another mode uses is rejected, never ignored
    owner: dict[str, str] = {}  # each expect key -> the first mode's table that reads it
    for m, spec_ in SPECS.items():
        for k in keys_of(spec_.expect_type):
            owner.setdefault(k.name, f"{prefix}.{m.value}")
    out = {m.value: r.entry(tables.get(m.value, {}), f"{prefix}.{m.value}", s.expect_type,
                            {k: where for k, where in owner.items() if k not in {x.name for x in keys_of(s.expect_type)}})
           for m, s in SPECS.items()}
    for mode, expect in out.items():
        for i, rule in enumerate(getattr(expect, "tiers", ())):
            for j, name in enumerate(rule.only):
                problem = tier_name_problem(name)
                if problem:
                    r.bad(f"{prefix}.{mode}.tiers[{i}].only[{j}]", *problem)
        _flaky_rules(r, f"{prefix}.{mode}.known_flaky", expect.known_flaky)
        for key in ("cuda_ops", "allowed_cpu_ops"):
            for i, rule in enumerate(getattr(expect, key)):
                _ops(r, f"{prefix}.{mode}.{key}[{i}].ops", rule.ops)
    return out


def _ops(r: Reader, key: str, ops: tuple[str, ...]) -> None:
    """Each op named as the node census names it, once: a name it never writes would match nothing, silently."""
    seen: set[str] = set()
    for j, op in enumerate(ops):
        if op.startswith("ai.onnx.") and re.fullmatch(OP_PATTERN, op):
            r.bad(f"{key}[{j}]", f"{shown(op)} names ONNX's own domain, which the node census leaves out",
                  f'write "{op.removeprefix("ai.onnx.")}"')
        elif not re.fullmatch(OP_PATTERN, op):
            r.bad(f"{key}[{j}]", f"{shown(op)} is not an op as the node census names it (its type, after its domain "
                  "unless ONNX's own)", 'write ops = ["Unique"], or ["com.microsoft.MoE"] for another domain\'s op')
        elif op in seen:
            r.bad(f"{key}[{j}]", f"{shown(op)} is listed twice", "list each op once")
        seen.add(op)


def _flaky_rules(r: Reader, key: str, rules: tuple[FlakyRule, ...]) -> None:
    """Each known_flaky entry lists at least one outcome, each a pytest outcome, and tiers as SdpaKernel names."""
    for i, rule in enumerate(rules):
        if not rule.outcomes:
            r.bad(f"{key}[{i}].outcomes", "is empty: a flaky rule lists every outcome the test may take",
                  'write outcomes = ["passed", "failed"]')
        for j, outcome in enumerate(rule.outcomes):
            r.choice(f"{key}[{i}].outcomes[{j}]", outcome, FLAKY_OUTCOMES, "a pytest outcome",
                     f"use some of: {', '.join(FLAKY_OUTCOMES)}")
        for j, tier in enumerate(rule.tiers):
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", tier):
                r.bad(f"{key}[{i}].tiers[{j}]", f"{shown(tier)} is not an SdpaKernel tier name",
                      'write tiers as ORT prints them, e.g. ["EFFICIENT_ATTENTION", "FLASH_ATTENTION"]')


def _merge_expect_file(r: Reader, path: Path, key: str, inline: dict[str, Any],
                       expect: dict[str, DispatchExpect]) -> dict[str, DispatchExpect]:
    """A suite's expect_file ([expect.<mode>] tables) merged under its own expect tables.

    The file is checked as the matrix is, with its own path in every message. A key set in both
    places is an error naming both files: neither may silently win. A missing file is left to
    host.py, so that `nox -l` still works and `nox -s calibrate` can write it.
    """
    prefix = f"{key}.expect"
    if not path.exists():
        return expect
    if path.is_dir():
        r.bad(f"{key}.expect_file", f"{path} is a directory, not a file",
              "point expect_file at the .toml file `nox -s calibrate` wrote")
        return expect
    try:
        data = read_toml(path)
    except MatrixError as exc:
        r.problems += exc.problems
        return expect
    f = Reader(str(path))
    f.table(data, TOP, {"expect"})
    tables = f.table(data.get("expect", {}), "expect", set(MODES))
    theirs = _expect_tables(f, tables, "expect")
    merged = {}
    for m, s in SPECS.items():
        mode = m.value
        own, raw = inline.get(mode), tables.get(mode)
        own_keys = set(own) if isinstance(own, dict) else set()
        file_keys = set(raw) if isinstance(raw, dict) else set()
        for k in sorted(own_keys & file_keys & {x.name for x in keys_of(s.expect_type)}):
            r.bad(f"{prefix}.{mode}.{k}", f"is set both here and in {path} (expect.{mode}.{k})",
                  f"set it in one file only: remove it from [{prefix}.{mode}] here, or from [expect.{mode}] in {path}")
        merged[mode] = s.expect_type(**{x.attr: getattr(theirs[mode] if x.name in file_keys else expect[mode], x.attr)
                                        for x in keys_of(s.expect_type)})
    r.problems += f.problems
    return merged


def suite_expect(matrix_path: Path, suite_id: str, expect_file: Path | None) -> dict[str, DispatchExpect]:
    """A suite's expectations as the loader makes them with `expect_file` merged under its own tables.

    `nox -s calibrate` reads the file it is about to write through here, so that what it writes is
    checked by the same code that will load it (keys, regexes, a key set in both places).
    """
    data = read_toml(matrix_path)
    body = data.get("suite", {}).get(suite_id, {})
    key = f"suite.{suite_id}"
    r = Reader(str(matrix_path))
    tables = r.table(body.get("expect", {}), f"{key}.expect", set(MODES))
    expect = _expect_tables(r, tables, f"{key}.expect")
    if expect_file is not None:
        expect = _merge_expect_file(r, expect_file, key, tables, expect)
    if r.problems:
        raise MatrixError(r.problems)
    return expect


_PLACEHOLDER = re.compile(r"\{ort\.([^{}]*)\}")
_SOURCE_EXAMPLE = 'write root = "{ort.source}/onnxruntime/test/python/transformers"'


def _root_reference(r: Reader, key: str, root: str) -> None:
    """{ort.source} may only begin a suite root, as the dir the rest of it lies under."""
    for name in _PLACEHOLDER.findall(root):
        if name != "source":
            r.bad(key, f"has the unknown placeholder {{ort.{name}}}",
                  f"use {ORT_SOURCE_REF}, the source of the pairing's [ort.<id>], or a path")
    count = root.count(ORT_SOURCE_REF)
    if count and (not root.startswith(ORT_SOURCE_REF) or count > 1):
        r.bad(key, f"has {ORT_SOURCE_REF} after its start: it stands for a whole directory", _SOURCE_EXAMPLE)
    elif count and root[len(ORT_SOURCE_REF):][:1] not in ("", "/"):
        r.bad(key, f"continues {ORT_SOURCE_REF} without a /", _SOURCE_EXAMPLE)


def _sources(r: Reader, pairings: tuple[Pairing, ...], orts: dict[str, Ort], suites: dict[str, Suite]) -> None:
    """A suite whose root lies under {ort.source} needs a source on every ORT entry it is paired with."""
    seen: set[tuple[str, str]] = set()
    for p in pairings:
        suite, ort = suites.get(p.suite), orts.get(p.ort)
        if suite is None or ort is None or not suite.from_ort_source or ort.source is not None:
            continue
        if (ort.id, suite.id) in seen:
            continue
        seen.add((ort.id, suite.id))
        r.bad(f"ort.{ort.id}.source", f"is missing: suite.{suite.id}.root begins with {ORT_SOURCE_REF} and "
              f"{p.key} pairs that suite with ort {ort.id}",
              f'add source = "${{ORT_SOURCE}}" to [ort.{ort.id}] (an ORT checkout: the dir holding VERSION_NUMBER), '
              f"or pair suite {suite.id} only with ORT entries that have one")


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
    libs, suites = _entries(r, data, "libs", Libs), _suites(r, data, path.parent)
    pairings = expand(r, data, settings, {"ort": tuple(orts), "torch": tuple(torches), "libs": tuple(libs)},
                      tuple(suites))
    _sources(r, pairings, orts, suites)
    if r.problems:
        raise MatrixError(r.problems)
    return Matrix(path, settings, orts, torches, libs, suites, pairings, Workspace.for_matrix(path, overrides))
