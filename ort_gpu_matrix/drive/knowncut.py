"""What a teeth of `teeth_scope = "known"` leaves out: the tests no run of the cell ever saw dispatch a fast tier.

Forcing MATH can only change a test that dispatched a tier it takes away: the canary's (on ORT's attention
suite, 71 of 198 tests dispatched cuDNN), and any other fast one (FLASH, memory-efficient), whose tests may fail
under MATH for other reasons, which teeth reports. So teeth runs the tests that dispatched any tier but MATH in
a run of the cell on record (this run's require_cudnn, however it ended; this process's normal; the last few
stored runs of each, whatever their venv: a test that once dispatched one is kept; teeth runs with the
require_cudnn variable set, so that run's dispatch, always on record, is the one that must be covered),
those known_toothless or known_failures name,
and every test no run of this venv and these test files has seen. Without this run's require_cudnn of the
same venv (its coverage is judged by it), or with `--full`, it runs every test.

A test that dispatched the canary's tier in this run's require_cudnn and was left out here fails teeth by
name (judge/verdicts.py). A teeth started after that run decides its cut with it on record, so such a test can
only come from a census that changed since. A teeth started beside it (earlyteeth.py) decides from the runs
before this one, runs at once, and is judged against it once stored: a test that dispatched a fast tier for the
first time in this very run is then named and fails teeth, and the next run keeps it. That is the price of
taking teeth off the cell's critical path (require_cudnn ends only when normal does, drive/carry.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config.kernels import MATH
from ..config.model import TeethExpect
from ..config.modes import Mode
from ..execute.request import ModeRun
from ..judge.covers import rule_covers
from ..judge.outcomes import collected, test_of
from ..store import results
from ..store.results import Result, ResultError
from .context import CellRuns
from .history import newest

LOOKED_AT = 3  # stored runs of each session read for the tier's tests


@dataclass(frozen=True)
class KnownCut:
    """The node ids a known-scoped teeth leaves out (None: none, every test runs), why, and which runs said so."""

    drop: list[str] | None
    why: str
    runs: list[str] = field(default_factory=list)  # "<session> <run id>" of each run read


def _on_record(cr: CellRuns, run: ModeRun, prior: Result | None) -> list[Result]:
    """This run's require_cudnn (`prior`, whatever its end: a run stopped midway still saw what it dispatched),
    this process's normal and require_cudnn, and the last stored runs of each that ran to their end."""
    found: dict[tuple[str, str], Result] = {} if prior is None else {(prior.session, prior.run_id): prior}
    for mode in (Mode.NORMAL, Mode.REQUIRE_CUDNN):
        session = run.cell.mode_session(mode.value)
        here = cr.earlier.get(session)
        if here is not None:
            found[(here.session, here.run_id)] = here
        for bundle in newest(cr.workspace.results_dir, session, LOOKED_AT) or []:
            try:
                stored = results.load(bundle / "result.json")
            except ResultError:
                continue
            if stored.rerun_of is None and not stored.stopped:
                found.setdefault((stored.session, stored.run_id), stored)
    return [found[k] for k in sorted(found)]


def known_cut(cr: CellRuns, run: ModeRun, prior: Result | None, tests_digest: str, later: bool = False) -> KnownCut:
    """What this teeth leaves out, decided as it starts. `prior`: this run's require_cudnn of the same venv, which
    its coverage is judged by; without one nothing is left out (nothing would check what was), unless `later`:
    a teeth started beside its require_cudnn, whose census its parent hands over once stored, and which judges
    its coverage by it then (earlyteeth.py). That one decides from the runs on record before this one."""
    if cr.full or run.cell.suite.full:
        return KnownCut(None, "every test ran: " + ("--full" if cr.full else f"suite {run.cell.suite.id} sets full"))
    expect = run.cell.suite.expect[run.mode]
    assert isinstance(expect, TeethExpect)
    if prior is None and not later:
        return KnownCut(None, "every test ran: no require_cudnn run of this venv in this nox process or sweep to "
                              "check what a cut would leave out")
    runs = _on_record(cr, run, prior)
    seen, drop = left_out(runs, run.venv.fingerprint, tests_digest, expect)
    refs = [f"{r.session} {r.run_id}" for r in runs]
    when = " (decided as it started beside its require_cudnn, which it is judged by once stored)" if later else ""
    return KnownCut(drop, f"{seen - len(drop)} known test(s) ran that dispatched a tier MATH takes away in a run "
                          "on record, or that known_toothless or known_failures names, and any test no run of this "
                          f"venv and these files has seen; {len(drop)} left out ({len(runs)} run(s) read){when}", refs)


def left_out(runs: list[Result], fingerprint: dict[str, object], tests_digest: str,
             expect: TeethExpect) -> tuple[int, list[str]]:
    """(how many tests the runs of this venv and these files saw, the tests of them teeth leaves out).

    Seen: only in runs of this venv and these files (a test another venv saw may act otherwise here). A fast tier
    from any run: forcing MATH takes every one away, not only the canary's, and any of them may fail for it. A
    subtest counts for its test, which is what runs."""
    same = [r for r in runs if r.venv.fingerprint == fingerprint
            and r.selection is not None and r.selection.tests_digest == tests_digest]
    seen = {test_of(n) for r in same for n in collected(r.outcomes)}
    fast = {n for r in runs for n in _fast(r)}
    named = {n for n in seen if any(rule_covers(rule, n) for rule in (*expect.known_toothless,
                                                                     *expect.known_failures))}
    return len(seen), sorted(seen - fast - named)


def _fast(run: Result) -> set[str]:
    """The tests that dispatched a tier MATH takes away in `run`, a subtest's tier counting for its test."""
    return {test_of(n) for n, tiers in run.dispatch.tests.items() if any(t != MATH for t in tiers)}


def missed_fast(drop: list[str], prior: Result, tier: str) -> list[str]:
    """The left-out tests that dispatched a tier MATH takes away in `prior` (this run's require_cudnn), a subtest's
    tier counting for its test: what a cut decided before `prior` was stored can miss, and must say. Those of
    the teeth's own `tier` are said already, as tests teeth did not run (judge/verdicts.py): not again here."""
    left = set(drop)
    fast = _fast(prior)
    own = {test_of(n) for n in prior.dispatch.tier_tests(tier)}
    return sorted((fast & left) - own)
