"""A JSON Schema for matrix.toml, generated from the same model the loader validates with.

Editors (taplo, VS Code's Even Better TOML) read it through the `#:schema`
comment at the top of matrix.toml. The loader stays the authority: it also
checks what a schema cannot say well (regexes compile, ids exist) and words
every problem with its fix. Regenerate the committed copy with

    python -m ort_gpu_matrix.config.schema > matrix.schema.json
"""
from __future__ import annotations

import json
import types
import typing
from typing import Any

from .model import (
    ID_PATTERN,
    CpuOpsRule,
    CudaOpsRule,
    CudaRunsRule,
    ExcludeEntry,
    FallbackRule,
    FlakyRule,
    IncludeEntry,
    Libs,
    Observation,
    Ort,
    Rule,
    Settings,
    Suite,
    TierRule,
    Torch,
    keys_of,
)
from .modes import MODES, SPECS

SCHEMA_ID = "https://github.com/ort-gpu-matrix/ort-gpu-matrix/matrix.schema.json"
_MODE_KEYS = {"modes"}  # keys whose items are mode names


def _type(hint: Any, name: str) -> dict[str, Any]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is str:
        return {"type": "string"}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer"}
    if origin is tuple and args[0] is str:
        items: dict[str, Any] = {"type": "string", "enum": list(MODES)} if name in _MODE_KEYS else {"type": "string"}
        return {"type": "array", "items": items}
    if origin is tuple:
        return {"type": "array", "items": {"$ref": f"#/$defs/{args[0].__name__}"}}
    if origin is dict:
        return {"type": "object", "additionalProperties": {"type": ["string", "integer"]}}
    raise TypeError(f"no JSON Schema type for {hint!r}")


def table(cls: type, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """One model class as a closed object: its keys, their types, docs, defaults and required keys."""
    props: dict[str, Any] = {}
    required = []
    forms: tuple[tuple[str, ...], ...] = getattr(cls, "FORMS", ())
    flags = {f[0] for f in forms if len(f) == 1}
    for s in keys_of(cls):
        prop = {"description": s.doc, **_type(s.hint, s.name)}
        if s.one_or_list:
            prop = {"description": s.doc, "oneOf": [{"type": "string"}, {**_type(s.hint, s.name), "minItems": 1}]}
            props[s.name] = prop
            continue
        if s.minimum is not None:
            prop["minItems" if prop["type"] == "array" else "minimum"] = s.minimum
        if s.pattern and prop["type"] == "array":
            prop["items"]["pattern"] = s.pattern
        elif s.pattern:
            prop["pattern"] = s.pattern
        if s.name in _MODE_KEYS:
            prop["minItems"] = 1  # an empty list would run nothing
        if prop["type"] == "boolean" and s.name in flags:
            prop["const"] = True  # a form flag such as `none` or `skip` is only ever written as true
        elif s.default not in (None, (), {}, ""):
            prop["default"] = list(s.default) if isinstance(s.default, tuple) else s.default
        props[s.name] = prop
        if s.required:
            required.append(s.name)
    out: dict[str, Any] = {"type": "object", "description": (cls.__doc__ or "").strip(),
                           "properties": {**props, **(extra or {})}, "additionalProperties": False}
    if required:
        out["required"] = required
    if forms:  # exactly one form: a table naming two, or none, matches no single branch
        out["oneOf"] = [{"anyOf": [{"required": [k]} for k in form]} for form in forms]
    requires: dict[str, tuple[str, ...]] = getattr(cls, "REQUIRES", {})
    if requires:
        out["dependentRequired"] = {k: list(v) for k, v in requires.items()}
    return out


def _ids(ref: str) -> dict[str, Any]:
    return {"type": "object", "propertyNames": {"pattern": f"^{ID_PATTERN}$"},
            "additionalProperties": {"$ref": f"#/$defs/{ref}"}}


def schema() -> dict[str, Any]:
    expect = {"type": "object", "additionalProperties": False, "description": "what each mode expects",
              "properties": {m.value: {"$ref": f"#/$defs/{s.expect_type.__name__}"} for m, s in SPECS.items()}}
    defs = {c.__name__: table(c) for c in (Settings, Ort, Torch, Libs, Rule, TierRule, FlakyRule, FallbackRule, CudaRunsRule,
                                           CudaOpsRule, CpuOpsRule, Observation,
                                           IncludeEntry, ExcludeEntry)}
    defs |= {s.expect_type.__name__: table(s.expect_type) for s in SPECS.values()}
    defs["Suite"] = table(Suite, {"expect": expect})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "ort-gpu-matrix matrix.toml",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "$schema": {"type": "string", "description": "this schema, for editors"},
            "matrix": {"$ref": "#/$defs/Settings"},
            "ort": _ids("Ort"),
            "torch": _ids("Torch"),
            "libs": _ids("Libs"),
            "suite": _ids("Suite"),
            "pairing": {"type": "object", "additionalProperties": False, "properties": {
                "include": {"type": "array", "items": {"$ref": "#/$defs/IncludeEntry"}},
                "exclude": {"type": "array", "items": {"$ref": "#/$defs/ExcludeEntry"}}}},
        },
        "$defs": defs,
    }


def main() -> None:
    print(json.dumps(schema(), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
