"""One cell's modes end to end: libs set, venv, run, judge, store. No nox in here.

Modes run in canonical order, and each stored Result is kept in `earlier` for the rest of the nox
process, where teeth finds the require_cudnn census made moments before in the same venv. What a
teeth run keeps, and from which census, is its TeethScope's (teeth.py), made and resolved once per run.

A cell session (`overlap`) may instead run its modes at once on its GPU, as children through the
sweep's scheduler (overlap.py), where room.py finds room; the decision is logged either way.
Each mode run goes from its session's lock to its stored result through attempt.py, and an
interrupted run still stores a failing result before the interrupt goes on to stop nox.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from ..config.model import TeethExpect
from ..config.modes import MODES, Mode
from ..config.overrides import Workspace
from ..envs import libsets
from ..envs.venvs import BuildError, Venv, ensure_venv
from ..execute.group import Signals
from ..execute.mode_run import EarlyAbandoned, RunOutcome, not_started, remove_workdir, run_mode
from ..execute.request import KeepLater, Launch, ModeRun
from ..execute.testfiles import digest
from ..host import ortsource
from ..host.elf import kind
from ..host.host import Resolved, pinned_files
from ..host.room import cores
from ..judge.outcomes import listing
from ..judge.verdicts import Verdict, not_stale_for, refused, with_reasons
from ..plan.cells import Cell
from ..store import results
from ..store.results import Result, Selection, StoreError
from ..util.errors import MatrixError, UserError
from ..util.escape import term
from ..util.fs import mark_cache_dir
from ..util.orphans import new_workdir
from ..util.voice import Voice
from .attempt import Scratch, keep, locked, verdict_of
from .carry import Carry
from .context import CellRuns
from .knowncut import missed_fast
from .overlap import Overlap, room_for, run_overlapped
from .teeth import TeethScope, few_workers

# What stops one cell and not the sweep (or calibrate) around it: its matrix entry, its venv's build, the
# store of its result. Anything else a cell raises (a bad --slots-per-gpu, a census that cannot be read) is
# the command's own problem and stops it whole; named once so the three callers cannot drift apart.
CELL_ERRORS: tuple[type[UserError], ...] = (BuildError, StoreError, MatrixError)


def run_one(cr: CellRuns, venv: Venv, mode: str) -> Result:
    """One mode of the cell, from its session's lock to its stored result (attempt.py), with what it logs."""
    run, events, log = cr.mode_run(mode, venv), cr.voice.events, cr.voice.log
    if events is not None:
        events.mode_started(run.session)
    outcome, stored = _attempt(cr, run)
    cr.earlier[run.session] = stored
    log(f"{run.session}: {stored.verdict.value.upper()} -> {results.current_path(cr.workspace.results_dir, run.session)}")
    for reason in stored.reasons:
        log(f"  reason: {term(reason)}")
    for warning in stored.warnings:
        log(f"  warning: {term(warning)}")
    if events is not None:
        events.mode_ended(stored)
    if outcome.interrupt is not None:
        raise outcome.interrupt  # stored first; now stop nox, as the signal asked
    return stored


def _attempt(cr: CellRuns, run: ModeRun) -> tuple[RunOutcome, Result]:
    with locked(run, cr.voice) as scratch:
        tests_digest = digest(run.resolved)  # of the files it runs: hashed once, read by both below
        scope = TeethScope.open(cr, run, tests_digest)  # where its census comes from; resolved now unless it comes later
        carry = Carry.open(cr, run, tests_digest)  # which tests it leaves out, their outcomes carried from normal
        cr.voice.log(f"{run.session}: pytest in a private dir, LD_PRELOAD={':'.join(run.resolved.preload) or '(none)'}")
        early = _run_early(cr, run, scratch, scope) if scope.file is not None else None
        outcome, verdict, selection = _judged(cr, run, scratch, scope, early, carry)
        selection = dataclasses.replace(selection, tests_digest=tests_digest)
        return outcome, keep(run, outcome, verdict, cr.source, selection=selection)


def _judged(cr: CellRuns, run: ModeRun, scratch: Scratch, scope: TeethScope, early: RunOutcome | None,
            carry: Carry) -> tuple[RunOutcome, Verdict, Selection]:
    """The run (unless an early start already ran it, or teeth's scope refuses it) and its verdict, with the
    outcomes it carried and the record of what ran."""
    if early is not None:  # it ran (or was interrupted while it waited): judged as any run is
        verdict, selection = _cut_of(scope, scope.judged(verdict_of(run, early, scope.dispatch, cr.source)),
                                     Selection(True, carry.why))
        return early, verdict, selection
    if scope.refusal is not None:
        cr.voice.log(f"{run.session}: not run: {scope.refusal}")
        return (not_started(scratch.workdir, scope.refusal), refused(scope.refusal, cr.cell.suite.teeth_scope),
                Selection(True, scope.refusal))
    scope.announce()
    carry.announce()
    outcome = run_mode(run, scratch.workdir, [*cr.posargs, *scope.workers], cr.voice,
                       Launch(keep=scope.keep, drop=[*carry.carry, *(scope.cut.drop or [])]))
    if outcome.interrupt is not None or outcome.stopped:  # nothing to wait for: no outcome of it is carried
        return outcome, scope.judged(verdict_of(run, outcome, scope.dispatch, cr.source)), carry.unsettled()
    entries, reasons, selection = carry.settle()
    outcome.interrupt = outcome.interrupt or carry.interrupt  # stored first, then it stops nox (run_one)
    verdict, selection = _cut_of(scope, scope.judged(verdict_of(run, outcome, scope.dispatch, cr.source, entries)),
                                 selection)
    return outcome, with_reasons(verdict, reasons), selection


def _cut_of(scope: TeethScope, verdict: Verdict, selection: Selection) -> tuple[Verdict, Selection]:
    """A "known" teeth's record of what it ran, started early or not: the tests it left out (no rule of them is
    called stale), or that it ran every test and why. Any other run keeps its own."""
    if scope.known and scope.cut.drop:
        cut, drop, prior = scope.cut, scope.cut.drop, scope.prior
        verdict = not_stale_for(verdict, drop)
        if prior is None and scope.cut_early:  # nothing checked the cut it ran on: never a pass
            verdict = with_reasons(verdict, [
                f"no {scope.run.cell.mode_session(Mode.REQUIRE_CUDNN.value)} census came to check the "
                f"{len(drop)} test(s) teeth left out, deciding as it started: {listing(drop)}; "
                "run again, or with --full"])
        expect = scope.run.cell.suite.expect[scope.run.mode]
        assert isinstance(expect, TeethExpect)
        missed = [] if prior is None else missed_fast(drop, prior, expect.tier)
        if missed and prior is not None:  # a cut decided before this run's require_cudnn was stored saw them not
            verdict = with_reasons(verdict, [
                f"{len(missed)} test(s) dispatched a tier MATH takes away in {prior.session} run {prior.run_id} but "
                f"teeth left them out, deciding before that run was stored: {listing(missed)}; the next run keeps "
                "them (or run with --full)"])
        return verdict, Selection(False, cut.why, "; ".join(cut.runs), left_out=list(drop))
    if scope.known:
        return verdict, Selection(True, scope.cut.why)
    return verdict, selection


def _run_early(cr: CellRuns, run: ModeRun, scratch: Scratch, scope: TeethScope) -> RunOutcome | None:
    """A teeth whose census its parent hands over once require_cudnn is stored: pytest collects on the files of its
    last run (`scope.basis`) while require_cudnn runs, and keeps what the census says (mode_run.py's KeepLater).
    Returns the outcome, or None where no test ran and the caller goes on as after require_cudnn (the scope then
    resolved); `scratch` gets a fresh dir where the early start was given up."""
    session, log = run.session, cr.voice.log
    if scope.cut_early:
        return _run_known_early(cr, run, scratch, scope)
    if scope.basis is None:  # no last run to start on: wait for the census, then start as after require_cudnn
        log(f"{session}: no earlier run of it to start on: waiting for the census first")
        scope.wait()
        return None
    log(f"{session}: started early, on the files of its last run ({len(scope.basis)} test(s)), while "
        f"{cr.cell.mode_session(Mode.REQUIRE_CUDNN.value)} runs: its tests wait for that census")
    start, note = few_workers(cr.cell, cr.posargs, scope.basis)
    if note is not None:
        log(note)
    try:
        outcome = run_mode(run, scratch.workdir, [*cr.posargs, *start], cr.voice,
                           Launch(later=KeepLater(scope.basis, start, scope.kept)))
    except EarlyAbandoned as exc:
        log(f"{session}: the early start is given up after {exc.waited_s} s ({exc}): no test ran in it")
        remove_workdir(scratch.workdir)
        scratch.workdir = new_workdir(session, cr.voice)
        return None
    if not scope.came and outcome.interrupt is not None:
        # stopped while it waited: no test ran, as none would have serially; nothing is stored, and the
        # session's last result stays current
        log(f"{session}: stopped while it waited for its census: nothing stored")
        raise outcome.interrupt
    return outcome


def _run_known_early(cr: CellRuns, run: ModeRun, scratch: Scratch, scope: TeethScope) -> RunOutcome:
    """A "known" teeth started beside its require_cudnn: it runs at once, on the cut decided from the runs on record
    (knowncut.py), then waits for that require_cudnn's census, handed over once stored, to be judged by it. Its
    tests never wait: require_cudnn ends only when normal does, and teeth after it was the cell's critical path.
    An interrupt while it waits stores the run it made as stopped (a reason, never a pass), then stops nox."""
    log = cr.voice.log
    log(f"{run.session}: started beside {cr.cell.mode_session(Mode.REQUIRE_CUDNN.value)}: {term(scope.cut.why)}")
    outcome = run_mode(run, scratch.workdir, list(cr.posargs), cr.voice, Launch(drop=scope.cut.drop or []))
    if outcome.interrupt is not None or outcome.stopped:  # judged as any stopped run; no census is waited for
        return outcome
    log(f"{run.session}: its tests ran; waiting for the census of {cr.cell.mode_session(Mode.REQUIRE_CUDNN.value)} "
        "to judge its coverage by")
    try:
        with Signals():  # SIGTERM too: Interrupted, stored as a stopped run like Ctrl-C
            scope.wait()
    except KeyboardInterrupt as exc:
        outcome.interrupt = exc
        outcome.stopped = "interrupted while it waited for its require_cudnn census: its coverage is not judged"
        log(f"{run.session}: {outcome.stopped}")
    return outcome


def with_libset(cell: Cell, resolved: Resolved, workspace: Workspace, voice: Voice) -> Resolved:
    """A pip libs set installed (or reused) and its files pinned as its loader says."""
    if not cell.libs.pip:
        return resolved
    where = libsets.ensure(cell.libs, resolved.wheelhouse, cell.settings.offline, workspace.venvs_dir, voice)
    files = libsets.files_in(where)
    if not files:
        raise BuildError(f"libs set {cell.libs.id}: {where} holds no library to pin")
    if cell.libs.loader == "ort_preload_dlls":
        # preload_dlls(directory=...) looks for every file in that one dir: the set's cuDNN dir. Only the
        # files there are pinned; anything else it loads by name from the default paths.
        cudnn = [f for f in files if kind(f) == "cudnn"]
        directory = os.path.dirname(cudnn[0] if cudnn else files[0])
        here = tuple(f for f in files if os.path.dirname(f) == directory)
        return dataclasses.replace(resolved, preload=(), pinned=here, loader_spec=f"ort_preload_dlls:{directory}")
    return dataclasses.replace(resolved, preload=files, pinned=files)


def run_cell(cr: CellRuns, modes: Sequence[str], overlap: Overlap | None = None) -> list[Result]:
    """The cell's modes, one after another in this process; with `overlap` (a cell session), at once on its
    GPU where the host has room (overlap.py), the decision and its reasons logged either way."""
    ws, cell, log = cr.workspace, cr.cell, cr.voice.log
    cores()  # a bad MATRIX_CORES stops the cell here, before anything is built or retired
    if ws.cache_dir is not None:
        mark_cache_dir(ws.cache_dir)
    problems = pinned_files(cell, ws)[1]  # the sonames too, which `nox -l` leaves to this moment
    if problems:
        raise MatrixError(problems)
    resolved = with_libset(cell, cr.resolved, ws, cr.voice)
    source = ortsource.find(Path(resolved.suite_root))  # the ORT release the tests come from, if any
    if source is not None:
        log(f"tests from the ORT tree {source.path}: {source.label()}")
    cr = dataclasses.replace(cr, resolved=resolved, source=source)
    chosen = [m for m in MODES if m in modes]
    with ensure_venv(cell, resolved, ws.venvs_dir, cr.voice) as venv:
        room = room_for(cr, chosen, overlap.wanted) if overlap and len(chosen) > 1 else None
        if room is not None:
            log(f"{cell.name}: {'overlapping' if room.slots > 1 else 'one after another'}: {room.slots} mode run(s) "
                f"at once on one GPU ({room.why})")
        if room is None or room.slots < 2:
            return [run_one(cr, venv, mode) for mode in chosen]
    assert overlap is not None  # the venv's lock is let go: the children take it, each for its own run
    return run_overlapped(cr, chosen, room, overlap.noxfile)
