"""What a teeth of `teeth_scope = "known"` leaves out: the tests no run of the cell ever saw dispatch its tier.

Forcing MATH can only bite a test that dispatched the tier it takes away (on ORT's attention suite, 71 of
198). So teeth runs the tests that dispatched that tier in any run of the cell on record (this process's
normal and require_cudnn, and the last few stored runs of each, whatever their venv: a test that once
dispatched it is kept), those known_toothless names, and every test no run on record has seen. It leaves
out only the tests every such run saw and none saw dispatch the tier. With no run on record, or `--full`,
it runs every test.

Its coverage is still judged against this run's own require_cudnn, as every teeth's is: a test that dispatched
the tier there and was left out here fails teeth by name (judge/verdicts.py). Teeth starts once that run is
stored, so it is on record here and such a test can only come from a census that changed since.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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


def _on_record(cr: CellRuns, run: ModeRun) -> list[Result]:
    found: dict[tuple[str, str], Result] = {}
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


def known_cut(cr: CellRuns, run: ModeRun) -> KnownCut:
    """What this teeth leaves out, decided as it starts."""
    if cr.full or run.cell.suite.full:
        return KnownCut(None, "every test ran: " + ("--full" if cr.full else f"suite {run.cell.suite.id} sets full"))
    expect = run.cell.suite.expect[run.mode]
    assert isinstance(expect, TeethExpect)
    runs = _on_record(cr, run)
    if not runs:
        return KnownCut(None, f"every test ran: no run of {run.cell.name} on record to know its {expect.tier} tests by")
    seen = {test_of(n) for r in runs for n in collected(r.outcomes)}
    tier = {test_of(n) for r in runs for n in r.dispatch.tier_tests(expect.tier)}
    named = {n for n in seen if any(rule_covers(rule, n) for rule in expect.known_toothless)}
    drop = sorted(seen - tier - named)
    refs = [f"{r.session} {r.run_id}" for r in runs]
    return KnownCut(drop, f"{len(seen) - len(drop)} known test(s) ran that dispatched {expect.tier} in a run on record "
                          f"or that known_toothless names, and any test no run has seen; {len(drop)} left out "
                          f"({len(runs)} run(s) read)", refs)
