"""The one table a cell session prints after its modes."""
from __future__ import annotations

from ...config.kernels import short_tier
from ...store.results import Result
from ...util.escape import term
from .color import verdict


def _coverage(result: Result) -> str:
    cov = result.teeth_coverage
    if cov is None or not cov.checked:
        return ""
    return f"{short_tier(cov.tier)} tests {cov.tier_tests}, bitten {cov.bitten}, toothless {cov.toothless}"


def render(cell: str, results: list[Result], color: bool = False) -> str:
    rows = [("mode", "verdict", "passed", "failed", "skipped", "kernels", "reasons")]
    for r in results:
        c = r.counts
        kernels = ", ".join(f"{k} {n}" for k, n in r.dispatch.tests_per_tier.items()) or "-"
        notes = [term(n) for n in (*r.reasons, *(f"warning: {w}" for w in r.warnings))]
        cov = _coverage(r)
        if cov:
            notes.insert(0, cov)
        if c.subtests:  # apart from the tests that hold them, as pytest's summary counts them
            notes.insert(0, f"subtests: {c.subtests_passed} passed, {c.subtests_failed} failed, "
                            f"{c.subtests_skipped + c.subtests_xfailed} skipped")
        rows.append((r.mode, r.verdict.value.upper(), str(c.passed), str(c.failed + c.errors),
                     str(c.skipped), kernels, notes[0] if notes else "-"))
        rows += [("", "", "", "", "", "", n) for n in notes[1:]]
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    lines = [f"cell {cell}"]
    for row in rows:
        cols = [col.ljust(w) for col, w in zip(row[:6], widths, strict=True)]
        cols[1] = verdict(row[1], color) + " " * (widths[1] - len(row[1]))  # padded outside the colour codes
        lines.append("  ".join(cols) + "  " + row[6])
    failed = [r.mode for r in results if not r.passed]
    word = "FAIL" if failed else "PASS"
    tail = f" ({', '.join(failed)} failed)" if failed else ""
    lines.append(f"verdict {verdict(word, color)}: {cell}, {len(results)} mode(s){tail}")
    return "\n".join(lines)
