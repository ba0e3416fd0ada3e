"""How a matrix.toml key is declared: a dataclass field made with `key()`, its doc, default and checks with it.

The model (model.py, rules.py) declares keys with it; the loader, the JSON Schema and the reference read them
back with `keys_of`, so a key's doc, type and checks are written once.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any


def key(doc: str, default: Any = None, *, toml: str | None = None, required: bool = False, regex: bool = False,
        minimum: int | None = None, example: str | None = None, pattern: str | None = None,
        one_or_list: bool = False) -> Any:
    """A TOML key: its doc, default and checks travel with the field. `one_or_list`: a list of
    strings that may also be written as one string."""
    meta = {"doc": doc, "toml": toml, "required": required, "regex": regex, "minimum": minimum, "example": example,
            "pattern": pattern, "one_or_list": one_or_list}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class KeySpec:
    name: str  # as written in TOML
    attr: str  # the dataclass attribute
    hint: Any
    doc: str
    required: bool
    regex: bool
    minimum: int | None
    example: str | None
    pattern: str | None  # a JSON Schema pattern the loader checks by hand, with a better message
    one_or_list: bool
    default: Any


_KEYS: dict[type, tuple[KeySpec, ...]] = {}


def keys_of(cls: type) -> tuple[KeySpec, ...]:
    """The TOML keys of a model class, in declaration order (computed once per class)."""
    if cls not in _KEYS:
        _KEYS[cls] = _keys_of(cls)
    return _KEYS[cls]


def _keys_of(cls: type) -> tuple[KeySpec, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "doc" not in f.metadata:
            continue
        m = f.metadata
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        out.append(KeySpec(m["toml"] or f.name, f.name, hints[f.name], m["doc"], m["required"], m["regex"],
                           m["minimum"], m["example"], m["pattern"], m["one_or_list"], default))
    return tuple(out)
