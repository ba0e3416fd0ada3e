"""The pollution section every report form shows: one line per polluter (or per file of many), per mode run.

Shared here so the terminal, Markdown and HTML say the same thing; each form escapes the lines
itself (they hold test ids and variable values from the code under test), and each line is
clipped, so a crafted 1 MB value cannot make a 1 MB report.
"""
from __future__ import annotations

from ...judge.pollution import lines
from ..model import Report
from .summary import clip

TITLE = "Pollution (process state tests changed and did not undo)"
SHOWN = 40  # lines shown per form before "and N more" (every one is in the result files)


def rows(report: Report) -> list[tuple[str, str, str]]:
    """(session, isolation, line) for the polluters of every result, in session order (many tests of one file
    that left the same variables share a line: pollution.lines)."""
    out = []
    for r in sorted(report.results, key=lambda r: r.session):
        out += [(r.session, r.isolation, clip(line)) for line in lines(r.pollution)]
    return out


def note(report: Report) -> str | None:
    """What isolation the runs had, when any was not the default: tiers may then depend on test order."""
    loose = sorted({r.isolation for r in report.results} - {"restore"})
    return f"isolation {', '.join(loose)} in some runs: their tiers may depend on test order" if loose else None
