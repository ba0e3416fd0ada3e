"""The sweep report for the terminal: a cell x mode grid, then what changed, then the libs comparison."""
from __future__ import annotations

from ...compare.grouping import group
from ...store.results import Result
from ...util.escape import term
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


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _grid(report: Report, modes: list[str], grid: dict[str, dict[str, Result]]) -> list[str]:
    rows: list[tuple[str, ...]] = [("cell", "host", *modes, "tests per tier (require_cudnn, else normal)", "teeth")]
    for cell, by_mode in grid.items():
        ref = by_mode.get("require_cudnn") or by_mode.get("normal") or next(iter(by_mode.values()))
        teeth = by_mode.get("teeth")
        rows.append((cell, hosts_text(by_mode), *(cell_text(by_mode.get(m)) for m in modes), tiers_text(ref),
                     coverage_text(teeth) if teeth else "-"))
    return ["sweep: verdict passed/failed/skipped per cell and mode", *_table(rows),
            *(f"  {ln}" for ln in legend(report)), ""]


def _libraries(report: Report, grid: dict[str, dict[str, Result]]) -> list[str]:
    lines = []
    for cell, by_mode in grid.items():
        lines.append(f"  {cell}: {audit_line(list(by_mode.values()))}")
        lines += [f"  {cell}: version skew: {s}" for s in [cell_skew(by_mode)] if s]
        if cell in report.provenance_changes:
            before, after = report.provenance_changes[cell]
            lines.append(f"  {cell}: ORT {before} -> {after}")
    return lines


def _not_run(report: Report) -> list[str]:
    lines = [f"  {cell}: not run here: {why}" for cell, why in report.skipped.items()]
    lines += [f"  {cell}: could not run: {why}" for cell, why in report.errors.items()]
    if report.comparison is None:
        lines.append("\nno baseline given: nothing compared")
    return lines


def _changes(report: Report) -> list[str]:
    lines = []
    for title, changes in change_sections(report):
        lines.append(f"\n{title} ({len(changes)})" + (":" if changes else ""))
        for g in group(changes):
            lines.append(f"  [{g.headline()}]")
            lines += [f"  {new}" for new in [what_is_new(report, g)] if new and title == "Regressions"]
            lines += [f"  {clip(c.line())}" for c in g.changes[:LISTED]]
            if g.rows > LISTED:
                lines.append(f"  and {g.rows - LISTED} more (every row is in sweep.json)")
    return lines


def _listed_apart(report: Report) -> list[str]:
    """What did not reproduce, and under --gate regressions what failed in the baseline too."""
    lines = []
    if report.unconfirmed:
        lines.append(f"\nnot reproduced ({len(report.unconfirmed)}), listed apart, failing no gate:")
        lines += [f"  {clip(u.line())}" for u in report.unconfirmed[:LISTED]]
        if len(report.unconfirmed) > LISTED:
            lines.append(f"  and {len(report.unconfirmed) - LISTED} more (every row is in sweep.json)")
    if report.gate == "regressions" and report.already_failing:
        lines.append(f"\nalready failing in the baseline ({len(report.already_failing)}), listed, not failing:")
        lines += [f"  {r.session}: {clip('; '.join(r.reasons))}" for r in report.already_failing]
    return lines


def _fallbacks_and_pollution(report: Report) -> list[str]:
    lines = [f"\n{fallbacks.TITLE} ({fallbacks.total(report)})" + (":" if fallbacks.total(report) else "")]
    for fg in fallbacks.groups(report):
        lines.append(f"  {fg.heading}")
        lines += [f"    {t}" for t in fg.tests[:fallbacks.SHOWN]] + [f"    {m}" for m in [fallbacks.more(fg)] if m]
    lines += _cpu_nodes(report)
    found = pollution.rows(report)
    lines.append(f"\n{pollution.TITLE} ({len(found)})" + (":" if found else ""))
    lines += [f"  {session}: {line}" for session, _, line in found[:pollution.SHOWN]]
    if len(found) > pollution.SHOWN:
        lines.append(f"  and {len(found) - pollution.SHOWN} more (every one is in the result files)")
    return lines + [f"  {n}" for n in [pollution.note(report)] if n]


def _cpu_nodes(report: Report) -> list[str]:
    found = cpunodes.groups(report)
    lines = [f"\n{cpunodes.TITLE} ({cpunodes.total(report)})" + (":" if found else "")]
    lines += [f"  {e}" for e in [cpunodes.empty(found)] if e]
    for g in found:
        lines.append(f"  {g.heading}")
        lines += [f"    {t}" for t in g.nodes[:cpunodes.SHOWN]] + [f"    {m}" for m in [cpunodes.more(g)] if m]
    return lines + [f"  {n}" for n in [cpunodes.unseen(report)] if n]


def _libs_comparison(report: Report) -> list[str]:
    lines = ["\nlibs comparison (cells that differ only in their libs, or run the same tests on two CUDA majors)"]
    if not report.libs:
        lines.append("  no two cells differ only in their libs, or run the same tests on two CUDA majors")
    for d in report.libs:
        left, right = d.cells
        if d.majors:
            left, right = f"{left} (CUDA {d.majors[0]})", f"{right} (CUDA {d.majors[1]})"
        head = f"  {left} vs {right}, {d.mode}: cuDNN {'; '.join(d.cudnn[0]) or 'not resolved'} vs {'; '.join(d.cudnn[1]) or 'not resolved'}"
        lines.append(head)
        if d.majors:
            lines += [f"    {row}" for row in d.stack_rows()]
        lines += [f"    {clip(t)}: {a} | {b}" + (f" ({d.served_text(t)})" if d.majors else "")
                  for t, a, b in d.tests[:LISTED]] or ["    every test had the same outcome and tiers"]
        if len(d.tests) > LISTED:
            lines.append(f"    and {len(d.tests) - LISTED} more")
        if d.unconfirmed:
            lines.append(f"    not reproduced ({len(d.unconfirmed)}), not named as differences:")
            lines += [f"      {clip(t)}: {' | '.join(a)} vs {' | '.join(b)}" for t, a, b in d.unconfirmed[:LISTED]]
    return lines


def _verdict(report: Report) -> list[str]:
    verdict = "OK" if report.ok else "FAILED"
    return [f"\n{gate_text(report)}",
            f"sweep {verdict}: {len(report.failed)} failing mode(s), "
            f"{len(report.comparison.regressions) if report.comparison else 0} regression(s)"]


def render(report: Report) -> str:
    """The grid and each cell's libraries, the tiers, what did not run, what changed and what is listed apart,
    fallbacks, CPU nodes and pollution, the libs comparison, then the verdict under the gate."""
    modes = modes_of(report)
    grid = report.cells()
    lines = _grid(report, modes, grid) + _libraries(report, grid) + tiers.terminal(report) + _not_run(report)
    lines += _changes(report) + _listed_apart(report) + _fallbacks_and_pollution(report)
    lines += _libs_comparison(report) + _verdict(report)
    # every line may hold a test id, a reason or a path from the code under test: no ESC, OSC, BEL or \r
    return "\n".join(term(line) for line in "\n".join(lines).split("\n"))
