"""One cell's modes end to end: libs set, venv, run, judge, store. No nox in here.

Modes run in canonical order, and each stored Result is kept in `earlier` for the rest of the nox
process, where teeth finds the require_cudnn census made moments before in the same venv
(census.py says where else a census may come from, and when it counts).

With `teeth_scope = "cudnn"`, teeth runs only the tests that census says
dispatched cuDNN, plus those `known_toothless` names. Without a census it does
not run at all: it fails and says why, rather than silently run everything.

A cell session (`overlap`) may instead run its modes at once on its GPU, as children through the
sweep's scheduler (overlap.py), where room.py finds room; the decision is logged either way.
Each mode run goes from its session's lock to its stored result through attempt.py, and an
interrupted run still stores a failing result before the interrupt goes on to stop nox.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ..config.model import TeethExpect
from ..config.modes import MODES, Mode, spec
from ..config.overrides import Workspace
from ..envs import libsets
from ..envs.venvs import BuildError, Venv, ensure_venv
from ..execute.mode_run import EarlyAbandoned, RunOutcome, not_started, remove_workdir, run_mode
from ..execute.request import KeepLater, Launch, ModeRun
from ..host import ortsource
from ..host.elf import kind
from ..host.host import Resolved, pinned_files
from ..host.room import cores, workers_of
from ..judge.covers import rule_covers
from ..judge.outcomes import collected, test_of
from ..judge.verdicts import Verdict, refused, scoped
from ..plan.cells import Cell
from ..store import results
from ..store.results import Result
from ..util.errors import MatrixError
from ..util.escape import term
from ..util.fs import mark_cache_dir
from ..util.orphans import new_workdir
from . import earlyteeth
from .attempt import Scratch, keep, locked, verdict_of
from .census import handed, later_of, prior_of
from .context import CellRuns
from .overlap import Overlap, room_for, run_overlapped


def teeth_selection(cell: Cell, mode: str, prior: Result | None) -> tuple[list[str] | None, str | None]:
    """For a scoped teeth: (the node ids to run, None), or (None, why it cannot run). (None, None): unscoped."""
    if spec(mode).coverage_from is None or cell.suite.teeth_scope == "all":
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


def few_workers(cell: Cell, posargs: Sequence[str], keep: Sequence[str] | None, log: Callable[[str], None]) -> list[str]:
    """A scoped run of fewer tests than its -n starts no worker that would run nothing: -n K, or no xdist for one
    test. Every worker pays the whole start (interpreter, torch, ORT), so an idle one only costs (bench/one_gpu.py
    measures it). Which tests run, and so every figure, is unchanged."""
    if keep is None:
        return []
    asked = workers_of([*cell.suite.pytest_args, *posargs], cores())
    if asked <= 1 or len(keep) >= asked:
        return []
    given = len(keep) if len(keep) > 1 else 0
    log(f"{cell.mode_session(Mode.TEETH.value)}: {len(keep)} test(s) to run: -n {given} instead of -n {asked}")
    return ["-n", str(given)]


def run_one(cr: CellRuns, venv: Venv, mode: str) -> Result:
    """One mode of the cell, from its session's lock to its stored result (attempt.py), with what it logs."""
    run = cr.mode_run(mode, venv)
    if cr.watch is not None:
        cr.watch.mode_started(run.session)
    outcome, stored = _attempt(cr, run)
    cr.earlier[run.session] = stored
    log = cr.log
    log(f"{run.session}: {stored.verdict.value.upper()} -> {results.current_path(cr.workspace.results_dir, run.session)}")
    for reason in stored.reasons:
        log(f"  reason: {term(reason)}")
    for warning in stored.warnings:
        log(f"  warning: {term(warning)}")
    if cr.watch is not None:
        cr.watch.mode_ended(stored)
    if outcome.interrupt is not None:
        raise outcome.interrupt  # stored first; now stop nox, as the signal asked
    return stored


def _attempt(cr: CellRuns, run: ModeRun) -> tuple[RunOutcome, Result]:
    cell, mode, fp, results_dir = cr.cell, run.mode, run.venv.fingerprint, cr.workspace.results_dir
    with locked(run, cr.log) as scratch:
        later = later_of(cr.earlier, cell, mode)
        early_path = later is not None and prior_of(cr.earlier, cell, mode, fp) is None
        basis = earlyteeth.basis(results_dir, run.session) if early_path else None
        if not early_path:  # a teeth that waits for its census retires its last result once the census came
            results.retire_current(results_dir, run.session)
        cr.log(f"{run.session}: pytest in a private dir, LD_PRELOAD={':'.join(run.resolved.preload) or '(none)'}")
        prior = prior_of(cr.earlier, cell, mode, fp)
        early: RunOutcome | None = None
        if early_path and later is not None:
            early, prior, handed = _run_early(cr, run, scratch, later, basis)
            if early is not None and not handed and early.interrupt is not None:
                # stopped while it waited: no test ran, as none would have serially; nothing is stored,
                # and the session's last result stays current
                cr.log(f"{run.session}: stopped while it waited for its census: nothing stored")
                raise early.interrupt
        outcome, verdict = _judged(cr, run, scratch, prior, early)
        return outcome, keep(run, outcome, verdict, cr.source)


def _judged(cr: CellRuns, run: ModeRun, scratch: Scratch, prior: Result | None,
            early: RunOutcome | None) -> tuple[RunOutcome, Verdict]:
    """The run (unless an early start already ran it, or teeth's scope refuses it) and its verdict."""
    cell, mode = cr.cell, run.mode
    keep_ids, refusal = teeth_selection(cell, mode, prior)
    census = prior.dispatch if prior is not None else None
    if early is not None:  # it ran (or was interrupted while it waited): judged as any run is
        verdict = verdict_of(run, early, census, cr.source)
        return early, scoped(verdict, cell.suite.teeth_scope, None if keep_ids is None else len(keep_ids))
    if refusal is not None:
        cr.log(f"{run.session}: not run: {refusal}")
        return not_started(scratch.workdir, refusal), refused(refusal, cell.suite.teeth_scope)
    if keep_ids is not None:
        cr.log(f"{run.session}: teeth_scope cudnn: {len(keep_ids)} test(s) of {len(prior.outcomes) if prior else 0} "
               f"from {prior.session if prior else '?'} run {prior.run_id if prior else '?'}")
    posargs = [*cr.posargs, *few_workers(cell, cr.posargs, keep_ids, cr.log)]
    outcome = run_mode(run, scratch.workdir, posargs, cr.echo, cr.log, Launch(keep=keep_ids))
    verdict = verdict_of(run, outcome, census, cr.source)
    if spec(mode).coverage_from is not None:
        verdict = scoped(verdict, cell.suite.teeth_scope, None if keep_ids is None else len(keep_ids))
    return outcome, verdict


def _run_early(cr: CellRuns, run: ModeRun, scratch: Scratch, later: Path,
               basis: list[str] | None) -> tuple[RunOutcome | None, Result | None, bool]:
    """A teeth started before its census is stored: pytest collects on the files of its last run while
    require_cudnn runs, and keeps what the handed-over census says (mode_run.py's KeepLater). Returns (the outcome,
    or None where nothing ran and the caller goes on as after require_cudnn; the census; whether the census
    came); `scratch` gets a fresh dir where the early start was given up. The session's last result is retired
    only once the census came."""
    cell, mode, session, log = cr.cell, run.mode, run.session, cr.log
    results_dir, fp = cr.workspace.results_dir, run.venv.fingerprint
    got: dict[str, Result | None] = {}

    def resolve() -> list[str] | None:
        got["prior"] = prior = handed(later, results_dir, cell, mode, fp, log)
        results.retire_current(results_dir, session)
        keep_ids, _ = teeth_selection(cell, mode, prior)
        if keep_ids is not None and prior is not None:
            log(f"{session}: teeth_scope cudnn: {len(keep_ids)} test(s) of {len(prior.outcomes)} from "
                f"{prior.session} run {prior.run_id}")
        return keep_ids

    if basis is None:  # no last run to start on: wait for the census, then start as after require_cudnn
        log(f"{session}: no earlier run of it to start on: waiting for the census first")
        prior = handed(later, results_dir, cell, mode, fp, log)
        results.retire_current(results_dir, session)
        return None, prior, True
    log(f"{session}: started early, on the files of its last run ({len(basis)} test(s)), while "
        f"{cell.mode_session(Mode.REQUIRE_CUDNN.value)} runs: its tests wait for that census")
    waiting = KeepLater(basis, resolve, lambda ids: few_workers(cell, cr.posargs, ids, lambda _: None))
    try:
        outcome = run_mode(run, scratch.workdir, [*cr.posargs, *few_workers(cell, cr.posargs, basis, log)],
                           cr.echo, log, Launch(later=waiting))
    except EarlyAbandoned as exc:
        log(f"{session}: the early start is given up after {exc.waited_s} s ({exc}): no test ran in it")
        remove_workdir(scratch.workdir)
        scratch.workdir = new_workdir(session, log)
        return None, got.get("prior"), True
    return outcome, got.get("prior"), "prior" in got


def with_libset(cell: Cell, resolved: Resolved, workspace: Workspace, log: Callable[[str], None]) -> Resolved:
    """A pip libs set installed (or reused) and its files pinned as its loader says."""
    if not cell.libs.pip:
        return resolved
    where = libsets.ensure(cell.libs, resolved.wheelhouse, cell.settings.offline, workspace.venvs_dir, log)
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
    ws, cell, log = cr.workspace, cr.cell, cr.log
    cores()  # a bad MATRIX_CORES stops the cell here, before anything is built or retired
    if ws.cache_dir is not None:
        mark_cache_dir(ws.cache_dir)
    problems = pinned_files(cell, ws)[1]  # the sonames too, which `nox -l` leaves to this moment
    if problems:
        raise MatrixError(problems)
    resolved = with_libset(cell, cr.resolved, ws, log)
    source = ortsource.find(Path(resolved.suite_root))  # the ORT release the tests come from, if any
    if source is not None:
        log(f"tests from the ORT tree {source.path}: {source.label()}")
    cr = dataclasses.replace(cr, resolved=resolved, source=source)
    chosen = [m for m in MODES if m in modes]
    with ensure_venv(cell, resolved, ws.venvs_dir, log) as venv:
        room = room_for(cr, chosen, overlap.wanted) if overlap and len(chosen) > 1 else None
        if room is not None:
            log(f"{cell.name}: {'overlapping' if room.slots > 1 else 'one after another'}: {room.slots} mode run(s) "
                f"at once on one GPU ({room.why})")
        if room is None or room.slots < 2:
            return [run_one(cr, venv, mode) for mode in chosen]
    assert overlap is not None  # the venv's lock is let go: the children take it, each for its own run
    return run_overlapped(cr, chosen, room, overlap.noxfile)
