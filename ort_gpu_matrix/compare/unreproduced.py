"""The report's side of confirmation: what did not reproduce, read from the results' own records.

drive/confirm.py reruns a sweep's regressed tests and stores, in each mode's Result, what every run gave.
A report (the sweep's, or `nox -s report` from result files later) reads those records: a change
some rerun did not reproduce is listed apart, with each run, and fails no gate; a change no record
says anything about is left where it is, so a report against another baseline never drops a
regression it was not told about.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..store.baseline import Baseline
from ..store.confirmation import Confirmation, TestRuns
from ..store.results import Result
from ..util import codec
from .changes import Change, ChangeKind, Comparison, LibsDiff

# the regression kinds a rerun confirms (drive/confirm.py), each by its check (a per-op ep change: `ep Relu`)
PER_TEST = (ChangeKind.TEST, ChangeKind.TIER, ChangeKind.EP)


@dataclass(frozen=True)
class Unconfirmed:
    """A test whose change did not reproduce: which checks, and what each run gave (the first run first)."""

    cell: str
    mode: str
    test: str
    checks: list[str]
    runs: list[str]

    def to_dict(self) -> dict[str, Any]:
        return codec.as_dict(self)

    def line(self) -> str:
        return f"{', '.join(self.checks)}: {self.cell} {self.mode} {self.test}: runs: {' | '.join(self.runs)}"


def records(results: list[Result]) -> dict[tuple[str, str], Confirmation]:
    return {(r.cell.name, r.mode): r.confirmation for r in results if r.confirmation is not None}


def listed(results: list[Result]) -> list[Unconfirmed]:
    """Every unconfirmed change of the sweep, by cell, mode and test (libs differences are with the libs)."""
    out = []
    for (cell, mode), rec in sorted(records(results).items()):
        for t in rec.tests:
            checks = [c for c in t.unconfirmed if c != "libs"]
            if checks:
                out.append(Unconfirmed(cell, mode, t.test, checks, list(t.runs)))
    return out


def filter_comparison(cmp: Comparison, results: list[Result], baseline: Baseline | None = None) -> None:
    """Per-test regressions a record says did not reproduce leave the regressions (they are `listed` apart),
    when the record was judged against the same baseline line as this comparison: against another baseline a
    rerun that "did not reproduce" says nothing (it may show this comparison's change in every run)."""
    recs = records(results)

    def same_baseline(c: Change, t: TestRuns) -> bool:
        if t.against is None:
            return True  # a record from before `against` was kept: as judged then
        record = baseline.cells.get(c.cell, {}).get(c.mode or "") if baseline is not None else None
        line = record.tests.get(c.test or "") if record is not None else None
        return bool(t.against == ("absent" if line is None else line.encode()))

    def unconfirmed(c: Change) -> bool:
        rec = recs.get((c.cell, c.mode or ""))
        t = rec.test(c.test) if rec is not None and c.test else None
        return t is not None and c.kind in PER_TEST and c.check in t.unconfirmed and same_baseline(c, t)

    cmp.regressions = [c for c in cmp.regressions if not unconfirmed(c)]


def filter_libs(diffs: list[LibsDiff], results: list[Result]) -> list[LibsDiff]:
    """A libs difference is named only when it reproduced on both sides; the others are listed apart."""
    recs = records(results)
    out = []
    for d in diffs:
        left, right = recs.get((d.cells[0], d.mode)), recs.get((d.cells[1], d.mode))
        kept, apart = [], list(d.unconfirmed)
        for test, a, b in d.tests:
            lt = left.test(test) if left else None
            rt = right.test(test) if right else None
            if any(t is not None and "libs" in t.unconfirmed for t in (lt, rt)):
                apart.append((test, lt.runs if lt else [a], rt.runs if rt else [b]))
            else:
                kept.append((test, a, b))
        out.append(dataclasses.replace(d, tests=kept, unconfirmed=apart))
    return out
