"""The tiers-by-function table in the terminal's and Markdown's words (HTML renders it in its template)."""
from __future__ import annotations

from ...compare.grouping import shorten
from ...util.escape import md
from ..model import Report
from ..tiertable import TierTable, cell, tier_table
from .summary import clip

ROWS = 40  # functions shown in the terminal and Markdown; HTML shows HTML_ROWS
HTML_ROWS = 200
TITLE = "Tiers by test function"
NOTE = ("cases of each function that dispatched each tier, in any cell's normal or require_cudnn run "
        "(teeth forces MATH and is left out); a mark: a tier rule was broken there")
EP_NOTE = ("CUDA runs: the runs the CUDA EP served; fallbacks: cases whose CUDA session another EP served (a mark: "
           "no allowed_fallbacks rule accepts it) and hollow passes (no CUDA run at all); ops on CPU: the op types "
           "whose nodes ran on another EP inside a session the CUDA EP served, shape ops (ORT's CPU-preferred nodes, "
           "not judged) only counted, `unknown` where no node census saw them")
EP_COLUMNS = ("CUDA runs", "fallbacks", "ops on CPU")


def table(report: Report, limit: int = ROWS) -> tuple[TierTable, str, list[str]]:
    """The table, the prefix every function shares (cut off), and each row's label."""
    t = tier_table(report.results, limit)
    prefix, labels = shorten([r.function for r in t.rows])
    return t, prefix, [clip(x) for x in labels]


def left_out(t: TierTable) -> str:
    return f"and {t.left_out} more function(s) that dispatched something (each result's census has every test)"


def terminal(report: Report) -> list[str]:
    t, prefix, labels = table(report)
    if t.empty:
        return []
    rows: list[tuple[str, ...]] = [("function", "cases", *t.tiers, *(EP_COLUMNS if t.ep else ()), "broken rule")]
    for row, label in zip(t.rows, labels, strict=True):
        rows.append((label, str(len(row.cases)), *(cell(row, x, "!") for x in t.tiers),
                     *(row.ep_cells("!") if t.ep else ()), "; ".join(clip(r, 120) for r in sorted(row.rules)) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = [f"\n{TITLE.lower()}" + (f" under {clip(prefix)}" if prefix else "") + f": {NOTE} (!)"
           + (f"; {EP_NOTE}" if t.ep else "")]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out + ([f"  {left_out(t)}"] if t.left_out else [])


def markdown(report: Report) -> list[str]:
    t, prefix, labels = table(report)
    if t.empty:
        return []
    heads = [*t.tiers, *(EP_COLUMNS if t.ep else ())]
    out = ["", f"## {TITLE}", "", md(NOTE[:1].upper() + NOTE[1:]) + " (✗)." + (f" {md(EP_NOTE[:1].upper() + EP_NOTE[1:])}."
                                                                             if t.ep else "")
           + (f" Functions under {md(clip(prefix))}." if prefix else ""), "",
           "| function | cases | " + "".join(f"{md(x)} | " for x in heads) + "broken rule |",
           "| --- | --- | " + "".join("--- | " for _ in heads) + "--- |"]
    for row, label in zip(t.rows, labels, strict=True):
        rules = md("; ".join(clip(r, 120) for r in sorted(row.rules))) or "-"
        values = [cell(row, x, "✗") for x in t.tiers] + list(row.ep_cells("✗") if t.ep else ())
        out.append(f"| {md(label)} | {len(row.cases)} | " + "".join(f"{md(v)} | " for v in values) + f"{rules} |")
    return out + (["", md(left_out(t))] if t.left_out else [])
