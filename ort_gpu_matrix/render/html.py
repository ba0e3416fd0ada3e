"""The sweep report as one self-contained HTML file: no network, colour-coded and readable without colour.

Rendered with Jinja2 and autoescaping on: test names, reasons and paths are untrusted text.
"""
from __future__ import annotations

from pathlib import Path

import jinja2

from ..report import Report
from .summary import (
    audit_line,
    cell_skew,
    cell_text,
    change_sections,
    coverage_text,
    hosts_text,
    modes_of,
    provenance_text,
    tiers_text,
)

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("ort_gpu_matrix.render", "templates"),
                          autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _href(path: str | None, out_dir: Path) -> str | None:
    """A link to a bundle file: relative when it sits under the report's dir, else a file URL."""
    if not path:
        return None
    p = Path(path)
    try:
        return p.relative_to(out_dir).as_posix()
    except ValueError:
        return p.as_uri() if p.is_absolute() else path


def render(report: Report, out_dir: Path) -> str:
    modes = modes_of(report)
    grid = report.cells()
    dispatch_cells = [f"{c} {m}" for c, by_mode in grid.items() for m in modes if m in by_mode]
    dispatch: dict[str, dict[str, str]] = {}
    for cell, by_mode in grid.items():
        for mode, r in by_mode.items():
            for test, outcome in r.outcomes.items():
                tiers = ", ".join(sorted(set(r.dispatch.tests.get(test, [])))) or "-"
                dispatch.setdefault(test, {})[f"{cell} {mode}"] = f"{tiers} ({outcome})"
    return _ENV.get_template("report.html.j2").render(
        report=report, modes=modes, grid=grid, sections=change_sections(report), dispatch=dict(sorted(dispatch.items())),
        dispatch_cells=dispatch_cells, cell_text=cell_text, tiers_text=tiers_text, coverage_text=coverage_text,
        audit_line=audit_line, cell_skew=cell_skew, provenance_text=provenance_text, hosts_text=hosts_text, href=lambda p: _href(p, out_dir))
