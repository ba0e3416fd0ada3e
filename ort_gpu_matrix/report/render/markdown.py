"""The sweep report as Markdown, for a PR comment, a release checklist or GITHUB_STEP_SUMMARY.

Every piece of untrusted text goes through escape.md. Changes are grouped (grouping.py) and each
group lists at most LISTED tests, so the report stays small however much changed: GitHub refuses a
step summary over 1 MiB, and a sweep with 10,000 regressions must still say what happened.
sweep.json keeps every row.
"""
from __future__ import annotations

from ...compare.changes import Change
from ...compare.grouping import ChangeGroup, group, shorten
from ...store.results import Result
from ...util.escape import md as esc
from ..model import Report
from . import cpunodes, fallbacks, pollution, tiers
from .summary import (
    LISTED,
    audit_line,
    cell_skew,
    cell_text,
    change_sections,
    clip,
    coverage_text,
    gate_text,
    hosts_text,
    legend,
    modes_of,
    tiers_text,
    what_is_new,
)

GROUPS = 40  # groups shown per section before "and N more groups"
ROWS = 50  # failing modes, libs differences and the like


def _group(g: ChangeGroup, new: str | None = None) -> list[str]:
    out = [f"- **{esc(g.headline())}**", f"  - cells: {esc(', '.join(g.cells))}"]
    if new:
        out.append(f"  - {esc(new)}")
    if g.tests:
        names = sorted(g.tests)
        prefix, rest = shorten(names)
        if prefix:
            out.append(f"  - tests under `{esc(clip(prefix))}`:")
        for name, short in list(zip(names, rest, strict=True))[:LISTED]:
            where = "" if g.everywhere(name) else " (" + esc(", ".join(f"{c} {m}" for c, m in g.tests[name])) + ")"
            out.append(f"    - {esc(clip(short))}{where}")
        if len(names) > LISTED:
            out.append(f"    - and {len(names) - LISTED} more (every row is in sweep.json)")
    else:
        out.append("  - where: " + esc(", ".join(f"{c} {m}".strip() for c, m in g.places[:ROWS]))
                   + (f", and {len(g.places) - ROWS} more" if len(g.places) > ROWS else ""))
    return out


def _section(title: str, changes: list[Change], always: bool = False, report: Report | None = None) -> list[str]:
    if not changes and not always:
        return []
    out = ["", f"## {title} ({len(changes)})", ""]
    if not changes:
        return out + ["None."]
    groups = group(changes)
    for g in groups[:GROUPS]:
        out += _group(g, what_is_new(report, g) if report is not None else None)
    if len(groups) > GROUPS:
        out.append(f"- and {len(groups) - GROUPS} more group(s) (every row is in sweep.json)")
    return out


def _head(report: Report) -> list[str]:
    out = [f"# ort-gpu-matrix sweep: {'OK' if report.ok else 'FAILED'}", "", esc(gate_text(report)), ""]
    if report.comparison is not None:
        out.append(f"Compared with baseline `{esc(report.baseline_name)}`: "
                   f"{len(report.comparison.regressions)} regression(s), {len(report.comparison.improvements)} improvement(s).")
    else:
        out.append("No baseline given.")
    return out


def _unconfirmed(report: Report) -> list[str]:
    if not report.unconfirmed:
        return []
    out = ["", f"## Not reproduced ({len(report.unconfirmed)})", "",
           "Changes a confirmation rerun did not reproduce: listed apart, failing no gate. Runs: the first, "
           "then each rerun.", ""]
    out += [f"- **{esc(u.cell)} {esc(u.mode)}** `{esc(clip(u.test))}` ({esc(', '.join(u.checks))}): "
            f"{esc(clip(' | '.join(u.runs)))}" for u in report.unconfirmed[:ROWS]]
    if len(report.unconfirmed) > ROWS:
        out.append(f"- and {len(report.unconfirmed) - ROWS} more (every row is in sweep.json)")
    return out


def _already_failing(report: Report) -> list[str]:
    if not (report.gate == "regressions" and report.already_failing):
        return []
    out = ["", f"## Already failing in the baseline ({len(report.already_failing)})", "",
           "These modes failed in the baseline too; `--gate regressions` lists them without failing.", ""]
    return out + [f"- **{esc(r.session)}**: " + esc(clip("; ".join(r.reasons))) for r in report.already_failing[:ROWS]]


def _grid(report: Report, modes: list[str], grid: dict[str, dict[str, Result]]) -> list[str]:
    out = ["", "## Grid", "", "| cell | host | " + " | ".join(modes) + " | tests per tier | teeth |",
           "| --- | --- | " + " | ".join("---" for _ in modes) + " | --- | --- |"]
    for cell, by_mode in grid.items():
        ref = by_mode.get("require_cudnn") or by_mode.get("normal") or next(iter(by_mode.values()))
        teeth = by_mode.get("teeth")
        skewed = cell_skew(by_mode)  # beside the cell: its tests are from another release than its wheel
        label = f"{cell} (version skew: {skewed})" if skewed else cell
        out.append(f"| {esc(label)} | {esc(hosts_text(by_mode))} | " + " | ".join(esc(cell_text(by_mode.get(m))) for m in modes)
                   + f" | {esc(tiers_text(ref))} | {esc(coverage_text(teeth)) if teeth else '-'} |")
    return out + ["", *(esc(ln) for ln in legend(report))]


def _libraries(report: Report, grid: dict[str, dict[str, Result]]) -> list[str]:
    out = ["", "## Libraries", ""]
    out += [f"- **{esc(cell)}**: {esc(audit_line(list(by_mode.values())))}" for cell, by_mode in grid.items()]
    out += [f"- **{esc(cell)}**: ORT {esc(b)} → {esc(a)}" for cell, (b, a) in report.provenance_changes.items()]
    out += [f"- **{esc(cell)}**: not run here: {esc(why)}" for cell, why in report.skipped.items()]
    return out + [f"- **{esc(cell)}**: could not run: {esc(clip(why))}" for cell, why in report.errors.items()]


def _fallbacks(report: Report) -> list[str]:
    out = ["", f"## {fallbacks.TITLE} ({fallbacks.total(report)})", ""]
    for fg in fallbacks.groups(report):
        out += [f"- {esc(fg.heading)}"] + [f"  - {esc(t)}" for t in fg.tests[:fallbacks.SHOWN]]
        out += [f"  - {esc(m)}" for m in [fallbacks.more(fg)] if m]
    if not fallbacks.total(report):
        out.append("None.")
    return out


def _cpu_nodes(report: Report) -> list[str]:
    found = cpunodes.groups(report)
    out = ["", f"## {cpunodes.TITLE} ({cpunodes.total(report)})", ""]
    out += [esc(e) for e in [cpunodes.empty(found)] if e]
    for g in found:
        out += [f"- {esc(g.heading)}"] + [f"  - {esc(t)}" for t in g.nodes[:cpunodes.SHOWN]]
        out += [f"  - {esc(m)}" for m in [cpunodes.more(g)] if m]
    return out + [f"\n{esc(n[:1].upper() + n[1:])}." for n in [cpunodes.unseen(report)] if n]


def _pollution(report: Report) -> list[str]:
    found = pollution.rows(report)
    out = ["", f"## {pollution.TITLE} ({len(found)})", ""]
    out += [f"- **{esc(session)}**: {esc(line)}" for session, _, line in found[:pollution.SHOWN]] or ["None."]
    if len(found) > pollution.SHOWN:
        out.append(f"- and {len(found) - pollution.SHOWN} more (every one is in the result files)")
    return out + [f"\n{esc(n)}" for n in [pollution.note(report)] if n]


def _libs_comparison(report: Report) -> list[str]:
    out = ["", "## Libs comparison", ""]
    if not report.libs:
        out.append("No two cells differ only in their libs, or run the same tests on two CUDA majors.")
    for d in report.libs:
        majors = (f" (CUDA {d.majors[0]})", f" (CUDA {d.majors[1]})") if d.majors else ("", "")
        out.append(f"- **{esc(d.cells[0])}**{majors[0]} vs **{esc(d.cells[1])}**{majors[1]} ({esc(d.mode)}), cuDNN "
                   f"{esc('; '.join(d.cudnn[0]) or 'not resolved')} vs {esc('; '.join(d.cudnn[1]) or 'not resolved')}: "
                   + (f"{len(d.tests)} test(s) differ" if d.tests else "every test had the same outcome and tiers"))
        if d.majors:
            out += [f"  - {esc(row)}" for row in d.stack_rows()]
        out += [f"  - {esc(clip(t))}: {esc(a)} vs {esc(b)}" + (f" ({esc(d.served_text(t))})" if d.majors else "")
                for t, a, b in d.tests[:LISTED]]
        if len(d.tests) > LISTED:
            out.append(f"  - and {len(d.tests) - LISTED} more")
        if d.unconfirmed:
            out.append(f"  - not reproduced ({len(d.unconfirmed)}), not named as differences:")
            out += [f"    - {esc(clip(t))}: {esc(' | '.join(a))} vs {esc(' | '.join(b))}"
                    for t, a, b in d.unconfirmed[:LISTED]]
    return out


def _failing(report: Report) -> list[str]:
    failing = report.failed if report.gate == "all" else report.new_failures
    if not failing:
        return []
    out = ["", "## Failing modes", ""]
    out += [f"- **{esc(r.session)}**: " + esc(clip("; ".join(r.reasons))) for r in failing[:ROWS]]
    if len(failing) > ROWS:
        out.append(f"- and {len(failing) - ROWS} more")
    return out


def render(report: Report) -> str:
    """The report's sections in order: the head, the regressions, what did not reproduce or already failed,
    the grid, tiers and libraries, the other changes, fallbacks, CPU nodes, pollution, the libs comparison, failing modes."""
    modes = modes_of(report)
    out = _head(report)
    sections = change_sections(report)
    for title, changes in sections[:1]:
        out += _section(title, changes, always=True, report=report)
    out += _unconfirmed(report) + _already_failing(report)
    grid = report.cells()
    out += _grid(report, modes, grid) + tiers.markdown(report) + _libraries(report, grid)
    for title, changes in sections[1:]:
        out += _section(title, changes)
    out += _fallbacks(report) + _cpu_nodes(report) + _pollution(report) + _libs_comparison(report) + _failing(report)
    return "\n".join(out) + "\n"
