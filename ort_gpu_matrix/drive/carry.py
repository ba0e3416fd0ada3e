"""What a mode run leaves out and carries: each mode runs only the tests it can change.

require_cudnn differs from normal only in ORT_TEST_REQUIRE_CUDNN_SDPA (config/modes.py: `carries_from`,
`changes`). A test that read it in no way the probe can see (envreads.py: by name, through the whole
environment, in a child process, at import, in a wide fixture) ran in normal exactly as it would run here,
so its outcome is carried from this cell's normal run of the same nox process or sweep, never run again.
Everything else runs: the tests that read it, every test that skipped in normal (a skip may hide a gate),
and every test the census does not know (new since it was taken).

The census that chooses is that of a normal run of the same venv fingerprint and the same test files
(execute/testfiles.py): this process's own, or, where normal runs beside this one (a `--gpus` sweep, an
overlapped cell), the last one stored. Without one the whole mode runs, and its result says why; so does
`--full` or a suite's `full = true`.

The outcomes are carried from this process's normal run, or from the one a parent hands over once that
child has exited (census.py's `--census-file`). Before they count they are checked against that run's own
census, which is exact where a stored one chose: a carried test that run skipped, did not run, or saw read
the variable fails the mode with a reason that names it (the next run chooses from that census instead).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ort_matrix_probe.schema import TestEntry, parent_of

from ..config.modes import Mode, spec
from ..execute.group import Signals
from ..execute.probe_report import read_report
from ..execute.request import ModeRun
from ..execute.testfiles import digest
from ..judge.outcomes import listing, test_of
from ..judge.reads import ReadCensus
from ..store import results
from ..store.results import Result, ResultError, Selection
from ..util.escape import term
from .census import handed_run
from .context import CellRuns
from .history import newest

LOOKED_AT = 5  # stored runs of normal looked through for one whose census may choose


def ref(result: Result) -> str:
    return f"{result.session} {result.run_id}"


def changing(census: ReadCensus, outcomes: Mapping[str, str], names: tuple[str, ...]) -> dict[str, str]:
    """Of the tests a census run ran (`outcomes`, subtests folded into their tests), each that may change where
    `names` are set, and why; the rest provably cannot."""
    out = {}
    for nodeid, outcome in outcomes.items():
        if test_of(nodeid) != nodeid:  # a subtest, or a teardown's error: it runs with its test
            continue
        why = census.changes(nodeid, names)
        if why is None and outcome in ("skipped", "xfailed"):
            why = f"it {outcome} there (a skip may hide a gate)"
        if why is None and any(o in ("skipped", "xfailed") for s, o in outcomes.items() if parent_of(s) == nodeid):
            why = "a subtest of it skipped there"
        if why is not None:
            out[nodeid] = why
    return out


def usable(found: Result | None, fingerprint: dict[str, object], tests_digest: str) -> str | None:
    """Why `found` (a normal run) cannot choose or give carried outcomes for this run: None where it can."""
    if found is None:
        return "no normal run"
    if found.venv.fingerprint != fingerprint:
        return f"{ref(found)} ran in another venv"
    digest = found.selection.tests_digest if found.selection else None
    if digest != tests_digest:
        return f"{ref(found)} ran other test files" if digest else f"{ref(found)} recorded no test files"
    if not found.reads.taken:
        return f"{ref(found)} has no census of reads"
    if found.stopped or found.pytest_exit_code not in (0, 1):
        return f"{ref(found)} did not run to its end"
    return None


@dataclass
class Carry:
    """One mode run's carry: chosen as it starts (`open`), settled once its tests ran (`settle`)."""

    cr: CellRuns
    run: ModeRun
    tests_digest: str
    names: tuple[str, ...] = ()
    source_session: str | None = None
    chooser: Result | None = None  # the normal run whose census chose
    carry: list[str] = field(default_factory=list)
    why: str = ""  # what decided, said in the result
    file: Path | None = None  # where a parent hands over the source run, still running as this starts
    interrupt: KeyboardInterrupt | None = None  # came while it waited for the source: raised once stored

    @classmethod
    def open(cls, cr: CellRuns, run: ModeRun, tests_digest: str | None = None) -> Carry:
        mine = cls(cr, run, tests_digest or digest(run.resolved))
        source = spec(run.mode).carries_from
        if source is None:
            mine.why = f"{run.mode} carries no test from another mode"
            return mine
        mine.names, mine.source_session = spec(run.mode).changes, run.cell.mode_session(source.value)
        here = cr.earlier.get(mine.source_session)
        mine.file = None if here is not None else cr.census_files.get(mine.source_session)
        if cr.full or run.cell.suite.full:
            mine.why = "every test ran: " + ("--full" if cr.full else f"suite {run.cell.suite.id} sets full = true")
            return mine
        if here is None and mine.file is None:
            mine.why = f"every test ran: no {source.value} run of this cell in this nox process to carry outcomes from"
            return mine
        found, why = (here, None) if here is not None else _stored(cr, mine.source_session, run.venv.fingerprint,
                                                                   mine.tests_digest)
        mine._choose(found, why)
        return mine

    def _choose(self, found: Result | None, why: str | None) -> None:
        problem = why or usable(found, self.run.venv.fingerprint, self.tests_digest)
        if problem is not None or found is None:
            self.why = f"every test ran: no census to choose by ({problem})"
            return
        everything = found.reads.wide("", self.names)
        if everything is not None:
            self.why = f"every test ran: in {ref(found)} {everything}"
            return
        runs = changing(found.reads, found.outcomes, self.names)
        self.chooser = found
        self.carry = sorted(n for n in found.outcomes if test_of(n) == n and n not in runs)
        self.why = (f"{len(runs)} test(s) ran that may change under {', '.join(self.names)} (chosen by the census "
                    f"of {ref(found)}); {len(self.carry)} carried")

    def announce(self) -> None:
        if self.source_session is not None:
            self.cr.voice.log(f"{self.run.session}: {term(self.why)}")

    def unsettled(self) -> Selection:
        """The record of a run stopped before its end: what it left out, carried from nothing."""
        if not self.carry:
            return Selection(True, self.why)
        return Selection(False, self.why + "; the run was stopped, so nothing was carried",
                         ref(self.chooser) if self.chooser else None, None, [], list(self.carry))

    def settle(self) -> tuple[dict[str, TestEntry], list[str], Selection]:
        """Once this run's tests ran: the report entries of the carried tests, from the source run as its own census
        allows them; the reasons against those it does not; and the record of what ran and what was carried."""
        if not self.carry:
            return {}, [], Selection(True, self.why)
        source, problem = self._source()
        if source is None:
            reason = (f"{len(self.carry)} test(s) were left to be carried from {self.source_session}, which gave none "
                      f"({problem}): they have no outcome in this run")
            return {}, [reason], Selection(False, self.why, ref(self.chooser) if self.chooser else None, None, [],
                                           list(self.carry))
        report, bad = self._entries(source)
        reasons = [] if not bad else [
            f"{len(bad)} test(s) left out by the census of {ref(self.chooser) if self.chooser else '?'} cannot be "
            f"carried from {ref(source)}: {listing([f'{n}: {w}' for n, w in sorted(bad.items())])}; the next run "
            "chooses from that census (or run with --full)"]
        return report, reasons, Selection(False, self.why, ref(self.chooser) if self.chooser else None, ref(source),
                                          sorted(report))

    def _source(self) -> tuple[Result | None, str | None]:
        assert self.source_session is not None
        here = self.cr.earlier.get(self.source_session)
        if here is None and self.file is not None:
            self.cr.voice.log(f"{self.run.session}: waiting for {self.source_session} to carry outcomes from")
            try:
                with Signals():  # SIGTERM too: Interrupted, stored as Ctrl-C's is
                    here, why = handed_run(self.file, self.cr.workspace.results_dir, Mode.NORMAL)
            except KeyboardInterrupt as exc:  # stored first, as any interrupted run is; then it goes on (cell.py)
                self.interrupt, here, why = exc, None, "the run was interrupted while it waited for it"
            if here is None:
                return None, why
        problem = usable(here, self.run.venv.fingerprint, self.tests_digest)
        return (here, None) if problem is None else (None, problem)

    def _entries(self, source: Result) -> tuple[dict[str, TestEntry], dict[str, str]]:
        report, _, problem = read_report(Path(source.report)) if source.report else (None, None, "no report kept")
        if report is None:
            return {}, {n: f"its report cannot be read ({problem})" for n in self.carry}
        runs = changing(source.reads, source.outcomes, self.names)
        bad = {n: runs[n] for n in self.carry if n in runs}
        bad.update({n: f"not run in {ref(source)}" for n in self.carry if n not in report["tests"]})
        return {n: report["tests"][n] for n in self.carry if n not in bad}, bad


def _stored(cr: CellRuns, session: str, fingerprint: dict[str, object],
            tests_digest: str) -> tuple[Result | None, str | None]:
    """The newest stored run of `session` whose census may choose for this one (from its bundles, since a run of
    it starting now has already retired its current file); else None and why the newest of them may not."""
    first: str | None = None
    for bundle in newest(cr.workspace.results_dir, session, LOOKED_AT) or []:
        try:
            found = results.load(bundle / "result.json")
        except ResultError:
            continue
        if found.rerun_of is not None:
            continue
        problem = usable(found, fingerprint, tests_digest)
        if problem is None:
            return found, None
        first = first or problem
    return None, first or "no normal run stored"
