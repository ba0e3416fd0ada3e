"""Check data read from JSON against the type hints of the dataclass it will become.

Result and baseline files are read back by sweeps and reports long after they were written, and a
hand-edited or foreign file must fail when it is read, naming the field, never later in a
comparison with a traceback after every cell has run. The typed dataclasses already say what each
field holds, so the check is derived from them instead of from a second schema that could drift.

Where a field is stored otherwise than its type says (a tuple of tier names as one string, a dict whose
keys are checked by a record of their own, a key left out at its default), the field says so once, with
`Stored` in its metadata; the check here and the codec that writes and builds records (codec.py) both
read it. A `Textual` value is stored as one line of text and read back by its own `decode`.
"""
from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, Self

STORED = "stored"  # the dataclass field metadata key that holds a field's Stored


class Textual:
    """A value stored as one line of text: `encode` writes it, and `decode` reads it back or raises
    ValueError saying what is wrong with the text (the check names the key it was found under)."""

    def encode(self) -> str:
        raise NotImplementedError

    @classmethod
    def decode(cls, text: str) -> Self:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Stored:
    """How one field is stored, where that is not simply its type."""

    shape: Any = None  # the type the stored value is checked against, where it is stricter than the field's own
    rule: Callable[[Any], str | None] | None = None  # one more check of a value of the right shape: what is wrong
    joined: str | None = None  # a tuple of names stored as one string, joined by this
    omit_default: bool = False  # not written while it holds its default (older readers never knew the key)
    only_if: str | None = None  # written only while this other field of the record is true


def stored(**how: Any) -> dict[str, Stored]:
    """Field metadata: `field(default=..., metadata=stored(omit_default=True))`."""
    return {STORED: Stored(**how)}


def spec(f: dataclasses.Field[Any]) -> Stored | None:
    found = f.metadata.get(STORED)
    return found if isinstance(found, Stored) else None


def stored_hint(f: dataclasses.Field[Any], hint: Any) -> Any:
    """The type a field's stored value must have."""
    how = spec(f)
    if how is None:
        return hint
    return str if how.joined is not None else how.shape if how.shape is not None else hint

_PLAIN: dict[Any, type | tuple[type, ...]] = {str: str, int: int, float: (int, float), bool: bool}


def problems(hint: Any, value: Any, where: str = "") -> list[str]:
    """Every place `value` does not fit `hint`, as 'where: expected X, found Y'."""
    out: list[str] = []
    _check(hint, value, where, out)
    return out


def _name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), type(value).__name__)


def _check(hint: Any, value: Any, where: str, out: list[str]) -> None:
    if hint is Any or isinstance(hint, typing.TypeVar):
        return
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or origin is typing.Union:
        _check_union(args, value, where, out)
        return
    if origin is typing.Literal:
        if value not in args:
            out.append(f"{where or 'value'}: expected one of {', '.join(map(repr, args))}, found {value!r}")
        return
    if origin in (dict, typing.Mapping) or hint is dict:
        if not isinstance(value, dict):
            out.append(f"{where or 'value'}: expected an object, found {_name(value)}")
            return
        kt, vt = args or (Any, Any)
        for k, v in value.items():
            if kt is str and not isinstance(k, str):
                out.append(f"{where}: key {k!r} is not a string")
            _check(vt, v, f"{where}.{k}" if where else str(k), out)
        return
    if origin in (list, tuple, typing.Sequence) or hint in (list, tuple):
        if not isinstance(value, list):
            out.append(f"{where or 'value'}: expected a list, found {_name(value)}")
            return
        item = args[0] if args else Any
        for i, v in enumerate(value):
            _check(item, v, f"{where}[{i}]", out)
        return
    if isinstance(hint, type) and issubclass(hint, Textual):
        _check_text(hint, value, where, out)
        return
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        if value not in {m.value for m in hint}:
            out.append(f"{where}: expected one of {', '.join(repr(m.value) for m in hint)}, found {value!r}")
        return
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        _check_fields(hint, value, where, out)
        return
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            out.append(f"{where or 'value'}: expected an object, found {_name(value)}")
        return  # written by the probe; its own schema version guards its shape
    want = _PLAIN.get(hint)
    if want is not None:
        # bool is an int in Python; a count of `true` is as wrong as a count of "3"
        if not isinstance(value, want) or (hint is not bool and isinstance(value, bool)):
            out.append(f"{where or 'value'}: expected {_WANTED[hint]}, found {_name(value)} {_short(value)}")


def _check_text(hint: type[Textual], value: Any, where: str, out: list[str]) -> None:
    if not isinstance(value, str):
        out.append(f"{where or 'value'}: expected a string, found {_name(value)} {_short(value)}")
        return
    try:
        hint.decode(value)
    except ValueError as exc:
        out.append(f"{where or 'value'}: {exc}")


def _check_union(args: tuple[Any, ...], value: Any, where: str, out: list[str]) -> None:
    """`value` fits one of the options, or the problems of the option it came nearest to (the fewest)."""
    if value is None and type(None) in args:
        return
    options = [a for a in args if a is not type(None)]
    found: list[list[str]] = []
    for option in options:
        sub: list[str] = []
        _check(option, value, where, sub)
        if not sub:
            return
        found.append(sub)
    out.extend(sorted(found, key=len)[0])


def _check_fields(hint: type, value: Any, where: str, out: list[str]) -> None:
    """An object with each field of the dataclass `hint` that has no default, each field fitting its hint."""
    if not isinstance(value, dict):
        out.append(f"{where or 'value'}: expected an object, found {_name(value)}")
        return
    hints = typing.get_type_hints(hint)
    for f in dataclasses.fields(hint):
        if f.name in value:
            at = f"{where}.{f.name}" if where else f.name
            found: list[str] = []
            _check(stored_hint(f, hints[f.name]), value[f.name], at, found)
            how = spec(f)
            if not found and how is not None and how.rule is not None and (wrong := how.rule(value[f.name])):
                found.append(f"{at}: {wrong}")
            out.extend(found)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            out.append(f"{where + '.' if where else ''}{f.name}: missing")


_WANTED = {str: "a string", int: "an integer", float: "a number", bool: "true/false"}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
