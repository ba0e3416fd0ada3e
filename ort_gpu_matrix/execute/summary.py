"""pytest's own summary line (`4 failed, 5 passed, 1 skipped, 8 subtests passed in 0.04s`), read as a witness.

The terminal reporter counts apart from the probe and from junit: from the same reports, but in its own
categories (under pytest 9 a failing subtest is one `failed`, a passing one one `subtests passed`). Read
from the end of pytest's log; a log without the line (a run that died, `-p no:terminal`) gives none, and
then nothing is checked against it.
"""
from __future__ import annotations

import re
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LINE = re.compile(r"^=*\s*((?:\d+ [a-z ]+?)(?:, \d+ [a-z ]+?)*|no tests ran) in [0-9.]+s(?: \([^)]*\))?\s*=*$")
_PART = re.compile(r"^(\d+) ([a-z ]+)$")
_PLURAL = {"errors": "error", "warnings": "warning", "reruns": "rerun"}
TAIL_BYTES = 1 << 16  # the line is among the last ones pytest writes


def read(log: Path) -> dict[str, int] | None:
    """The counts of the last summary line in `log` ({"failed": 4, "passed": 5, "subtests passed": 8}), or None."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        m = _LINE.match(_ANSI.sub("", line).strip())
        if not m:
            continue
        counts: dict[str, int] = {}
        if m.group(1) != "no tests ran":
            for part in m.group(1).split(", "):
                n, word = _PART.match(part).groups()  # type: ignore[union-attr]  # _LINE admits only these
                counts[_PLURAL.get(word, word)] = int(n)
        return counts
    return None
