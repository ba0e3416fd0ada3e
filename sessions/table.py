"""The one table a cell session prints after its modes."""
from __future__ import annotations

from typing import Any


def _coverage(result: dict[str, Any]) -> str:
    cov = result.get("teeth_coverage") or {}
    if not cov.get("checked"):
        return ""
    return f"cuDNN tests {cov['cudnn_tests']}, bitten {cov['bitten']}, toothless {cov['toothless']}"


def render(cell: str, results: list[dict[str, Any]]) -> str:
    rows = [("mode", "verdict", "passed", "failed", "skipped", "kernels", "reasons")]
    for r in results:
        c = r["counts"]
        kernels = ", ".join(f"{k} {n}" for k, n in r["dispatch"]["tests_per_tier"].items()) or "-"
        notes = [*r["reasons"], *(f"warning: {w}" for w in r["warnings"])]
        cov = _coverage(r)
        if cov:
            notes.insert(0, cov)
        rows.append((r["mode"], r["verdict"].upper(), str(c["passed"]), str(c["failed"] + c["errors"]),
                     str(c["skipped"]), kernels, notes[0] if notes else "-"))
        rows += [("", "", "", "", "", "", n) for n in notes[1:]]
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    lines = [f"cell {cell}"]
    for row in rows:
        lines.append("  ".join(col.ljust(w) for col, w in zip(row[:6], widths)) + "  " + row[6])
    return "\n".join(lines)
