"""One mode run from its session's lock to its stored result: the steps a cell's run and a confirmation rerun share.

Both hold the session's lock from start to stored result, so two runs of one session wait for
each other instead of interleaving; both run in a private dir that is removed whatever happens
(unless MATRIX_KEEP_WORKDIR keeps it); both are judged from every witness the run left, read once.
They were written twice and had begun to differ; they are written here once.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ort_matrix_probe.schema import TestEntry

from ..execute import summary
from ..execute.junit import JunitError, read
from ..execute.mode_run import RunOutcome, remove_workdir
from ..execute.request import ModeRun
from ..host.ortsource import SourceTree
from ..judge.counts import Dispatch
from ..judge.expected import expected_of
from ..judge.verdicts import Standard, Verdict, judge, tests_of
from ..judge.witnesses import Evidence
from ..store import results
from ..store.results import Result, Selection
from ..util.orphans import new_workdir
from ..util.voice import Voice


def session_lock(results_dir: Path, session: str, voice: Voice) -> FileLock:
    locks = results_dir / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    lock = FileLock(locks / f"{session}.lock")
    try:
        lock.acquire(blocking=False)
    except Timeout:
        voice.log(f"{session}: waiting for another run of it to finish (lock {lock.lock_file})")
        lock.acquire()
    return lock


def evidence(outcome: RunOutcome) -> Evidence:
    """Every witness the run left, read once here, for the verdict to weigh."""
    junit, problem = None, None
    if outcome.report is not None or outcome.report_problem:
        try:
            junit = read(outcome.junit)
        except JunitError as exc:
            problem = str(exc)
    return Evidence(outcome.exit_code, outcome.report, outcome.report_sha256, outcome.report_problem, outcome.digest,
                    junit, problem, outcome.progress.collected, outcome.stopped, outcome.progress.running, outcome.env,
                    summary.read(outcome.log), outcome.dropped)


@dataclass
class Scratch:
    """The run's private dir; an early teeth that gives up its start runs again in a fresh one."""

    workdir: Path


@contextmanager
def locked(run: ModeRun, voice: Voice) -> Iterator[Scratch]:
    """The session's lock and a private dir, held while the run runs and its result is stored."""
    lock = session_lock(run.workspace.results_dir, run.session, voice)
    try:
        scratch = Scratch(new_workdir(run.session, voice))
        try:
            yield scratch
        finally:
            if not run.workspace.keep_workdir:
                remove_workdir(scratch.workdir)
    finally:
        lock.release()


def verdict_of(run: ModeRun, outcome: RunOutcome, prior: Dispatch | None = None,
               source: SourceTree | None = None, carried: Mapping[str, TestEntry] | None = None) -> Verdict:
    """The verdict on one run, by the mode's own judge and expectations (`prior`: teeth's census; `carried`: the
    report entries of the tests it carried from another run, carry.py)."""
    return judge(evidence(outcome), Standard.of(run), prior, source, carried)


def keep(run: ModeRun, outcome: RunOutcome, verdict: Verdict, source: SourceTree | None = None,
         rerun_of: str | None = None, selection: Selection | None = None) -> Result:
    """The run stored as a bundle of its own. A run becomes its session's current result, with what its mode
    expected marked; a confirmation rerun (`rerun_of`: the run it confirms) is stored beside it, never current.
    `selection`: what ran and what was carried, of which test files (a later census needs them)."""
    result = results.build(run, outcome, verdict, results.new_run_id(outcome.started), source)
    result = dataclasses.replace(result, selection=selection)
    if rerun_of is None:
        result = dataclasses.replace(result, expected=expected_of(run.cell.suite.expect[run.mode],
                                                                  tests_of(outcome.report), verdict.teeth_coverage))
    else:
        result = dataclasses.replace(result, rerun_of=rerun_of)
    files = {"log": outcome.log, "junit": outcome.junit, "report": outcome.report_path}
    return results.store(run.workspace.results_dir, result, files, current=rerun_of is None)
