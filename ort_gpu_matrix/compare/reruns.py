"""A regression counts only once it reproduces: the sweep's regressed tests, rerun before they count.

As Bazel's --flaky_test_attempts and Chromium's retries of unexpected results do, every test that
regressed against the baseline in outcome (`test`), tier (`tier`) or EP (`ep`), every test whose
CUDA session fell back unallowed (`fallback`), every test whose failure is
unexpected (not in known_failures or known_flaky, not the canary's bite: `unexpected`, with or
without a baseline), and every test the libs comparison names (`libs`) runs again, up to N times,
in a fresh test process of the same venv, mode and libraries, and under the same GPU: a --gpus
sweep's reruns run in its own process after the slots, each given what its first run's slot set
(`given`: CUDA_VISIBLE_DEVICES, NCCL_NVLS_ENABLE; gpus.slot_env). The tests of one mode rerun
together, one process per rerun (node ids in a file the probe reads, as a scoped teeth does), so
confirmation adds at most N short runs per mode. A test whose every check some rerun already
failed to reproduce is not rerun again.

A rerun is a mode run like any other: its own private 0700 dir, the probe, the fd tap, the library
audit, its own bundle under runs/<session>/ (never the session's current result). A rerun whose
witnesses disagree, or whose audit fails, reproduces everything (it can clear nothing), and so
does one in which the test did not run: only evidence that the change went away makes it
unconfirmed. A check is confirmed when every rerun reproduced it:

    test        the rerun's outcome is again a regression against the baseline (compare.test_changes)
    tier        the rerun's tiers again differ from the baseline's
    unexpected  the rerun fails again, and again unexpectedly
    fallback    the rerun's CUDA-asking session is again served by another EP, and no allowed_fallbacks rule
                accepts it (eprules.py); `ep`, a test no longer served by the CUDA EP, is confirmed as `test` is
    libs        the rerun gave exactly what the first run gave (a side that changes is not a difference)

What derives from outcomes follows the confirmed tests: a test with a check that did not reproduce
is judged by the first rerun that did not reproduce it (its outcome, tiers and message), and the
mode's verdict, counts, census and tier-rule breaks are derived again from the tests so amended
(verdicts' expectation_reasons; the cross-checks, audit and warnings of the first run stay). The first run's
verdict, reasons and counts stay in the result's `confirmation`, and its probe report, with every
outcome, in its bundle.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.model import TeethExpect
from ..config.modes import spec
from ..config.overrides import Workspace
from ..drive.attempt import evidence, keep, locked, session_lock, verdict_of
from ..drive.cell import with_libset
from ..drive.overlap import ask_of
from ..envs.venvs import Venv, ensure_venv
from ..execute.mode_run import run_mode
from ..execute.request import Launch, ModeRun
from ..host.host import Resolved
from ..host.room import cores, decide, gpu_memory, workers_of
from ..judge import eps as eprules
from ..judge.counts import TestResult, census, collected_of, count
from ..judge.covers import rule_covers
from ..judge.eps import test_eps, unallowed_fallback
from ..judge.flaky import within
from ..judge.libraries import library_audit
from ..judge.outcomes import FAILING, bites, test_of
from ..judge.verdicts import Status, expectation_reasons, outcome_judge, tests_of
from ..judge.witnesses import cross_checks
from ..plan.cells import Cell
from ..store import results as store
from ..store.baseline import Baseline, TestLine
from ..store.confirmation import Confirmation, Rerun, TestRuns
from ..store.results import Result
from ..util.escape import term
from .changes import compare, libs_comparison, test_changes
from .unreproduced import PER_TEST

DEFAULT = 2  # --confirm N: reruns per mode with something to confirm
Say = Callable[[str], None]


@dataclass
class _Mode:
    """One mode result under confirmation: what each of its tests is checked for, and what the reruns gave."""

    cell: Cell
    resolved: Resolved
    result: Result
    report: dict[str, Any]
    tests: dict[str, TestResult]
    checks: dict[str, set[str]] = field(default_factory=dict)
    baseline: dict[str, TestLine | None] = field(default_factory=dict)
    runs: dict[str, list[str]] = field(default_factory=dict)
    cleared: dict[str, set[str]] = field(default_factory=dict)
    substitute: dict[str, TestResult] = field(default_factory=dict)
    reruns: list[Rerun] = field(default_factory=list)
    given: Mapping[str, str] = field(default_factory=dict)  # what the first run's slot set (gpus.slot_env)
    record: Any = None  # the baseline's record of this mode (baseline.ModeRecord), None without one

    def add(self, test: str, check: str) -> None:
        self.checks.setdefault(test, set()).add(check)

    def pending(self) -> list[str]:
        """Tests with a check no rerun has failed to reproduce yet."""
        return sorted(t for t, c in self.checks.items() if c - self.cleared.get(t, set()))


def _line(t: TestResult | None) -> TestLine | None:
    return None if t is None else TestLine(t.outcome, tuple(sorted(set(t.sdpa))), eps=test_eps(t))


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


def _report(result: Result) -> dict[str, Any] | None:
    if result.stopped or not result.report:
        return None
    try:
        data = json.loads(Path(result.report).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("tests"), dict) else None


def _modes(runnable: Sequence[tuple[Cell, tuple[str, ...], Resolved]], results: list[Result],
           before: Baseline | None) -> list[_Mode]:
    """Every mode result with something to confirm, and what: regressions, unexpected failures, libs differences."""
    cells = {c.name: (c, r) for c, _, r in runnable}
    raw = Baseline.of(results)
    flaky = {(r.cell.name, r.mode): r.known_flaky for r in results if r.known_flaky}
    first = compare(before, raw, None, flaky) if before is not None else None
    out: dict[tuple[str, str], _Mode] = {}
    for r in results:
        if r.cell.name not in cells:
            continue
        report = _report(r)
        if report is None:
            continue  # a run stopped or without a report: nothing a rerun could clear
        cell, resolved = cells[r.cell.name]
        tests = {t.nodeid: t for t in tests_of(report)}  # type: ignore[arg-type]
        m = out[(r.cell.name, r.mode)] = _Mode(cell, resolved, r, report, tests)
        for t in tests.values():
            if unexpected(cell, r.mode, t, r.known_flaky):
                m.add(t.nodeid, "unexpected")
            if unallowed_fallback(cell.suite.expect[r.mode], t):
                m.add(t.nodeid, "fallback")
        if first is not None:
            record = m.record = before.cells.get(r.cell.name, {}).get(r.mode) if before is not None else None
            for c in first.regressions:
                if (c.cell, c.mode) == (r.cell.name, r.mode) and c.kind in PER_TEST and c.test:
                    m.add(c.test, c.kind)
                    m.baseline[c.test] = record.tests.get(c.test) if record is not None else None
    ids = {r.cell.name: {"python": r.cell.python, "ort": r.cell.ort, "torch": r.cell.torch, "libs": r.cell.libs,
                         "suite": r.cell.suite} for r in results}
    for d in libs_comparison(raw, ids):
        for test, _, _ in d.tests:
            for side in d.cells:
                if (side, d.mode) in out:
                    out[(side, d.mode)].add(test, "libs")
    for m in out.values():
        m.runs = {t: [_show(_line(m.tests.get(t)))] for t in m.checks}
    return [m for m in out.values() if m.checks]


@dataclass(frozen=True)
class Reruns:
    """How a sweep confirms: `n` reruns per mode with something to confirm, with the sweep's posargs.

    `given`: session -> what its run's slot set over the sweep's environment; each rerun gets it again.
    `wanted`: the sweep's --slots-per-gpu (None: auto), how many of a cell's mode reruns share the GPU at once."""

    workspace: Workspace
    n: int
    posargs: tuple[str, ...] = ()
    log: Say = print
    echo: Say = print
    given: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    wanted: int | None = None


def _rerun(rr: Reruns, m: _Mode, venv: Venv, keep_ids: list[str], extra: Sequence[str],
           started_group: Callable[[int], None] | None = None) -> tuple[Result, dict[str, TestResult], list[str]]:
    """One confirmation rerun: a mode run in a private dir with only `keep_ids`, stored as a bundle of its own."""
    run = ModeRun(m.cell, m.result.mode, m.resolved, venv, rr.workspace)
    with locked(run, rr.log) as scratch:
        outcome = run_mode(run, scratch.workdir, extra, rr.echo, rr.log,
                           Launch(keep=keep_ids, given=m.given, started_group=started_group))
        verdict = verdict_of(run, outcome)
        ev = evidence(outcome)
        tests = tests_of(outcome.report)
        problems = cross_checks(ev, tests, count(outcome.report, tests, collected_of(outcome.report, ev.collected)))
        problems += library_audit(outcome.report, run.resolved.pinned, str(venv.path))[1]
        stored = keep(run, outcome, verdict, rerun_of=m.result.run_id)
    if outcome.interrupt is not None:
        raise outcome.interrupt
    return stored, {t.nodeid: t for t in tests}, problems


def _reproduces(m: _Mode, test: str, check: str, again: TestResult | None) -> bool:
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
    if allowed is not None and within(allowed, again.outcome, again.sdpa) and (
            bt is None or within(allowed, bt.outcome, bt.tiers)):
        return False
    regressions, _ = test_changes(m.result.cell.name, m.result.mode, test, bt, line)
    return any(c.kind == check for c in regressions)


def _clean(m: _Mode, test: str, again: TestResult) -> bool:
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


def _weigh(m: _Mode, selected: list[str], got: dict[str, TestResult], problems: list[str]) -> None:
    for test in selected:
        again = got.get(test)
        m.runs[test].append(_show(_line(again)))
        if problems:
            continue  # an untrusted rerun clears nothing
        for check in sorted(m.checks[test] - m.cleared.get(test, set())):
            if not _reproduces(m, test, check, again):
                m.cleared.setdefault(test, set()).add(check)
                if check != "libs" and again is not None and _clean(m, test, again):
                    m.substitute.setdefault(test, again)


def _amend(m: _Mode, prior: Result | None, n: int) -> Result:
    """The result with the tests that did not reproduce judged by their clearing rerun, and the record."""
    r, cell, mode = m.result, m.cell, m.result.mode
    record = Confirmation(n, r.verdict, list(r.reasons), r.counts, m.reruns,
                          [TestRuns(t, sorted(c), m.runs[t], sorted(m.cleared.get(t, set())),
                                    None if m.record is None else _show(m.record.tests.get(t))) for t, c in
                           sorted(m.checks.items())])
    if not m.substitute:
        return dataclasses.replace(r, confirmation=record)
    raw = tests_of(m.report)  # type: ignore[arg-type]
    tests = [m.substitute.get(t.nodeid, t) for t in raw]
    counts = count(m.report, tests, collected_of(m.report, None))  # type: ignore[arg-type]
    judge_fn, expect = outcome_judge(mode), cell.suite.expect[mode]
    census_from = prior.dispatch if prior is not None and prior.venv.fingerprint == r.venv.fingerprint else None
    before = expectation_reasons(judge_fn, expect, raw, r.counts, census_from)
    after = expectation_reasons(judge_fn, expect, tests, counts, census_from)
    reasons = [x for x in r.reasons if x not in before] + after
    findings = judge_fn(expect, tests, counts, census_from)
    coverage = r.teeth_coverage
    if coverage is not None and coverage.checked and census_from is not None and findings.coverage is not None:
        coverage = dataclasses.replace(findings.coverage, scope=coverage.scope, selected=coverage.selected)
    # the breaks follow the amended tests, as the reasons do: the tier table and the unexpected marks read them
    breaks = [b.record(mode) for b in findings.tier_breaks]
    return dataclasses.replace(r, verdict=Status.FAIL if reasons else Status.PASS, reasons=reasons, counts=counts,
                               dispatch=census(tests), teeth_coverage=coverage, tier_breaks=breaks,
                               outcomes={t.nodeid: t.outcome for t in tests}, confirmation=record,
                               ep=eprules.judge(expect, tests, r.ep.taken)[0])  # reports and baselines read it


def _side_by_side(batch: list[tuple[_Mode, list[str]]],
                  one: Callable[[_Mode, list[str], Callable[[int], None] | None], None]) -> None:
    """The batch's first rerun on this thread, where an interrupt lands; the others in threads, each of whose
    process groups is stopped (SIGINT) when it does."""
    live: set[int] = set()  # the process groups of the side reruns still running

    def tracked(m: _Mode, selected: list[str]) -> None:
        mine: list[int] = []

        def started(pid: int) -> None:
            mine.append(pid)
            live.add(pid)

        try:
            one(m, selected, started)
        finally:
            live.difference_update(mine)  # ended: its id may be reused, never signalled again

    with ThreadPoolExecutor(max_workers=max(1, len(batch) - 1)) as pool:
        side = [pool.submit(tracked, m, selected) for m, selected in batch[1:]]
        try:
            one(*batch[0], None)
            for f in side:
                f.result()
        except BaseException:  # an interrupt lands on this thread, in its rerun or while it waits: stop the others
            for group in list(live):
                try:
                    os.killpg(group, signal.SIGINT)
                except (ProcessLookupError, PermissionError):
                    pass
            raise


def _round(rr: Reruns, todo: list[tuple[_Mode, list[str]]], venv: Venv, k: int) -> None:
    """Rerun k of n of one cell's modes: each its own process, side by side on the GPU where the host has room.

    The modes' reruns are independent (each its own private dir, fd tap, audit and bundle), like a cell's
    normal and require_cudnn (room.py decides how many share the GPU, and cuts -n to the cores' share).
    Within one round no rerun reads another's result; rounds stay in order, since a round reruns only what
    the rounds before it have not cleared. The first rerun runs on this thread, where an interrupt lands;
    the others, in threads, are stopped (SIGINT to their process group) when it does.
    """
    if not todo:
        return
    n, posargs, log, cell = rr.n, rr.posargs, rr.log, todo[0][0].cell
    own = workers_of([*cell.suite.pytest_args, *posargs], cores())
    ask = ask_of([(cell, [m.result.mode for m, _ in todo])], posargs, rr.workspace.results_dir, rr.wanted, len(todo))
    gpu = todo[0][0].given.get("CUDA_VISIBLE_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES")
    room = decide(ask, cores(), gpu_memory(gpu))
    if len(todo) > 1:
        log(f"confirm: {cell.name}: rerun {k} of {n}: {room.slots} mode rerun(s) at once ({room.why})")
    extra = [*posargs, *room.pytest_args(own)] if room.slots > 1 else list(posargs)

    def one(m: _Mode, selected: list[str], started: Callable[[int], None] | None) -> None:
        keep = sorted({test_of(t) for t in selected})
        gpu = m.given.get("CUDA_VISIBLE_DEVICES")
        log(f"confirm: {m.result.session}: rerun {k} of {n}, {len(keep)} test(s)"
            + (f" on gpu {gpu}, as its first run" if gpu else ""))
        stored, got, problems = _rerun(rr, m, venv, keep, extra, started)
        m.reruns.append(Rerun(stored.run_id, stored.bundle, len(keep), stored.duration_s, problems))
        for p in problems:
            log(f"confirm: {m.result.session}: rerun {k} cannot clear anything: {term(p)}")
        _weigh(m, selected, got, problems)

    for at in range(0, len(todo), room.slots):
        _side_by_side(todo[at:at + room.slots], one)


def confirm(rr: Reruns, runnable: Sequence[tuple[Cell, tuple[str, ...], Resolved]], results: list[Result],
            before: Baseline | None) -> list[Result]:
    """The sweep's results with every change confirmed or not (see the module doc); each amended result re-stored."""
    if rr.n <= 0:
        return results
    log, n, ws = rr.log, rr.n, rr.workspace
    modes = _modes(runnable, results, before)
    for m in modes:
        m.given = dict(rr.given.get(m.result.session, {}))
    by_cell: dict[str, list[_Mode]] = {}
    for m in modes:
        by_cell.setdefault(m.cell.name, []).append(m)
    for ms in by_cell.values():
        cell, resolved = ms[0].cell, with_libset(ms[0].cell, ms[0].resolved, ws, log)
        for m in ms:
            m.resolved = resolved
        with ensure_venv(cell, resolved, ws.venvs_dir, log) as venv:
            for k in range(1, n + 1):
                todo = [(m, m.pending()) for m in ms]
                _round(rr, [(m, selected) for m, selected in todo if selected], venv, k)
    amended = {}
    for m in modes:
        source = spec(m.result.mode).coverage_from
        prior = None if source is None else next(
            (r for r in results if r.cell.name == m.cell.name and r.mode == source.value), None)
        new = _amend(m, prior, n)
        lock = session_lock(ws.results_dir, new.session, log)
        try:
            if not store.restore(ws.results_dir, new):
                log(f"confirm: {new.session}: a newer run of it is the current result now; the confirmed one is "
                    f"in its bundle {new.bundle}")
        finally:
            lock.release()
        amended[new.session] = new
        for t in new.confirmation.tests if new.confirmation else []:
            if t.unconfirmed:
                log(f"confirm: {new.session}: {term(t.test)}: not reproduced ({', '.join(t.unconfirmed)}); "
                    f"runs: {term(' | '.join(t.runs))}")
        if new.verdict is not m.result.verdict:
            log(f"confirm: {new.session}: {m.result.verdict.value.upper()} -> {new.verdict.value.upper()} "
                "(what the confirmed tests show)")
    return [amended.get(r.session, r) for r in results]
