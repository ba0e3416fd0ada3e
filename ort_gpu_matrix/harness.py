"""One cell's modes end to end: venv, run, judge, store. No nox in here.

Modes run in canonical order, and each stored Result is kept in `earlier` for
the rest of the nox process, so teeth checks its coverage against the
require_cudnn census made moments before in the same venv, passed forward in
memory rather than read back from a results dir that another run may have
written.

Each mode run holds its session's lock from start to stored result, so two runs
of one session wait for each other instead of interleaving; its private dir is
removed whatever happens; and an interrupted run still stores a failing result
before the interrupt goes on to stop nox.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path

from filelock import FileLock, Timeout

from . import libsets, ortsource, results
from .cells import Cell
from .config.model import Matrix
from .elf import kind
from .errors import MatrixError
from .fsutil import mark_cache_dir
from .host import Resolved, pinned_files
from .junit import JunitError, read
from .modes import MODES, spec
from .ortsource import SourceTree
from .render.escape import term
from .results import Result
from .run import RunOutcome, new_workdir, remove_workdir, run_mode
from .venvs import BuildError, Venv, ensure_venv
from .verdicts import Dispatch, Evidence, judge


def _prior(earlier: Mapping[str, Result], cell: Cell, mode: str, fingerprint: dict[str, object]) -> Dispatch | None:
    source = spec(mode).coverage_from
    if source is None:
        return None
    prior = earlier.get(cell.mode_session(source.value))
    return prior.dispatch if prior is not None and prior.venv.fingerprint == fingerprint else None


def evidence(outcome: RunOutcome) -> Evidence:
    """Every witness the run left, read once here, for the verdict to weigh."""
    junit, problem = None, None
    if outcome.report is not None or outcome.report_problem:
        try:
            junit = read(outcome.junit)
        except JunitError as exc:
            problem = str(exc)
    return Evidence(outcome.exit_code, outcome.report, outcome.report_sha256, outcome.report_problem, outcome.digest,
                    junit, problem, outcome.progress.collected, outcome.stopped, outcome.progress.running)


def session_lock(results_dir: Path, session: str, log: Callable[[str], None]) -> FileLock:
    locks = results_dir / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    lock = FileLock(locks / f"{session}.lock")
    try:
        lock.acquire(blocking=False)
    except Timeout:
        log(f"{session}: waiting for another run of it to finish (lock {lock.lock_file})")
        lock.acquire()
    return lock


def run_one(matrix: Matrix, cell: Cell, resolved: Resolved, venv: Venv, mode: str, posargs: Sequence[str],
            earlier: MutableMapping[str, Result], log: Callable[[str], None], echo: Callable[[str], None],
            source: SourceTree | None = None) -> Result:
    ws = matrix.workspace
    session = cell.mode_session(mode)
    lock = session_lock(ws.results_dir, session, log)
    try:
        results.retire_current(ws.results_dir, session)
        log(f"{session}: pytest in a private dir, LD_PRELOAD={':'.join(resolved.preload) or '(none)'}")
        workdir = new_workdir(session)
        try:
            outcome = run_mode(cell, resolved, venv, mode, workdir, posargs, echo, log)
            verdict = judge(spec(mode).judge, cell.suite.expect[mode], evidence(outcome), resolved.pinned,
                            str(venv.path), _prior(earlier, cell, mode, venv.fingerprint), source, cell=cell.name)
            result = results.build(session, mode, cell, venv.path, venv.fingerprint, outcome, verdict,
                                   results.new_run_id(outcome.started), source)
            stored = results.store(ws.results_dir, result, {"log": outcome.log, "junit": outcome.junit,
                                                            "report": outcome.report_path})
        finally:
            if not ws.keep_workdir:
                remove_workdir(workdir)
    finally:
        lock.release()
    earlier[session] = stored
    log(f"{session}: {stored.verdict.value.upper()} -> {results.current_path(ws.results_dir, session)}")
    for reason in stored.reasons:
        log(f"  reason: {term(reason)}")
    for warning in stored.warnings:
        log(f"  warning: {term(warning)}")
    if outcome.interrupt is not None:
        raise outcome.interrupt  # stored first; now stop nox, as the signal asked
    return stored


def with_libset(matrix: Matrix, cell: Cell, resolved: Resolved, log: Callable[[str], None]) -> Resolved:
    """A pip libs set installed (or reused) and its files pinned as its loader says."""
    if not cell.libs.pip:
        return resolved
    where = libsets.ensure(matrix, cell.libs, resolved.wheelhouse, log)
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


def run_cell(matrix: Matrix, cell: Cell, resolved: Resolved, modes: Sequence[str], posargs: Sequence[str],
             earlier: MutableMapping[str, Result], log: Callable[[str], None] = print,
             echo: Callable[[str], None] = print) -> list[Result]:
    ws = matrix.workspace
    if ws.cache_dir is not None:
        mark_cache_dir(ws.cache_dir)
    problems = pinned_files(matrix, cell)[1]  # the sonames too, which `nox -l` leaves to this moment
    if problems:
        raise MatrixError(problems)
    resolved = with_libset(matrix, cell, resolved, log)
    source = ortsource.find(Path(resolved.suite_root))  # the ORT release the tests come from, if any
    if source is not None:
        log(f"tests from the ORT tree {source.path}: {source.label()}")
    with ensure_venv(matrix, cell, resolved, log) as venv:
        return [run_one(matrix, cell, resolved, venv, mode, posargs, earlier, log, echo, source)
                for mode in MODES if mode in modes]
