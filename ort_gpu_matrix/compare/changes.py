"""What changed between a baseline and a sweep, named by kind so that scripts can rely on it.

Cells are matched by session name: a release sweep keeps the cell names and swaps the ORT wheel.
Regression kinds (each fails the sweep):

    verdict   a mode verdict went pass -> fail
    test      a test that passed now fails, errors, skips, or is gone
    tier      the set of tiers a test dispatched changed (CUDNN_FLASH_ATTENTION -> MATH): the silent slowdown
    ep        a test that ran on the CUDA EP in the baseline no longer does, with the same outcome: the CPU
              served it, or it made no CUDA run (judge/eps.py); a pass on the CPU proves nothing of the GPU.
              Per op (`op` names it), where both sides carried a node census: an op that ran on the CUDA EP
              alone in the baseline now runs on another EP, in a test the CUDA EP still serves (epmoves.py)
    teeth     a test that was bitten in teeth is now toothless
    count     collected or passed dropped
    library   a by-name library now resolves to another file or version, or another cuDNN copy is mapped
    flaky     a test that was stable in the baseline needed a rerun to pass

A test that is new in the sweep and fails counts as a `test` regression too (new -> failed): under
`--gate regressions` a mode that was failing already must not hide a failure it did not have.

A known-flaky test (Result.known_flaky) that stays within the outcomes and tiers its rule lists
changes nothing, and a pass it lost within its set is no drop in `passed`. A per-test change that a
confirmation rerun did not reproduce leaves the regressions afterwards (unreproduced.py).

Improvements (listed, never failing): a verdict fail -> pass, a test that now passes (a known
failure fixed, or a new passing test), a test or an op that runs on the CUDA EP again, a toothless test now bitten, and
`stale-rule`: an expectation
of the new run that matched nothing (see add_stale_rules). A teeth run with nothing to cover is never
an improvement.

A baseline mode the sweep has no result for is one of:
    removed       its cell is no longer in the matrix
    not selected  --select left it out (listed, never failing)
    missing       the cell is in the matrix and was chosen, but did not run here (not runnable on this
                  host, a build that failed, an interrupted sweep): the gate fails on it unless
                  --allow-missing says it may
Cells or modes only the sweep has are listed as added.

A mode whose isolation (restore, report, off: pollution.py) differs from its baseline record's is
noted (kind `isolation`, never failing): with one side not isolated, its tier changes may be test
order, not the release.
"""
from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..judge.flaky import FlakySet, within
from ..judge.libraries import cuda_major
from ..judge.outcomes import FAILING
from ..judge.verdicts import Status
from ..store.baseline import Baseline, ModeRecord, TestLine
from ..store.results import Result
from ..util import codec
from ..util.codec import stored
from .epmoves import Seen, moves


class ChangeKind(enum.StrEnum):
    """What changed, as sweep.json names it (`kind`): scripts and `nox -s bisect` rely on these words."""

    VERDICT = "verdict"
    TEST = "test"
    TIER = "tier"
    EP = "ep"
    TEETH = "teeth"
    COUNT = "count"
    LIBRARY = "library"
    FLAKY = "flaky"
    STALE_RULE = "stale-rule"  # an improvement: an expectation of the new run matched nothing
    CELL = "cell"  # a mode only one side has: removed from the matrix, or added
    NOT_SELECTED = "not selected"
    MISSING = "missing"
    ISOLATION = "isolation"  # a note: the two sides ran under different isolation


REGRESSION_KINDS = (ChangeKind.VERDICT, ChangeKind.TEST, ChangeKind.TIER, ChangeKind.EP, ChangeKind.TEETH,
                    ChangeKind.COUNT, ChangeKind.LIBRARY, ChangeKind.FLAKY)
# what a change's before and after hold: an outcome, a verdict or a word (str), a count (int), tiers or library
# files (a list), or nothing on that side (None)
ChangeValue = str | int | list[str] | None


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    cell: str
    mode: str | None
    test: str | None  # the test; for count and library the counter or the key, for stale-rule the rule's pattern
    before: ChangeValue
    after: ChangeValue
    op: str | None = field(default=None, metadata=stored(omit_default=True))  # a per-op ep change: the op that moved

    def to_dict(self) -> dict[str, Any]:
        return codec.as_dict(self)

    @property
    def check(self) -> str:
        """What a confirmation rerun checks this change for (compare/suspects.py): its kind, and its op if it has one."""
        return self.kind if self.op is None else f"{self.kind} {self.op}"

    def line(self) -> str:
        where = " ".join(x for x in (self.cell, self.mode, self.test) if x)
        return f"{self.kind}: {where}: {f'{self.op}: ' if self.op else ''}{show(self.before)} -> {show(self.after)}"


def show(value: Any) -> str:
    """A before or after value as people read it: tier lists as `MATH, CUDNN_FLASH_ATTENTION`."""
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
    missing: list[Change] = field(default_factory=list)  # chosen, in the matrix, but not run: `after` says why
    not_selected: list[Change] = field(default_factory=list)
    notes: list[Change] = field(default_factory=list)  # isolation differs from the baseline's: never failing

    KEYS = ("regressions", "improvements", "added", "removed", "flaky", "missing", "not_selected", "notes")

    def to_dict(self) -> dict[str, list[dict[str, Any]]]:
        return codec.as_dict(self)


def test_changes(cell: str, mode: str | None, test: str, bt: TestLine | None,
                 at: TestLine | None, seen: Seen = Seen.NODES) -> tuple[list[Change], list[Change]]:
    """One test, baseline against now: its regressions (of kind test, tier and ep) and its improvements.
    `seen`: what both sides carried (a side from before the EP or node census knows nothing of EPs or ops)."""
    regressions, improvements = [], []
    if bt is not None and bt.outcome == "passed" and (at is None or at.outcome != "passed"):
        regressions.append(Change(ChangeKind.TEST, cell, mode, test, "passed", at.outcome if at else "gone"))
    elif bt is None and at is not None and at.outcome in FAILING:
        regressions.append(Change(ChangeKind.TEST, cell, mode, test, "new", at.outcome))
    elif bt is not None and bt.outcome not in FAILING and at is not None and at.outcome in FAILING:
        # skipped or xfailed before, failing now: in a mode that was failing already, nothing else would say so
        regressions.append(Change(ChangeKind.TEST, cell, mode, test, bt.outcome, at.outcome))
    elif at is not None and at.outcome == "passed" and (bt is None or bt.outcome != "passed"):
        improvements.append(Change(ChangeKind.TEST, cell, mode, test, bt.outcome if bt else "new", "passed"))
    if bt is not None and at is not None and set(bt.tiers) != set(at.tiers):
        regressions.append(Change(ChangeKind.TIER, cell, mode, test, list(bt.tiers), list(at.tiers)))
    if bt is not None and at is not None:
        worse, better = moves(bt, at, seen)
        regressions += [Change(ChangeKind.EP, cell, mode, test, b, a, op) for op, b, a in worse]
        improvements += [Change(ChangeKind.EP, cell, mode, test, b, a, op) for op, b, a in better]
    return regressions, improvements


def _in_set(allowed: FlakySet | None, line: TestLine | None) -> bool:
    return allowed is not None and line is not None and within(allowed, line.outcome, line.tiers)


def _tests(cmp: Comparison, cell: str, mode: str, b: ModeRecord, a: ModeRecord,
           flaky: Mapping[str, FlakySet] | None = None) -> None:
    scoped = b.teeth_scope != a.teeth_scope  # a scoped teeth ran only some tests: one missing there is not gone
    for test in sorted(set(b.tests) | set(a.tests)):
        bt, at = b.tests.get(test), a.tests.get(test)
        if scoped and at is None:
            continue  # left out by the scope on purpose; everything the run did hold is still compared
        if at is not None and at.reruns and at.outcome == "passed":
            was = "stable" if bt is None or not bt.reruns else f"{bt.reruns} rerun(s)"
            change = Change(ChangeKind.FLAKY, cell, mode, test, was, f"passed after {at.reruns} rerun(s)")
            cmp.flaky.append(change)
            if bt is not None and bt.outcome == "passed" and not bt.reruns:
                cmp.regressions.append(change)
        allowed = (flaky or {}).get(test)
        seen = Seen.NODES if b.node_census and a.node_census else Seen.EPS if b.ep_census and a.ep_census \
            else Seen.NOTHING
        regressions, improvements = test_changes(cell, mode, test, bt, at, seen)
        if _in_set(allowed, at) and (bt is None or _in_set(allowed, bt)):
            # known-flaky and within its rule: no outcome or tier change, but a move off the CUDA EP is still named
            regressions = [c for c in regressions if c.kind == ChangeKind.EP]
            improvements = [c for c in improvements if c.kind == ChangeKind.EP]
        cmp.regressions += regressions
        cmp.improvements += improvements


def _flaky_passes(counter: str, b: ModeRecord, a: ModeRecord, flaky: Mapping[str, FlakySet] | None) -> int:
    """Passes the baseline had that are now another outcome within a known_flaky set: no drop in `passed`."""
    if counter != "passed" or not flaky:
        return 0
    return sum(1 for test, allowed in flaky.items()
               if (bt := b.tests.get(test)) is not None and bt.outcome == "passed"
               and (at := a.tests.get(test)) is not None and at.outcome != "passed" and _in_set(allowed, at))


def _teeth(cmp: Comparison, cell: str, mode: str, b: ModeRecord, a: ModeRecord) -> None:
    if b.teeth and not a.teeth:  # coverage was checked before and is not now (a refused or census-less run)
        cmp.regressions.append(Change(ChangeKind.TEETH, cell, mode, None, "coverage checked", "coverage not checked"))
        return
    if not b.teeth or not a.teeth:
        return
    for test in sorted(set(b.teeth["bitten"]) & set(a.teeth["toothless"])):
        cmp.regressions.append(Change(ChangeKind.TEETH, cell, mode, test, "bitten", "toothless"))
    for test in sorted(set(b.teeth["toothless"]) & set(a.teeth["bitten"])):  # nothing bitten: nothing listed
        cmp.improvements.append(Change(ChangeKind.TEETH, cell, mode, test, "toothless", "bitten"))


def _library(cmp: Comparison, cell: str, mode: str, b: ModeRecord, a: ModeRecord) -> None:
    for key in ("cudnn_by_name", "cudart_by_name"):
        if b.library.get(key) and b.library.get(key) != a.library.get(key):
            cmp.regressions.append(Change(ChangeKind.LIBRARY, cell, mode, key, b.library.get(key), a.library.get(key)))
    new_copies = sorted(set(a.library.get("cudnn_copies", [])) - set(b.library.get("cudnn_copies", [])))
    if new_copies:
        cmp.regressions.append(Change(ChangeKind.LIBRARY, cell, mode, "cudnn_copies", b.library.get("cudnn_copies"),
                                      a.library.get("cudnn_copies")))


@dataclass(frozen=True)
class Scope:
    """What the sweep was asked to run, so a baseline mode without a result is told apart: removed from the
    matrix, left out by --select, or chosen but not run (and why)."""

    in_matrix: frozenset[str] = frozenset()  # every cell name of the matrix
    chosen: frozenset[tuple[str, str]] = frozenset()  # (cell, mode) the sweep was asked to run
    not_run: dict[str, str] = field(default_factory=dict)  # cell -> why it did not run (host, build, interrupt)


def _absent(cmp: Comparison, cell: str, mode: str, b: ModeRecord, scope: Scope | None) -> None:
    if scope is None or cell not in scope.in_matrix:
        cmp.removed.append(Change(ChangeKind.CELL, cell, mode, None, b.verdict, None))
    elif (cell, mode) not in scope.chosen:
        cmp.not_selected.append(Change(ChangeKind.NOT_SELECTED, cell, mode, None, b.verdict, "not selected"))
    else:
        why = scope.not_run.get(cell, "no result came back")
        cmp.missing.append(Change(ChangeKind.MISSING, cell, mode, None, b.verdict, f"did not run: {why}"))


def compare(before: Baseline, after: Baseline, scope: Scope | None = None,
            flaky: Mapping[tuple[str, str], Mapping[str, FlakySet]] | None = None) -> Comparison:
    """`flaky`: (cell, mode) -> node id -> the set its known_flaky rule lists (Result.known_flaky)."""
    cmp = Comparison()
    for cell in sorted(set(before.cells) | set(after.cells)):
        b_modes, a_modes = before.cells.get(cell, {}), after.cells.get(cell, {})
        for mode in sorted(set(b_modes) | set(a_modes)):
            b, a = b_modes.get(mode), a_modes.get(mode)
            if a is None:
                assert b is not None
                _absent(cmp, cell, mode, b, scope)
                continue
            if b is None:
                cmp.added.append(Change(ChangeKind.CELL, cell, mode, None, None, a.verdict))
                continue
            if b.isolation != a.isolation:
                cmp.notes.append(Change(ChangeKind.ISOLATION, cell, mode, None, b.isolation, a.isolation))
            if b.verdict == Status.PASS and a.verdict != Status.PASS:
                cmp.regressions.append(Change(ChangeKind.VERDICT, cell, mode, None, b.verdict, a.verdict))
            elif b.verdict != Status.PASS and a.verdict == Status.PASS:
                cmp.improvements.append(Change(ChangeKind.VERDICT, cell, mode, None, b.verdict, a.verdict))
            _tests(cmp, cell, mode, b, a, (flaky or {}).get((cell, mode)))
            _teeth(cmp, cell, mode, b, a)
            for counter in ("collected", "passed"):
                if a.teeth_scope != b.teeth_scope and (a.counts.get("collected", 0) or not b.counts.get("collected", 0)):
                    break  # a scoped teeth against an unscoped one: fewer tests by design, but never none at all
                if a.counts.get(counter, 0) + _flaky_passes(counter, b, a, (flaky or {}).get((cell, mode))) \
                        < b.counts.get(counter, 0):
                    # a hand-made record may leave a count out: it is read as 0 and shown as absent, `(none)`
                    cmp.regressions.append(Change(ChangeKind.COUNT, cell, mode, counter, b.counts.get(counter),
                                                  a.counts.get(counter)))
            _library(cmp, cell, mode, b, a)  # a provenance change alone is no regression: the report shows it
    order = {k: i for i, k in enumerate(REGRESSION_KINDS)}
    cmp.regressions.sort(key=lambda c: (order.get(c.kind, 99), c.cell, c.mode or "", c.test or ""))
    return cmp


def add_stale_rules(cmp: Comparison, results: Iterable[Result]) -> None:
    """Each expectation the new run found stale (judge/stale.py) is an improvement of kind `stale-rule`:
    the failure it accepted is gone, the toothless test bites, the skip no longer happens."""
    for r in sorted(results, key=lambda r: (r.cell.name, r.mode)):
        for s in r.stale_rules:
            cmp.improvements.append(Change(ChangeKind.STALE_RULE, r.cell.name, r.mode, s.pattern, s.key, s.kind))


@dataclass(frozen=True)
class LibsDiff:
    """Two cells that differ only in their libs set, or that run the same tests on two CUDA majors: the tests that
    behaved differently, and who served them."""

    mode: str
    cells: tuple[str, str]
    cudnn: tuple[list[str], list[str]]  # by-name cuDNN of each side
    tests: list[tuple[str, str, str]]  # (test, left "outcome tiers", right "outcome tiers")
    # differences that did not reproduce in the confirmation reruns: (test, left runs, right runs), listed apart
    unconfirmed: list[tuple[str, list[str], list[str]]] = field(default_factory=list)
    # across CUDA majors: each side's major, and the distinct CUDA stacks (runtime, cuBLAS, cuDNN) its test processes
    # mapped, labelled L1, L2... and R1...; `served`: for each listed test, the label of the stack that served it on
    # each side ("not audited" where its process was not); `spread`: how many tests each label served
    majors: tuple[int, int] | None = None
    stacks: tuple[list[list[str]], list[list[str]]] = field(default_factory=lambda: ([], []))
    served: dict[str, tuple[str, str]] = field(default_factory=dict)
    spread: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))

    def stack_rows(self) -> list[str]:
        """One line per stack of each side, in plain text (each renderer escapes it): `cell L1, 198 test(s): ...`."""
        rows = []
        for cell, side, stacks, spread in zip(self.cells, "LR", self.stacks, self.spread, strict=True):
            if not stacks:
                rows.append(f"{cell}: no CUDA library audited")
            for i, stack in enumerate(stacks, 1):
                rows.append(f"{cell} {side}{i}, {spread.get(f'{side}{i}', 0)} test(s): "
                            + ("; ".join(stack) or "no CUDA library mapped"))
            if spread.get(NOT_AUDITED):
                rows.append(f"{cell}: {spread[NOT_AUDITED]} test(s) ran in a process no audit came back from")
        return rows

    def served_text(self, test: str) -> str:
        """`served by L1 | R1`: the stack of each side that served the test."""
        left, right = self.served.get(test, (NOT_AUDITED, NOT_AUDITED))
        return f"served by {left} | {right}"


def libs_comparison(run: Baseline, ids: dict[str, dict[str, Any]]) -> list[LibsDiff]:
    """`ids`: cell name -> its python, ort, torch, libs and suite. Pairs every two cells equal but for libs, and
    every two cells of one python that run the same test files on ORT builds of two CUDA majors: a release
    engineer's CUDA 12 and CUDA 13 cells, whose ORT, torch and libs (and so suite, for its own expect file) all
    differ by design."""
    out = []
    names = sorted(run.cells)
    for i, left in enumerate(names):
        for right in names[i + 1:]:
            li, ri = ids.get(left), ids.get(right)
            if not li or not ri:
                continue
            only_libs = li["libs"] != ri["libs"] and all(li[k] == ri[k] for k in ("python", "ort", "torch", "suite"))
            if not only_libs and li["python"] != ri["python"]:
                continue
            for mode in sorted(set(run.cells[left]) & set(run.cells[right])):
                a, b = run.cells[left][mode], run.cells[right][mode]
                majors = None if only_libs else _two_majors(a, b)
                if not only_libs and majors is None:
                    continue
                diffs = _test_diffs(a, b)
                (ls, lof), (rs, rof) = _stacks(a, "L"), _stacks(b, "R")
                out.append(LibsDiff(mode, (left, right), (a.library.get("cudnn_by_name", []),
                                                          b.library.get("cudnn_by_name", [])), diffs,
                                    majors=majors, stacks=(ls, rs),
                                    served={t: (lof(t), rof(t)) for t, _, _ in diffs},
                                    spread=(_spread(a, lof), _spread(b, rof))))
    return out


NOT_AUDITED = "not audited"


def _stacks(record: ModeRecord, side: str) -> tuple[list[list[str]], Callable[[str], str]]:
    """A side's distinct CUDA stacks, and the label of the one that served a test (a record from before stacks
    were kept per process has the union of its processes' as its one stack)."""
    stacks = record.library.get("cuda_stacks") or ([record.library["cuda_stack"]] if record.library.get("cuda_stack")
                                                  else [])
    of: dict[str, int] = record.library.get("stack_of") or {}

    def label(test: str) -> str:
        if test not in record.tests:
            return "absent"
        if not stacks:
            return NOT_AUDITED
        if len(stacks) == 1:
            return f"{side}1"
        return f"{side}{of[test] + 1}" if test in of else NOT_AUDITED
    return stacks, label


def _spread(record: ModeRecord, label: Callable[[str], str]) -> dict[str, int]:
    return dict(sorted(Counter(label(t) for t in record.tests).items()))


def _two_majors(a: ModeRecord, b: ModeRecord) -> tuple[int, int] | None:
    """The CUDA majors of two records' ORT builds when they differ and both run the same test files, else None."""
    left, right = cuda_major(a.provenance.get("ort_cuda")), cuda_major(b.provenance.get("ort_cuda"))
    if left is None or right is None or left == right or _files(a) != _files(b):
        return None
    return left, right


def _files(record: ModeRecord) -> set[str]:
    """The test files a record's tests came from: two cells run the same tests when these agree (one test that
    fails to collect on one side is a difference to show, not a reason to stop comparing)."""
    return {t.split("::")[0] for t in record.tests}


def _test_diffs(a: ModeRecord, b: ModeRecord) -> list[tuple[str, str, str]]:
    """Each test whose outcome or tiers differ between two records: (test, left line, right line)."""
    diffs = []
    for test in sorted(set(a.tests) | set(b.tests)):
        ta, tb = a.tests.get(test), b.tests.get(test)
        sa = ta.encode() if ta else "(absent)"
        sb = tb.encode() if tb else "(absent)"
        if sa != sb:
            diffs.append((test, sa, sb))
    return diffs
