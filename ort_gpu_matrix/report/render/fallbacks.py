"""The Fallbacks section every report form shows: each CUDA-asking session another EP served, grouped by
ORT's reason, so one missing library that sent a hundred tests to the CPU reads as one line of cause.

Shared here so the terminal, Markdown and HTML say the same thing; each form escapes what it shows (the
reasons are ORT's text and the node ids come from the code under test), and every line is clipped.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...judge.eps import KIND_TEXT
from ..model import Report
from .summary import clip

TITLE = "Fallbacks (tests that asked for the CUDA EP and were served by another)"
SHOWN = 8  # tests listed under each reason before "and N more" (every one is in the result files)


@dataclass(frozen=True)
class FallbackGroup:
    """The tests that fell back one way for one reason of ORT's: one line of cause in the Fallbacks section."""

    kind: str  # how it fell back (judge/eps.py, KIND_TEXT)
    reason: str  # ORT's words, clipped
    tests: list[str]  # "session test: asked -> served", sorted, clipped
    unallowed: int  # how many of them no allowed_fallbacks rule accepts

    @property
    def heading(self) -> str:
        allowed = len(self.tests) - self.unallowed
        note = f", {allowed} allowed by a rule" if allowed else ""
        return f"{len(self.tests)} ({KIND_TEXT.get(self.kind, self.kind)}{note}): {self.reason}"


def groups(report: Report) -> list[FallbackGroup]:
    """One group per (kind, ORT's reason), the largest first."""
    found: dict[tuple[str, str], list[tuple[str, bool]]] = {}
    for r in sorted(report.results, key=lambda r: r.session):
        for f in r.ep.fallbacks:
            line = (f"{r.session} {f.nodeid}: {', '.join(f.asked)} -> {', '.join(f.served) or 'nothing'}"
                    + (f" (allowed by {f.allowed_by!r})" if f.allowed_by is not None else ""))
            found.setdefault((f.kind, clip(f.reason or "no reason given")), []).append((clip(line), f.allowed_by is None))
    out = [FallbackGroup(kind, reason, sorted(t for t, _ in items), sum(1 for _, bad in items if bad))
           for (kind, reason), items in found.items()]
    return sorted(out, key=lambda g: (-g.unallowed, -len(g.tests), g.kind, g.reason))


def total(report: Report) -> int:
    return sum(len(r.ep.fallbacks) for r in report.results)


def more(g: FallbackGroup) -> str | None:
    return f"and {len(g.tests) - SHOWN} more (every one is in the result files)" if len(g.tests) > SHOWN else None
