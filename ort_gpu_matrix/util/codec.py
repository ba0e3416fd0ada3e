"""One codec for every stored record: results, baselines, bisect records and the sweep's own sweep.json.

A record is a frozen dataclass, and its stored form follows from its fields: one JSON key per field,
nested records as objects, enums by value, tuples as lists, a `Textual` value as its line of text, and
where a field says so (`Stored`, typecheck.py) a key left out at its default or names joined into one
string. Reading is the same walk backwards, after the data has been checked against the record's type
hints, so a hand-edited or foreign file fails when it is read, naming each key that is wrong, and a
reader gets typed values (a Status, a ChangeKind, a tuple of tiers), never strings to parse again. Each
store keeps its own file name, version key and the fix its error names; none keeps a serializer.
"""
from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, TypeVar

from . import typecheck
from .typecheck import Stored as Stored
from .typecheck import Textual as Textual
from .typecheck import stored as stored

T = TypeVar("T")


class CodecError(ValueError):
    """Data that is not the record it should be: `problems` says where, one `key.path: what` each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(listed(problems))


def listed(problems: list[str], shown: int = 3) -> str:
    """The first few problems, then how many more there are: an error line stays readable."""
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more


def encode(value: Any) -> Any:
    """JSON-ready data: a record by its fields (as each field is stored), enums by value, tuples as lists."""
    if isinstance(value, Textual):
        return value.encode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            held = getattr(value, f.name)
            how = typecheck.spec(f)
            if how is not None and _left_out(how, f, value, held):
                continue
            out[f.name] = how.joined.join(held) if how is not None and how.joined is not None else encode(held)
        return out
    if isinstance(value, enum.Enum):
        return encode(value.value)
    if isinstance(value, dict):
        return {encode(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def as_dict(record: Any) -> dict[str, Any]:
    """A record's stored form: `encode`, for a record, whose stored form is always an object."""
    out: dict[str, Any] = encode(record)
    return out


def _left_out(how: Stored, f: dataclasses.Field[Any], record: Any, held: Any) -> bool:
    if how.only_if is not None and not getattr(record, how.only_if):
        return True
    return how.omit_default and held == _default(f)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def decode(cls: type[T], data: Any) -> T:
    """The record `cls` from its stored form, checked first: CodecError names every key that does not fit."""
    wrong = typecheck.problems(cls, data)
    if wrong:
        raise CodecError(wrong)
    built: T = _build(cls, data)
    return built


def _build(hint: Any, value: Any) -> Any:
    """A value of type `hint` from stored data that fits it (checked before)."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, types.UnionType) or origin is typing.Union:
        options = [a for a in args if a is not type(None)]
        fitting = [o for o in options if not typecheck.problems(o, value)] if len(options) > 1 else options
        return _build((fitting or options)[0], value)
    if origin is list and args:
        return [_build(args[0], v) for v in value]
    if origin is tuple and args:
        return tuple(_build(args[0], v) for v in value)
    if origin is dict and len(args) == 2:
        return {k: _build(args[1], v) for k, v in value.items()}
    if isinstance(hint, type) and issubclass(hint, Textual):
        return hint.decode(value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _record(hint, value)
    return value


def _record(cls: type[Any], data: dict[str, Any]) -> Any:
    """A record from its fields' stored values; a key not stored takes the field's default, and so does a
    null where the stored shape allows one and the field itself does not (an optional key written as null)."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value, how = data[f.name], typecheck.spec(f)
        if how is not None and how.joined is not None:
            kwargs[f.name] = tuple(x for x in value.split(how.joined) if x)
        elif value is None and typecheck.problems(hints[f.name], None) and _default(f) is not dataclasses.MISSING:
            continue
        else:
            kwargs[f.name] = _build(hints[f.name], value)
    return cls(**kwargs)
