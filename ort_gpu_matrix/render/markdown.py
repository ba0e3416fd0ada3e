"""The sweep report as Markdown, for a PR comment, a release checklist or GITHUB_STEP_SUMMARY.

Test names and reasons are untrusted text: table cells escape `|`, backticks and HTML-ish `<`.
"""
from __future__ import annotations

from ..report import Report
from .summary import audit_line, cell_skew, cell_text, change_sections, coverage_text, hosts_text, modes_of, tiers_text


def esc(text: object) -> str:
    """Safe inside a Markdown table cell: no column breaks, no code spans, no raw HTML, one line."""
    out = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    return out.replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def render(report: Report) -> str:
    modes = modes_of(report)
    out = [f"# ort-gpu-matrix sweep: {'OK' if report.ok else 'FAILED'}", ""]
    if report.comparison is not None:
        out.append(f"Compared with baseline `{esc(report.baseline_name)}`: "
                   f"{len(report.comparison.regressions)} regression(s), {len(report.comparison.improvements)} improvement(s).")
    else:
        out.append("No baseline given.")
    for title, changes in change_sections(report)[:1]:
        out += ["", f"## {title}", ""]
        out += (["| kind | cell | mode | test | before | after |", "| --- | --- | --- | --- | --- | --- |"] +
                [f"| {c.kind} | {esc(c.cell)} | {esc(c.mode or '')} | {esc(c.test or '')} | {esc(c.before)} | {esc(c.after)} |"
                 for c in changes]) if changes else ["None."]
    out += ["", "## Grid", "", "| cell | host | " + " | ".join(modes) + " | tests per tier | teeth |",
            "| --- | --- | " + " | ".join("---" for _ in modes) + " | --- | --- |"]
    grid = report.cells()
    for cell, by_mode in grid.items():
        ref = by_mode.get("require_cudnn") or by_mode.get("normal") or next(iter(by_mode.values()))
        teeth = by_mode.get("teeth")
        skewed = cell_skew(by_mode)  # beside the cell: its tests are from another release than its wheel
        label = f"{cell} (version skew: {skewed})" if skewed else cell
        out.append(f"| {esc(label)} | {esc(hosts_text(by_mode))} | " + " | ".join(cell_text(by_mode.get(m)) for m in modes)
                   + f" | {esc(tiers_text(ref))} | {esc(coverage_text(teeth)) if teeth else '-'} |")
    out += ["", "## Libraries", ""]
    out += [f"- **{esc(cell)}**: {esc(audit_line(list(by_mode.values())))}" for cell, by_mode in grid.items()]
    out += [f"- **{esc(cell)}**: ORT {esc(b)} → {esc(a)}" for cell, (b, a) in report.provenance_changes.items()]
    out += [f"- **{esc(cell)}**: not run here: {esc(why)}" for cell, why in report.skipped.items()]
    for title, changes in change_sections(report)[1:]:
        if changes:
            out += ["", f"## {title}", ""] + [f"- {c.kind}: {esc(c.line())}" for c in changes]
    out += ["", "## Libs comparison", ""]
    if not report.libs:
        out.append("No two cells differ only in their libs.")
    for d in report.libs:
        out.append(f"- **{esc(d.cells[0])}** vs **{esc(d.cells[1])}** ({d.mode}), cuDNN "
                   f"{esc('; '.join(d.cudnn[0]) or 'not resolved')} vs {esc('; '.join(d.cudnn[1]) or 'not resolved')}: "
                   + (f"{len(d.tests)} test(s) differ" if d.tests else "every test had the same outcome and tiers"))
        out += [f"  - `{esc(t)}`: {esc(a)} vs {esc(b)}" for t, a, b in d.tests]
    failing = [(r.session, r.reasons) for r in report.failed]
    if failing:
        out += ["", "## Failing modes", ""]
        for session, reasons in failing:
            out.append(f"- **{esc(session)}**: " + "; ".join(esc(x) for x in reasons))
    return "\n".join(out) + "\n"
