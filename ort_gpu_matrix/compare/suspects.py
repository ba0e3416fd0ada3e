"""A regression counts only once it reproduces: what a sweep reruns to confirm it, and what a rerun shows.

As Bazel's --flaky_test_attempts and Chromium's retries of unexpected results do, every test that
regressed against the baseline in outcome (`test`), tier (`tier`) or EP (`ep`), every test whose
CUDA session fell back unallowed (`fallback`), every test whose failure is
unexpected (not in known_failures or known_flaky, not the canary's bite: `unexpected`, with or
without a baseline), and every test the libs comparison names (`libs`) is a suspect of its mode
until it reproduces. Confirmation (drive/confirm.py) reruns the suspects; this module only decides,
from stored results and the reruns' tests, so it starts nothing. A check is confirmed when every
rerun reproduced it:

    test        the rerun's outcome is again a regression against the baseline (changes.test_changes)
    tier        the rerun's tiers again differ from the baseline's
    unexpected  the rerun fails again, and again unexpectedly
    fallback    the rerun's CUDA-asking session is again served by another EP, and no allowed_fallbacks rule
                accepts it (judge/eps.py); `ep`, a test no longer served by the CUDA EP, is confirmed as `test` is
    ep OP       a per-op ep change (the op ran on the CUDA EP alone in the baseline, on another EP now) is checked
                per test and op, and cleared only by a rerun whose node census shows the op on the CUDA EP alone
                again: one where it did not run, or was not seen, shows nothing went away
    libs        the rerun gave exactly what the first run gave (a side that changes is not a difference)

A rerun whose witnesses disagree, or whose audit fails, reproduces everything (it can clear
nothing), and so does one in which the test did not run: only evidence that the change went away
makes it unconfirmed. A test with a check that did not reproduce is judged by the first rerun that
did not reproduce it and showed no change of its own (its outcome, tiers and message).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from ort_matrix_probe.schema import ProbeReport

from ..config.model import TeethExpect
from ..judge.counts import TestResult
from ..judge.covers import rule_covers
from ..judge.eps import test_eps, unallowed_fallback
from ..judge.flaky import within
from ..judge.nodes import node_runs
from ..judge.outcomes import FAILING, bites
from ..judge.verdicts import tests_of
from ..plan.cells import Cell
from ..store.baseline import Baseline, ModeRecord, TestLine, ops_by_ep
from ..store.confirmation import Confirmation, Rerun, TestRuns
from ..store.results import Result
from .changes import ChangeKind, compare, libs_comparison, test_changes
from .epmoves import back_on_cuda
from .unreproduced import PER_TEST


@dataclass
class Suspects:
    """One mode result under confirmation: what each of its tests is checked for, and what the reruns gave."""

    cell: Cell
    result: Result
    report: ProbeReport
    tests: dict[str, TestResult]
    checks: dict[str, set[str]] = field(default_factory=dict)
    baseline: dict[str, TestLine | None] = field(default_factory=dict)
    runs: dict[str, list[str]] = field(default_factory=dict)
    cleared: dict[str, set[str]] = field(default_factory=dict)
    substitute: dict[str, TestResult] = field(default_factory=dict)
    reruns: list[Rerun] = field(default_factory=list)
    record: ModeRecord | None = None  # the baseline's record of this mode, None without one

    def add(self, test: str, check: str) -> None:
        self.checks.setdefault(test, set()).add(check)

    def pending(self) -> list[str]:
        """Tests with a check no rerun has failed to reproduce yet."""
        return sorted(t for t, c in self.checks.items() if c - self.cleared.get(t, set()))

    def weigh(self, selected: list[str], got: dict[str, TestResult], problems: list[str]) -> None:
        """What one rerun of `selected` showed: each test's line kept, and each check it did not reproduce cleared
        (none where the rerun has `problems`: an untrusted rerun clears nothing)."""
        for test in selected:
            again = got.get(test)
            self.runs[test].append(_show(_line(again)))
            if problems:
                continue
            for check in sorted(self.checks[test] - self.cleared.get(test, set())):
                if not _reproduces(self, test, check, again):
                    self.cleared.setdefault(test, set()).add(check)
                    if check != "libs" and again is not None and _clean(self, test, again):
                        self.substitute.setdefault(test, again)

    def confirmation(self, n: int) -> Confirmation:
        """The record the result keeps: the first run's verdict, reasons and counts, each rerun, each test's runs."""
        r = self.result
        return Confirmation(n, r.verdict, list(r.reasons), r.counts, self.reruns,
                            [TestRuns(t, sorted(c), self.runs[t], sorted(self.cleared.get(t, set())),
                                      None if self.record is None else _show(self.record.tests.get(t)))
                             for t, c in sorted(self.checks.items())])


def _line(t: TestResult | None) -> TestLine | None:
    return None if t is None else TestLine(t.outcome, tuple(sorted(set(t.sdpa))), eps=test_eps(t),
                                           ops=ops_by_ep(node_runs(t)))


def _show(line: TestLine | None) -> str:
    return "absent" if line is None else line.encode()


def unexpected(cell: Cell, mode: str, t: TestResult, flaky: dict[str, dict[str, list[str]]]) -> bool:
    """A failure the mode's expectations do not accept: not known, not known-flaky in its set, not the canary's bite."""
    if t.outcome not in FAILING:
        return False
    expect = cell.suite.expect[mode]
    if any(rule_covers(r, t.nodeid) for r in expect.known_failures):
        return False
    if t.nodeid in flaky and within(flaky[t.nodeid], t.outcome, t.sdpa):
        return False
    return not (isinstance(expect, TeethExpect) and bites(t.outcome, t.message, expect.canary))


def _read(path: Path) -> ProbeReport | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return cast(ProbeReport, data) if isinstance(data, dict) and isinstance(data.get("tests"), dict) else None


def _report(result: Result) -> ProbeReport | None:
    """The run's probe report, with the entries of the tests it carried (drive/carry.py) taken from the report of
    the run they came from: a carried test is confirmed, and judged again, as one of the run's own."""
    if result.stopped or not result.report:
        return None
    report = _read(Path(result.report))
    sel = result.selection
    if report is None or sel is None or not sel.carried or not sel.carried_from or not result.bundle:
        return report
    session, _, run_id = sel.carried_from.partition(" ")
    source = _read(Path(result.bundle).parent.parent / session / run_id / "report.json")
    if source is None:
        return None  # its carried outcomes cannot be read back: nothing a rerun could clear
    carried = {n: e for n, e in source["tests"].items() if n in set(sel.carried)}
    own = max(report.get("collected", {}).values(), default=len(report["tests"]))
    return cast(ProbeReport, {**report, "tests": {**report["tests"], **carried},
                              "collected": {"with the carried": own + len(carried)}})


def suspects(cells: Mapping[str, Cell], results: list[Result], before: Baseline | None) -> list[Suspects]:
    """Every mode result of `cells` with something to confirm, and what: regressions, unexpected failures, libs
    differences."""
    raw = Baseline.of(results)
    flaky = {(r.cell.name, r.mode): r.known_flaky for r in results if r.known_flaky}
    first = compare(before, raw, None, flaky) if before is not None else None
    out: dict[tuple[str, str], Suspects] = {}
    for r in results:
        if r.cell.name not in cells:
            continue
        report = _report(r)
        if report is None:
            continue  # a run stopped or without a report: nothing a rerun could clear
        cell = cells[r.cell.name]
        tests = {t.nodeid: t for t in tests_of(report)}
        m = out[(r.cell.name, r.mode)] = Suspects(cell, r, report, tests)
        for t in tests.values():
            if unexpected(cell, r.mode, t, r.known_flaky):
                m.add(t.nodeid, "unexpected")
            if unallowed_fallback(cell.suite.expect[r.mode], t):
                m.add(t.nodeid, "fallback")
        if first is not None:
            record = m.record = before.cells.get(r.cell.name, {}).get(r.mode) if before is not None else None
            for c in first.regressions:
                if (c.cell, c.mode) == (r.cell.name, r.mode) and c.kind in PER_TEST and c.test:
                    m.add(c.test, c.check)  # a per-op ep change is checked per op: `ep Relu`
                    m.baseline[c.test] = record.tests.get(c.test) if record is not None else None
    _libs(out, raw, results)
    for m in out.values():
        m.runs = {t: [_show(_line(m.tests.get(t)))] for t in m.checks}
    return [m for m in out.values() if m.checks]


def _libs(out: dict[tuple[str, str], Suspects], raw: Baseline, results: Sequence[Result]) -> None:
    """Each test the libs comparison names, a suspect on both of its sides."""
    ids = {r.cell.name: {"python": r.cell.python, "ort": r.cell.ort, "torch": r.cell.torch, "libs": r.cell.libs,
                         "suite": r.cell.suite} for r in results}
    for d in libs_comparison(raw, ids):
        for test, _, _ in d.tests:
            for side in d.cells:
                if (side, d.mode) in out:
                    out[(side, d.mode)].add(test, "libs")


def _reproduces(m: Suspects, test: str, check: str, again: TestResult | None) -> bool:
    line = _line(again)
    if again is None:
        return True  # it did not run: nothing shows the change went away
    if check == "unexpected":
        return unexpected(m.cell, m.result.mode, again, m.result.known_flaky)
    if check == "fallback":
        return unallowed_fallback(m.cell.suite.expect[m.result.mode], again)
    if check == "libs":
        return _show(line) == m.runs[test][0]
    bt = m.baseline.get(test)
    allowed = m.result.known_flaky.get(test)
    kind, _, op = check.partition(" ")
    if kind != ChangeKind.EP and allowed is not None and within(allowed, again.outcome, again.sdpa) and (
            bt is None or within(allowed, bt.outcome, bt.tiers)):
        return False  # within its known-flaky set: no outcome or tier change (where it ran is not in the set)
    if kind == ChangeKind.EP and op:
        return not back_on_cuda(line, op)
    regressions, _ = test_changes(m.result.cell.name, m.result.mode, test, bt, line)
    return any(c.check == check for c in regressions)


def _clean(m: Suspects, test: str, again: TestResult) -> bool:
    """Whether a rerun may stand for the test in the amended result: it shows no change of its own, neither an
    unexpected failure nor any regression against the baseline. A rerun that clears one change but shows another
    (a tier change gone, a failure come) clears the first, and the test keeps its first run's line; the second
    was seen once and never rerun, so it must count nowhere."""
    if unexpected(m.cell, m.result.mode, again, m.result.known_flaky):
        return False
    if m.record is None:
        return True
    regressions, _ = test_changes(m.result.cell.name, m.result.mode, test, m.record.tests.get(test), _line(again))
    return not regressions
