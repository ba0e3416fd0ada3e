"""The Reader: one key's value checked against the model, every problem collected instead of the first.

Its own module so that the loader and the parts it delegates to (pairings.py) both import it, and
neither imports the other back: data flows one way, loader -> pairings -> reader -> model.
"""
from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..util.errors import Problem
from ..util.escape import term
from .model import ID_PATTERN, PYTHON_PATTERN, keys_of
from .model import THIS_PYTHON as THIS

T = TypeVar("T")
TOP = "(top level)"


def shown(value: str) -> str:
    """A value as a message quotes it: `norml`, or its repr when it is empty or holds a backtick or a
    character a terminal would act on (the message stays one line of plain text)."""
    return f"`{value}`" if value and term(value) == value and "`" not in value else repr(value)


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
            elif isinstance(raw, list) and s.minimum is not None and len(value) < s.minimum:
                example = s.example or '["..."]'
                self.bad(k, f"is empty: it needs at least {s.minimum} item(s)", f"write {s.name} = {example} ({s.doc})")
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

    def choice(self, key: str, value: str, valid: Sequence[str], what: str, fix: str,
               write: Callable[[str], str] = lambda near: f'write "{near}"') -> bool:
        """A value from a closed set. When it is not one, the message names it and offers the nearest
        valid one (`write(near)` is then the fix), else `fix` (which lists the valid ones)."""
        if value in valid:
            return True
        near = [v for v in valid if v.casefold() == value.casefold()] or difflib.get_close_matches(value, list(valid), n=1)
        if near:
            self.bad(key, f"{shown(value)} is not {what} (did you mean `{near[0]}`?)", write(near[0]))
        else:
            self.bad(key, f"{shown(value)} is not {what}", fix)
        return False

    def python(self, key: str, version: str) -> None:
        if re.fullmatch(PYTHON_PATTERN, version):
            return
        # 3.12.1, 3.13t, py3.12, python3.12: the X.Y in it; This, thsi: "this"
        xy = re.fullmatch(r"(?:py(?:thon)?)?\s*([0-9]+\.[0-9]+)(?![0-9]).*", version.strip(), re.IGNORECASE)
        near = xy.group(1) if xy else next(iter(difflib.get_close_matches(version.lower(), [THIS], n=1)), None)
        if near:
            self.bad(key, f"{shown(version)} is not a python version (did you mean `{near}`?)", f'write "{near}"')
        else:
            self.bad(key, f"{shown(version)} is not a python version",
                     'write X.Y, such as "3.12", or "this" (the python running nox)')

    def one_form(self, body: dict[str, Any], key: str, forms: tuple[tuple[str, ...], ...]) -> None:
        present = ["/".join(f) for f in forms if any(k in body for k in f)]
        if len(present) != 1:
            names = ", ".join("/".join(f) for f in forms)
            found = f"found {', '.join(present)}" if present else "found none"
            self.bad(key, f"needs exactly one of {names} ({found})", f"keep one of: {names}")
