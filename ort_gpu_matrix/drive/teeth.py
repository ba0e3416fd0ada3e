"""One mode run's teeth scope, resolved once: its census, the tests it keeps or why it cannot run, its -n.

With `teeth_scope = "cudnn"`, teeth runs only the tests require_cudnn's census says dispatched cuDNN, plus
those `known_toothless` names. Without a census it does not run at all: it fails and says why, rather than
silently run everything. Every mode run has a scope; one whose mode checks no coverage keeps every test.

The scope is made once per mode run, under its session's lock, and decides then where its census comes
from (census.py): this process's results, or the file its parent hands it over in, for a teeth started
before its require_cudnn ended (earlyteeth.py). It is resolved once, when that census is there: at once, or
once the parent wrote the file. Resolving retires the session's current result (a run is starting) and
settles the prior run, the node ids to keep or the refusal, and the -n arguments, which the run and its
verdict then only read. A teeth stopped while it waits is never resolved: its last result stays current. A
"known" teeth started beside its require_cudnn is the exception: it cuts by the runs on record as it starts,
retires its result then, runs, and only then waits, so one stopped while it waits stores its run, stopped.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..config.model import TeethExpect
from ..config.modes import Mode, spec
from ..execute.request import Kept, ModeRun
from ..execute.testfiles import digest
from ..host.room import cores, workers_of
from ..judge.counts import Dispatch
from ..judge.covers import rule_covers
from ..judge.outcomes import collected, test_of
from ..judge.verdicts import Verdict, scoped
from ..plan.cells import Cell
from ..store import results
from ..store.results import Result
from . import earlyteeth
from .census import handed, later_of, prior_of
from .context import CellRuns
from .knowncut import KnownCut, known_cut


def teeth_selection(cell: Cell, mode: str, prior: Result | None) -> tuple[list[str] | None, str | None]:
    """For a scoped teeth: (the node ids to run, None), or (None, why it cannot run). (None, None): unscoped."""
    if spec(mode).coverage_from is None or cell.suite.teeth_scope in ("all", "known"):
        return None, None
    source = cell.mode_session(Mode.REQUIRE_CUDNN.value)
    if prior is None:
        return None, (f'teeth_scope = "cudnn" needs the census of {source} from this nox process or sweep, in this '
                      f"venv, and there is none: run it first (nox -s {cell.name}, or nox -s {source} "
                      f'{cell.mode_session(mode)}), or set teeth_scope = "all"')
    expect = cell.suite.expect[mode]
    assert isinstance(expect, TeethExpect)
    named = {n for n in collected(prior.outcomes) if any(rule_covers(rule, n) for rule in expect.known_toothless)}
    keep = sorted({test_of(n) for n in prior.dispatch.tier_tests(expect.tier)} | named)  # a subtest runs in its test
    if not keep:
        return None, (f'teeth_scope = "cudnn": {source} dispatched no {expect.tier} test and known_toothless names none of '
                      "its tests: teeth has nothing to run")
    return keep, None


def few_workers(cell: Cell, posargs: Sequence[str], keep: Sequence[str] | None) -> tuple[list[str], str | None]:
    """A scoped run of fewer tests than its -n starts no worker that would run nothing: -n K, or no xdist for one
    test. Every worker pays the whole start (interpreter, torch, ORT), so an idle one only costs (bench/one_gpu.py
    measures it). Which tests run, and so every figure, is unchanged. Returns the arguments and the line that says
    so; ([], None) where the suite's own -n stands."""
    if keep is None:
        return [], None
    asked = workers_of([*cell.suite.pytest_args, *posargs], cores())
    if asked <= 1 or len(keep) >= asked:
        return [], None
    given = len(keep) if len(keep) > 1 else 0
    return ["-n", str(given)], (f"{cell.mode_session(Mode.TEETH.value)}: {len(keep)} test(s) to run: -n {given} "
                                f"instead of -n {asked}")


class TeethScope:
    """One mode run's scope: where its census comes from (decided as it is made), then, once resolved, the prior
    run (`prior`, its census `dispatch`), the node ids to keep (`keep`, None: every test) or why it cannot run
    (`refusal`), and the -n arguments a run of them gets (`workers`). `file`: set for a teeth whose census its
    parent hands over later; it waits (`wait`, or `kept` for one started early), and `basis` holds its last
    run's tests to start on. A "known" one cuts by the runs on record as it is made (`cut_early`), runs, and
    only then waits for the census it is judged by. Made with `open`, which resolves at once a scope whose census is here already, and
    so retires the session's current result: a run is starting."""

    @classmethod
    def open(cls, cr: CellRuns, run: ModeRun, tests_digest: str | None = None) -> TeethScope:
        """`tests_digest`: of the test files this run runs (execute/testfiles.py), hashed by the caller once for
        the run; hashed here where none is given and a "known" teeth needs it."""
        scope = cls(cr, run)
        scope.tests_digest = tests_digest
        if scope.file is None:
            scope._resolve(scope.here)
        elif scope.known:  # started beside its require_cudnn: cut from the runs on record, run now, judged later
            results.retire_current(cr.workspace.results_dir, run.session)  # a run is starting
            scope.cut = known_cut(cr, run, None, tests_digest or digest(run.resolved), later=True)
            scope.cut_early = True
        return scope

    def __init__(self, cr: CellRuns, run: ModeRun) -> None:
        self.cr, self.run = cr, run
        self.here = here = prior_of(cr.earlier, run.cell, run.mode, run.venv.fingerprint)  # this process's census
        self.file: Path | None = None if here is not None else later_of(cr.census_files, run.cell, run.mode)
        self.known = spec(run.mode).coverage_from is not None and run.cell.suite.teeth_scope == "known"
        self.cut = KnownCut(None, "every test ran")  # what a "known" teeth leaves out (knowncut.py)
        self.cut_early = False  # decided as it started, before its require_cudnn was stored
        self.tests_digest: str | None = None
        self.basis = None if self.file is None else earlyteeth.basis(cr.workspace.results_dir, run.session)
        self.came = False  # the census is here, or word that none will come: resolved
        self.prior: Result | None = None
        self.dispatch: Dispatch | None = None  # the prior run's census, which the verdict checks coverage against
        self.keep: list[str] | None = None
        self.refusal: str | None = None
        self.workers: list[str] = []
        self.note: str | None = None  # what `workers` changed, said as the tests start

    def wait(self) -> None:
        """The census its parent hands over, waited for and resolved on; why none came is said."""
        assert self.file is not None and not self.came
        run = self.run
        prior, why = handed(self.file, self.cr.workspace.results_dir, run.cell, run.mode, run.venv.fingerprint)
        if why is not None:
            self.cr.voice.log(f"{run.session}: {why}")
        self._resolve(prior)

    def kept(self) -> Kept | None:
        """For a teeth started early (KeepLater.resolve): once its census came, what it keeps and their -n, or None."""
        self.wait()
        if self.keep is None:
            return None
        self.cr.voice.log(self._kept_line())
        return Kept(self.keep, self.workers)

    def announce(self) -> None:
        """What the scope keeps and the -n it cut, said as the tests start."""
        if self.keep is not None:
            self.cr.voice.log(self._kept_line())
        if self.note is not None:
            self.cr.voice.log(self.note)

    def judged(self, verdict: Verdict) -> Verdict:
        """The verdict of a mode that checks coverage, with the scope it ran under."""
        if spec(self.run.mode).coverage_from is None:
            return verdict
        return scoped(verdict, self.run.cell.suite.teeth_scope, None if self.keep is None else len(self.keep))

    def _resolve(self, prior: Result | None) -> None:
        """Settle the scope on its census; `came` last, so that a scope interrupted midway reads as never
        resolved (its early run then stores nothing), not as one that ran every test."""
        cut = self.cut
        if self.known and not self.cut_early:
            cut = known_cut(self.cr, self.run, prior, self.tests_digest or digest(self.run.resolved))
        keep, refusal = teeth_selection(self.run.cell, self.run.mode, prior)
        workers, note = few_workers(self.run.cell, self.cr.posargs, keep)
        if not self.cut_early:  # one cut early has retired it already, and ran on that cut
            results.retire_current(self.cr.workspace.results_dir, self.run.session)  # a run is starting
        self.cut, self.keep, self.refusal, self.workers, self.note = cut, keep, refusal, workers, note
        self.prior, self.dispatch = prior, None if prior is None else prior.dispatch
        self.came = True

    def _kept_line(self) -> str:
        assert self.keep is not None and self.prior is not None  # only a census keeps tests
        return (f"{self.run.session}: teeth_scope cudnn: {len(self.keep)} test(s) of {len(self.prior.outcomes)} "
                f"from {self.prior.session} run {self.prior.run_id}")
