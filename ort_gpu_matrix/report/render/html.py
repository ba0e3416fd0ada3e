"""The sweep report as one self-contained HTML file: no network, colour-coded and readable without colour.

Rendered with Jinja2 and autoescaping on: test names, reasons and paths are untrusted text. Autoescape
does not judge a URL, so links are made here and only to files inside the dirs the report was built
from, as relative paths; anything else (`javascript:`, `data:`, `/etc/shadow`) is shown as text.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from ...compare.changes import Change, ChangeKind
from ...compare.grouping import group, shorten
from ...config.kernels import CUDNN, MATH, short_tier
from ...judge.outcomes import FAILING
from ...store.results import Result
from ..model import Report
from ..states import EXPECTED, LEGEND, UNEXPECTED, UNKNOWN, state
from ..tiertable import cell as tier_cell
from . import cpunodes, fallbacks, pollution, tiers
from .summary import (
    audit_line,
    cell_skew,
    cell_text,
    change_sections,
    clip,
    coverage_text,
    gate_text,
    hosts_text,
    modes_of,
    provenance_text,
    tiers_text,
    what_is_new,
)

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("ort_gpu_matrix.report.render", "templates"),
                          autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


@dataclass(frozen=True)
class Link:
    """A bundle file as the report shows it: `href` only when it is safe to follow."""

    text: str
    href: str | None
    warning: str | None = None


def link(path: str | None, out_dir: Path, roots: Sequence[Path]) -> Link | None:
    """A link to `path` only if it is an absolute path inside one of `roots` (after resolving links and
    `..`), written relative to the report's own dir; else the path as text, with why it is not a link."""
    if not path:
        return None
    if "\x00" in path or not os.path.isabs(path):
        return Link(path, None, "not linked: not an absolute file path")
    real = Path(os.path.realpath(path))
    for root in roots:
        base = Path(os.path.realpath(root))
        if real == base or base in real.parents:
            return Link(path, Path(os.path.relpath(real, os.path.realpath(out_dir))).as_posix())
    return Link(path, None, "not linked: outside the dirs this report was built from")




def _short(value: object) -> str:
    """A tier list as a grid cell shows it (`cuDNN, MATH`); an outcome as it is."""
    if isinstance(value, (list, tuple)):
        return ", ".join(short_tier(str(t)) for t in value)
    return str(value)


def _tier_class(tiers: Sequence[str], outcome: str, seen: str = UNEXPECTED) -> str:
    """The colour of a grid cell: the fastest tier it reached, red when it failed unexpectedly, pale and striped
    when it failed as expected, grey when nothing ran."""
    if outcome in FAILING:
        return "t-xfail" if seen == EXPECTED else "t-fail"
    if not tiers:
        return "t-none" if outcome != "skipped" else "t-skip"
    if CUDNN in tiers:
        return "t-cudnn"
    if MATH in tiers and len(set(tiers)) == 1:
        return "t-math"
    return "t-other"


def _grid(report: Report, modes: list[str]) -> tuple[list[tuple[str, str]], list[dict[str, object]], str]:
    """Tests x (cell, mode): each cell's tiers and outcome, and baseline -> now where it changed."""
    by_cell = report.cells()
    columns = [(c, m) for c, modes_here in by_cell.items() for m in modes if m in modes_here]
    before: dict[tuple[str, str, str | None], list[Change]] = {}
    if report.comparison is not None:
        for ch in report.comparison.regressions + report.comparison.improvements:
            if ch.test and ch.kind in (ChangeKind.TIER, ChangeKind.TEST):
                before.setdefault((ch.test, ch.cell, ch.mode), []).append(ch)
    names = sorted({t for c, m in columns for t in by_cell[c][m].outcomes})
    prefix, short = shorten(names)
    rows: list[dict[str, object]] = []
    for name, label in zip(names, short, strict=True):
        cells = []
        for c, m in columns:
            r: Result = by_cell[c][m]
            outcome = r.outcomes.get(name)
            if outcome is None:
                cells.append({"cls": "t-absent", "text": "", "changed": None})
                continue
            tiers = sorted(set(r.dispatch.tests.get(name, [])))
            changed = sorted(before.get((name, c, m), []), key=lambda x: x.kind != ChangeKind.TIER)  # the tier first
            was = "; ".join(f"{_short(x.before)} → {_short(x.after)}" for x in changed)
            seen, kind = state(r, name)
            mark = {EXPECTED: " s-expected", UNEXPECTED: " s-unexpected"}.get(seen, "")
            why = f"expected: {kind}" if kind else "unexpected" if seen == UNEXPECTED else \
                "not told apart (an older result)" if seen == UNKNOWN else ""
            cells.append({"cls": _tier_class(tiers, outcome, seen) + mark, "text": _short(tiers) or outcome,
                          "title": f"{', '.join(tiers) or 'no tier'} ({outcome}{'; ' + why if why else ''})",
                          "changed": was or None})
        rows.append({"name": name, "label": clip(label), "cells": cells,
                     "changed": any(cell["changed"] for cell in cells)})
    return columns, rows, prefix


def render(report: Report, out_dir: Path, roots: Sequence[Path] = ()) -> str:
    modes = modes_of(report)
    grid = report.cells()
    columns, rows, prefix = _grid(report, modes)
    tier_rows = tiers.table(report, tiers.HTML_ROWS)
    cpu = cpunodes.groups(report)
    sections = [(title, changes, group(changes)) for title, changes in change_sections(report)]
    return _ENV.get_template("report.html.j2").render(
        report=report, modes=modes, grid=grid, sections=sections, columns=columns, rows=rows, prefix=prefix,
        cell_text=cell_text, tiers_text=tiers_text, coverage_text=coverage_text, audit_line=audit_line,
        provenance_text=provenance_text, hosts_text=hosts_text, gate_text=gate_text(report), clip=clip, cell_skew=cell_skew,
        shorten=shorten, link=lambda p: link(p, out_dir, roots), pollution=pollution.rows(report),
        pollution_title=pollution.TITLE, pollution_shown=pollution.SHOWN, pollution_note=pollution.note(report),
        tier_table=tier_rows, tier_note=tiers.NOTE, tier_cell=tier_cell, tier_left_out=tiers.left_out,
        ep_note=tiers.EP_NOTE, ep_columns=tiers.EP_COLUMNS, fallback_groups=fallbacks.groups(report),
        fallback_title=fallbacks.TITLE, fallback_total=fallbacks.total(report), fallback_shown=fallbacks.SHOWN,
        fallback_more=fallbacks.more, cpu_groups=cpu, cpu_title=cpunodes.TITLE,
        cpu_total=cpunodes.total(report), cpu_shown=cpunodes.SHOWN, cpu_more=cpunodes.more, cpu_shape=cpunodes.SHAPE,
        cpu_empty=cpunodes.empty(cpu), cpu_unseen=cpunodes.unseen(report),
        legend=LEGEND, what_is_new=lambda g: what_is_new(report, g),
        told_apart=all(r.expected is not None for r in report.results))
