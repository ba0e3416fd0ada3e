"""pairing.include / pairing.exclude -> the pairings a matrix runs.

Without include, every combination of pythons x ort x torch x libs is a
pairing; exclude removes any pairing whose named axes all match.
"""
from __future__ import annotations

import itertools
import sys
from typing import Any

from .model import THIS_PYTHON, ExcludeEntry, IncludeEntry, Pairing, Settings
from .modes import MODES
from .reader import Reader

AXES = ("python", "ort", "torch", "libs")


def _candidates(r: Reader, p: dict[str, Any], declared: dict[str, tuple[str, ...]]) -> list[tuple[str, IncludeEntry]]:
    if "include" in p:
        if not isinstance(p["include"], list):
            r.bad("pairing.include", "must be a list of tables",
                  'include = [{ python = "3.12", ort = "...", torch = "...", libs = "..." }]')
            return []
        out = []
        for i, raw in enumerate(p["include"]):
            key = f"pairing.include[{i}]"
            entry = r.entry(raw, key, IncludeEntry)
            if entry.python is not None:
                r.python(f"{key}.python", entry.python)
            out.append((key, entry))
        return out
    for axis in AXES:
        if not declared[axis]:
            where = "matrix.pythons" if axis == "python" else f"[{axis}.<id>]"
            r.bad(where, f"no {axis} declared, so the matrix has no pairings", f"declare at least one {axis}")
    combos = itertools.product(*(declared[a] for a in AXES))
    return [(f"pairing (combination {n})", IncludeEntry(python, ort, torch, libs))
            for n, (python, ort, torch, libs) in enumerate(combos)]


def _declared(r: Reader, key: str, ident: str, axis: str, valid: tuple[str, ...]) -> None:
    """An id another entry points at: one of the [axis.<id>] tables, or a message naming it."""
    known = ", ".join(valid) or "(none declared)"
    r.choice(key, ident, valid, f"a declared {axis} id", f"declare [{axis}.{ident}] or use one of: {known}",
             lambda near: f'write "{near}", or declare [{axis}.{ident}]')


def expand(r: Reader, data: dict[str, Any], s: Settings, ids: dict[str, tuple[str, ...]],
           suites: tuple[str, ...]) -> tuple[Pairing, ...]:
    p = r.table(data.get("pairing", {}), "pairing", {"include", "exclude"})
    declared = {"python": s.pythons, **ids}
    exclude_raw = p.get("exclude", [])
    if not isinstance(exclude_raw, list):
        r.bad("pairing.exclude", "must be a list of tables", 'exclude = [{ libs = "cu118" }]')
        exclude_raw = []
    exclude = [r.entry(e, f"pairing.exclude[{i}]", ExcludeEntry) for i, e in enumerate(exclude_raw)]
    out = []
    for i, ex in enumerate(exclude):  # an id nothing declares would silently exclude nothing
        for axis, valid in (*((a, declared[a]) for a in AXES[1:]), ("suite", suites)):
            ident = getattr(ex, axis)
            if ident is not None:
                _declared(r, f"pairing.exclude[{i}].{axis}", ident, axis, valid)
    for key, entry in _candidates(r, p, declared):
        for axis in AXES[1:]:
            ident = getattr(entry, axis)
            if ident is not None:
                _declared(r, f"{key}.{axis}", ident, axis, declared[axis])
        suite = entry.suite if entry.suite is not None else s.suite
        if suite is None:
            r.bad(f"{key}.suite", "the pairing has no suite", 'set [matrix] suite = "<id>" or give the entry suite = "<id>"')
        else:
            _declared(r, f"{key}.suite" if entry.suite is not None else "matrix.suite", suite, "suite", suites)
        if entry.modes is not None:
            if not entry.modes:
                r.bad(f"{key}.modes", "is empty: the pairing would run nothing", 'modes = ["normal"]')
            known = [r.choice(f"{key}.modes[{i}]", m, MODES, "a mode", f"use some of: {', '.join(MODES)}")
                     for i, m in enumerate(entry.modes)]
            modes = entry.modes if entry.modes and all(known) else MODES
        else:  # a wrong matrix.modes is reported once, by the loader
            modes = s.modes if s.modes and all(m in MODES for m in s.modes) else MODES
        full = {"python": entry.python, "ort": entry.ort, "torch": entry.torch, "libs": entry.libs, "suite": suite}
        if any(all(getattr(ex, k) in (None, full[k]) for k in full) for ex in exclude):
            continue
        if entry.python and entry.ort and entry.torch and entry.libs and suite is not None:
            python = f"{sys.version_info[0]}.{sys.version_info[1]}" if entry.python == THIS_PYTHON else entry.python
            out.append(Pairing(python, entry.ort, entry.torch, entry.libs, suite, tuple(modes), key))
    if not out and not r.problems:
        r.bad("pairing", "no pairing is left after exclude", "loosen pairing.exclude or add pairing.include entries")
    return tuple(out)
