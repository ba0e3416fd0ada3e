"""What changed between a baseline and a sweep, named by kind so that scripts can rely on it.

Cells are matched by session name: a release sweep keeps the cell names and swaps the ORT wheel.
Regression kinds (each fails the sweep):

    verdict   a mode verdict went pass -> fail
    test      a test that passed now fails, errors, skips, or is gone
    tier      the set of tiers a test dispatched changed (CUDNN_FLASH_ATTENTION -> MATH): the silent slowdown
    teeth     a test that was bitten in teeth is now toothless
    count     collected or passed dropped
    library   a by-name library now resolves to another file or version, or another cuDNN copy is mapped
    flaky     a test that was stable in the baseline needed a rerun to pass

Improvements (listed, never failing): a verdict fail -> pass, a test that now passes (a known
failure fixed, or a new passing test), a toothless test now bitten. Cells or modes on one side only
are listed as added or removed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .baseline import Baseline, ModeRecord

REGRESSION_KINDS = ("verdict", "test", "tier", "teeth", "count", "library", "flaky")


@dataclass(frozen=True)
class Change:
    kind: str
    cell: str
    mode: str | None
    test: str | None
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        where = " ".join(x for x in (self.cell, self.mode, self.test) if x)
        return f"{self.kind}: {where}: {_show(self.before)} -> {_show(self.after)}"


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "(no tier)"
    return str(value)


@dataclass
class Comparison:
    regressions: list[Change] = field(default_factory=list)
    improvements: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    removed: list[Change] = field(default_factory=list)
    flaky: list[Change] = field(default_factory=list)  # every test that needed a rerun now, regression or not

    def to_dict(self) -> dict[str, list[dict[str, Any]]]:
        return {k: [c.to_dict() for c in getattr(self, k)]
                for k in ("regressions", "improvements", "added", "removed", "flaky")}


def _tests(cmp: Comparison, cell: str, mode: str, b: ModeRecord, a: ModeRecord) -> None:
    both = b.teeth_scope != a.teeth_scope  # a scoped teeth ran only some tests: one missing there is not gone
    for test in sorted(set(b.tests) & set(a.tests) if both else set(b.tests) | set(a.tests)):
        bt, at = b.tests.get(test), a.tests.get(test)
        if at is not None and at.reruns and at.outcome == "passed":
            change = Change("flaky", cell, mode, test, "stable" if bt is None or not bt.reruns else f"{bt.reruns} rerun(s)",
                            f"passed after {at.reruns} rerun(s)")
            cmp.flaky.append(change)
            if bt is not None and bt.outcome == "passed" and not bt.reruns:
                cmp.regressions.append(change)
        if bt is not None and bt.outcome == "passed" and (at is None or at.outcome != "passed"):
            cmp.regressions.append(Change("test", cell, mode, test, "passed", at.outcome if at else "gone"))
        elif at is not None and at.outcome == "passed" and (bt is None or bt.outcome != "passed"):
            cmp.improvements.append(Change("test", cell, mode, test, bt.outcome if bt else "new", "passed"))
        if bt is not None and at is not None and set(bt.tiers) != set(at.tiers):
            cmp.regressions.append(Change("tier", cell, mode, test, list(bt.tiers), list(at.tiers)))


def _teeth(cmp: Comparison, cell: str, mode: str, b: ModeRecord, a: ModeRecord) -> None:
    if not b.teeth or not a.teeth:
        return
    for test in sorted(set(b.teeth["bitten"]) & set(a.teeth["toothless"])):
        cmp.regressions.append(Change("teeth", cell, mode, test, "bitten", "toothless"))
    for test in sorted(set(b.teeth["toothless"]) & set(a.teeth["bitten"])):
        cmp.improvements.append(Change("teeth", cell, mode, test, "toothless", "bitten"))


def _library(cmp: Comparison, cell: str, mode: str, b: ModeRecord, a: ModeRecord) -> None:
    for key in ("cudnn_by_name", "cudart_by_name"):
        if b.library.get(key) and b.library.get(key) != a.library.get(key):
            cmp.regressions.append(Change("library", cell, mode, key, b.library.get(key), a.library.get(key)))
    new_copies = sorted(set(a.library.get("cudnn_copies", [])) - set(b.library.get("cudnn_copies", [])))
    if new_copies:
        cmp.regressions.append(Change("library", cell, mode, "cudnn_copies", b.library.get("cudnn_copies"),
                                      a.library.get("cudnn_copies")))


def compare(before: Baseline, after: Baseline) -> Comparison:
    cmp = Comparison()
    for cell in sorted(set(before.cells) | set(after.cells)):
        b_modes, a_modes = before.cells.get(cell, {}), after.cells.get(cell, {})
        for mode in sorted(set(b_modes) | set(a_modes)):
            b, a = b_modes.get(mode), a_modes.get(mode)
            if a is None:
                cmp.removed.append(Change("cell", cell, mode, None, b.verdict if b else None, None))
                continue
            if b is None:
                cmp.added.append(Change("cell", cell, mode, None, None, a.verdict))
                continue
            if b.verdict == "pass" and a.verdict != "pass":
                cmp.regressions.append(Change("verdict", cell, mode, None, b.verdict, a.verdict))
            elif b.verdict != "pass" and a.verdict == "pass":
                cmp.improvements.append(Change("verdict", cell, mode, None, b.verdict, a.verdict))
            _tests(cmp, cell, mode, b, a)
            _teeth(cmp, cell, mode, b, a)
            for counter in ("collected", "passed"):
                if a.teeth_scope != b.teeth_scope:
                    break  # a scoped teeth against an unscoped one: fewer tests by design, never a count regression
                if a.counts.get(counter, 0) < b.counts.get(counter, 0):
                    cmp.regressions.append(Change("count", cell, mode, counter, b.counts[counter], a.counts[counter]))
            _library(cmp, cell, mode, b, a)  # a provenance change alone is no regression: the report shows it
    order = {k: i for i, k in enumerate(REGRESSION_KINDS)}
    cmp.regressions.sort(key=lambda c: (order.get(c.kind, 99), c.cell, c.mode or "", c.test or ""))
    return cmp


@dataclass(frozen=True)
class LibsDiff:
    """Two cells that differ only in their libs set: the tests that behaved differently, and who served them."""

    mode: str
    cells: tuple[str, str]
    cudnn: tuple[list[str], list[str]]  # by-name cuDNN of each side
    tests: list[tuple[str, str, str]]  # (test, left "outcome tiers", right "outcome tiers")


def libs_comparison(run: Baseline, ids: dict[str, dict[str, str]]) -> list[LibsDiff]:
    """`ids`: cell name -> its python, ort, torch, libs and suite. Pairs every two cells equal but for libs."""
    out = []
    names = sorted(run.cells)
    for i, left in enumerate(names):
        for right in names[i + 1:]:
            li, ri = ids.get(left), ids.get(right)
            if not li or not ri or li["libs"] == ri["libs"]:
                continue
            if any(li[k] != ri[k] for k in ("python", "ort", "torch", "suite")):
                continue
            for mode in sorted(set(run.cells[left]) & set(run.cells[right])):
                a, b = run.cells[left][mode], run.cells[right][mode]
                diffs = []
                for test in sorted(set(a.tests) | set(b.tests)):
                    ta, tb = a.tests.get(test), b.tests.get(test)
                    sa = ta.encode() if ta else "(absent)"
                    sb = tb.encode() if tb else "(absent)"
                    if sa != sb:
                        diffs.append((test, sa, sb))
                out.append(LibsDiff(mode, (left, right), (a.library.get("cudnn_by_name", []),
                                                          b.library.get("cudnn_by_name", [])), diffs))
    return out
