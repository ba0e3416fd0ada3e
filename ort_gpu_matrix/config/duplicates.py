"""Name the key or table a TOML file defines twice, with both lines.

tomllib stops at a duplicate with "Cannot overwrite a value (at end of document)" or a position
that is not the duplicate's line, and never names the key. This scan runs only after tomllib has
refused the file, so it reads just enough TOML to find the two lines: headers, and `key =` lines
outside multi-line strings and arrays.
"""
from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*\[(?!\[)\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ARRAY_HEADER = re.compile(r"^\s*\[\[\s*([^\[\]]+?)\s*\]\]\s*(#.*)?$")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')
_KEY = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=")


def _path(dotted: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in re.split(r"\.(?=(?:[^\"']|\"[^\"]*\"|'[^']*')*$)", dotted))


def duplicate(text: str) -> tuple[str, str, str] | None:
    """(key, problem, fix) for the first key or table defined twice, or None when there is none."""
    headers: dict[str, int] = {}
    keys: dict[str, int] = {}
    table = ""
    depth = 0  # open [ / { of a value that spans lines
    in_string: str | None = None
    array_scope = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string:
            if in_string in line:
                in_string = None
            continue
        if depth == 0:
            if _ARRAY_HEADER.match(line):
                array_scope += 1  # each [[x]] element is a scope of its own
                table = f"{_path(_ARRAY_HEADER.match(line).group(1))}#{array_scope}"  # type: ignore[union-attr]
                continue
            header = _HEADER.match(line)
            if header:
                table = _path(header.group(1))
                if table in headers:
                    return (table, f"[{table}] is declared twice (lines {headers[table]} and {number})",
                            "merge the two tables into one")
                headers[table] = number
                continue
            key = _KEY.match(line)
            if key:
                full = f"{table}.{_path(key.group(1))}" if table else _path(key.group(1))
                if full in keys:
                    shown = full.split("#")[0] if "#" in full else full
                    return (shown, f"is set twice (lines {keys[full]} and {number})", "keep one of the two lines")
                keys[full] = number
        value = line.split("=", 1)[1] if depth == 0 and _KEY.match(line) else line
        for quote in ('"""', "'''"):
            if value.count(quote) % 2 == 1:
                in_string = quote
        stripped = _STRINGS.sub("", value).split("#")[0]  # strings first, then comments
        depth = max(0, depth + stripped.count("[") + stripped.count("{") - stripped.count("]") - stripped.count("}"))
    return None
