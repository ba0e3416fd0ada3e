"""The lines every report form shares: one per cell and mode, one audit line per cell, the changes."""
from __future__ import annotations

from ...compare.changes import Change, ChangeKind
from ...compare.grouping import ChangeGroup
from ...config.kernels import short_tier
from ...host.ortsource import skew
from ...judge.outcomes import FAILING
from ...store.baseline import library_summary
from ...store.results import Result
from ..model import Report
from ..states import EXPECTED, LEGEND, UNEXPECTED, UNKNOWN, counts_text, state, tally_text

MODE_ORDER = ("normal", "require_cudnn", "teeth")
LISTED = 20  # tests listed under a group, in Markdown and the terminal, before "and N more"
CLIP = 300  # characters of one untrusted item (a test id, a reason) a report shows


def clip(text: str, limit: int = CLIP) -> str:
    """One item kept readable and bounded: a crafted 1 MB test id must not make a report of 1 MB."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def gate_text(report: Report) -> str:
    """Which gate applied and what it decided, in one line."""
    why = report.why_failed()
    head = f"gate {report.gate}: {'OK' if not why else 'FAILED: ' + '; '.join(why)}"
    if report.gate == "regressions" and report.already_failing:
        head += f" ({len(report.already_failing)} mode(s) already failing in the baseline, listed apart)"
    if report.allow_missing and report.comparison and report.comparison.missing:
        head += f" ({len(report.comparison.missing)} baseline mode(s) did not run, allowed by --allow-missing)"
    return head


def modes_of(report: Report) -> list[str]:
    seen = {r.mode for r in report.results}
    return [m for m in MODE_ORDER if m in seen]


def cell_text(r: Result | None) -> str:
    """`PASS 14/0/0` (passed/failed+errors/skipped), `FAIL 7/7/0` (`, subtests 9/2/1` where any ran), or `-` when
    the mode did not run."""
    if r is None:
        return "-"
    told = tally_text(r)
    return f"{r.verdict.value.upper()} {counts_text(r)}" + (f" ({told})" if told else "") + selection_text(r)


def selection_text(r: Result) -> str:
    """` [ran 8 of 13, 5 carried]` where a mode run carried outcomes from normal, ` [ran 71, 127 left out]` where
    a teeth left tests out (drive/carry.py, knowncut.py); nothing where every test ran."""
    sel = r.selection
    if sel is None or sel.full:
        return ""
    if sel.carried:
        return f" [ran {max(r.counts.collected - len(sel.carried), 0)} of {r.counts.collected}, {len(sel.carried)} carried]"
    return f" [ran {r.counts.collected}, {len(sel.left_out)} left out]" if sel.left_out else ""


def legend(report: Report) -> list[str]:
    """What the grid's words mean: which outcomes were expected, which were not."""
    lines = ["counts are passed/failed/skipped; in brackets, the failures, skips, toothless tests and "
             "tier-rule breaks by kind:",
             "  " + LEGEND[UNEXPECTED], "  " + LEGEND[EXPECTED]]
    if any(r.selection is not None and not r.selection.full for r in report.results):
        lines.append("  [ran N of M, K carried]: the K outcomes are normal's, carried because the census of reads says "
                     "those tests cannot change in this mode; [ran N, K left out]: teeth left out tests no run on "
                     "record saw dispatch its tier; each result's `selection` names them and the runs")
    if any(r.expected is None for r in report.results):
        lines.append("  " + LEGEND[UNKNOWN])
    return lines


def what_is_new(report: Report, g: ChangeGroup) -> str | None:
    """For a regression group without tests of its own (a verdict, a count): which tests of its runs are new
    since the baseline, and how many failing ones are not new (already failing, still expected)."""
    if g.tests or not g.places:
        return None
    cmp = report.comparison
    results = {(r.cell.name, r.mode): r for r in report.results}
    new: list[str] = []
    kept = 0
    for cell, mode in g.places:
        moved = {c.test for c in (cmp.regressions if cmp else []) if c.cell == cell and c.mode == mode and c.test
                 and c.kind in (ChangeKind.TEST, ChangeKind.TIER, ChangeKind.TEETH)}
        new += sorted(moved)
        r = results.get((cell, mode))
        if r is not None:
            kept += sum(1 for t, o in r.outcomes.items() if t not in moved and o in FAILING
                        and state(r, t)[0] == EXPECTED)
    listed = "; ".join(clip(t, 120) for t in new[:5]) + (f"; and {len(new) - 5} more" if len(new) > 5 else "")
    head = f"new since the baseline: {len(new)} test(s)" + (f" ({listed})" if new else "")
    return head + (f"; {kept} failing test(s) already failing and still expected, not new" if kept else "")


def hosts_text(by_mode: dict[str, Result]) -> str:
    """The host(s) a cell's modes ran on: results merged from several runners keep theirs."""
    return ", ".join(sorted({r.host or "?" for r in by_mode.values()}))


def tiers_text(r: Result) -> str:
    return ", ".join(f"{k} {n}" for k, n in r.dispatch.tests_per_tier.items()) or "no tier"


def coverage_text(r: Result) -> str:
    cov = r.teeth_coverage
    if cov is None:
        return ""
    if not cov.checked:
        return "coverage not checked"
    return f"{short_tier(cov.tier)} {cov.tier_tests}, bitten {cov.bitten}, toothless {cov.toothless}"


def audit_line(results: list[Result]) -> str:
    """One line per cell: what a by-name cuDNN load resolved to, and every cuDNN copy mapped."""
    lib = library_summary(results[0])
    by_name = "; ".join(lib.get("cudnn_by_name", [])) or "not resolved"
    copies = len(lib.get("cudnn_copies", []))
    pinned = lib["pinned"].get("cudnn") or "nothing pinned"
    return f"cuDNN by name: {by_name} ({copies} cop{'y' if copies == 1 else 'ies'} mapped; pinned: {pinned})"


def provenance_text(r: Result) -> str:
    p = r.provenance
    ort = f"{p.ort['distribution']} {p.ort['version']}" if p.ort else "ORT unknown"
    torch = f"torch {p.torch['version']}" if p.torch else "no torch"
    return f"{ort}, {torch}, python {p.python}, host {r.host or '?'}"


def skew_text(result: Result) -> str | None:
    """`tests from 1.33.0 (abc1234) against wheel 1.31.1` when the tests' ORT release is another major.minor."""
    return skew(result.provenance.source, result.provenance.wheel_version)


def cell_skew(by_mode: dict[str, Result]) -> str | None:
    """The skew of a cell: the first of its modes' (they share the tree and the wheel)."""
    return next((s for r in by_mode.values() if (s := skew_text(r))), None)


def change_sections(report: Report) -> list[tuple[str, list[Change]]]:
    cmp = report.comparison
    if cmp is None:
        return []
    return [("Regressions", cmp.regressions), ("Did not run (in the baseline, chosen, no result)", cmp.missing),
            ("Improvements", cmp.improvements), ("Added", cmp.added), ("Removed from the matrix", cmp.removed),
            ("Not selected", cmp.not_selected), ("Flaky (needed a rerun)", cmp.flaky),
            ("Isolation differs from the baseline (tier changes may be test order; not a regression)", cmp.notes)]
