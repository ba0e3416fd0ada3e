"""One cell's modes end to end: venv, run, judge, store. No nox in here.

Modes run in canonical order, and each stored Result is kept in `earlier` for
the rest of the nox process, so teeth checks its coverage against the
require_cudnn census made moments before in the same venv, passed forward in
memory rather than read back from a results dir that another run may have
written. A `--gpus` sweep runs teeth in a child process of its own: its parent
names the require_cudnn run it saw that child's sibling store in this sweep
(`census_from_store`), and the child reads that run's own bundle, never the
session's current file. Either way the census counts only when it came from
the same venv fingerprint.

With `teeth_scope = "cudnn"`, teeth runs only the tests that census says
dispatched cuDNN, plus those `known_toothless` names. Without a census it does
not run at all: it fails and says why, rather than silently run everything.

A cell session (`overlap`) may instead run its modes at once on its GPU, as children through the
sweep's scheduler (overlap.py), where room.py finds room; the decision is logged either way.

Each mode run holds its session's lock from start to stored result, so two runs
of one session wait for each other instead of interleaving; its private dir is
removed whatever happens; and an interrupted run still stores a failing result
before the interrupt goes on to stop nox.
"""
from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Protocol

from filelock import FileLock, Timeout

from ..config.model import Matrix, TeethExpect
from ..config.modes import MODES, Mode, spec
from ..envs import libsets
from ..envs.venvs import BuildError, Venv, ensure_venv
from ..execute.junit import JunitError, read
from ..execute.mode_run import EarlyAbandoned, KeepLater, RunOutcome, not_started, remove_workdir, run_mode
from ..host import ortsource
from ..host.elf import kind
from ..host.host import Resolved, pinned_files
from ..host.ortsource import SourceTree
from ..host.room import cores, workers_of
from ..judge.expected import expected_of
from ..judge.outcomes import collected
from ..judge.verdicts import judge, outcome_judge, refused, scoped, tests_of
from ..judge.witnesses import Evidence
from ..plan.cells import Cell
from ..store import results
from ..store.results import Result
from ..util.errors import MatrixError
from ..util.escape import term
from ..util.fs import mark_cache_dir
from ..util.orphans import new_workdir
from . import earlyteeth
from .handoff import HandoffError, wait_ref
from .overlap import Overlap, room_for, run_overlapped


class Watch(Protocol):
    """Who watches a sweep's mode runs in this process (progress.Watch): told as each starts and ends."""

    def mode_started(self, session: str) -> None: ...
    def mode_ended(self, result: Result) -> None: ...


def _prior(earlier: Mapping[str, Result], cell: Cell, mode: str, fingerprint: dict[str, object]) -> Result | None:
    source = spec(mode).coverage_from
    if source is None:
        return None
    prior = earlier.get(cell.mode_session(source.value))
    return prior if prior is not None and prior.venv.fingerprint == fingerprint else None


class Earlier(dict[str, Result]):
    """This process's results that a later mode reads (teeth's census), by session; and `later`: the
    require_cudnn sessions whose census a parent hands over while this process runs (a teeth started early,
    handoff.py), each with the file it comes in."""

    def __init__(self, found: Mapping[str, Result] | None = None, later: Mapping[str, Path] | None = None) -> None:
        super().__init__(found or {})
        self.later = dict(later or {})


def handed_over(args: Sequence[str]) -> dict[str, Path]:
    """`--census-file SESSION=PATH` arguments, by session (a parent's own, so a malformed one is a bug: it says so)."""
    out = {}
    for arg in args:
        session, sep, path = arg.partition("=")
        if not sep or not session or not path:
            raise CensusError(f"--census-file {arg!r}: expected SESSION=PATH (an argument a parent sweep gives)")
        out[session] = Path(path)
    return out


def _later(earlier: Mapping[str, Result], cell: Cell, mode: str) -> Path | None:
    source = spec(mode).coverage_from
    if source is None or cell.suite.teeth_scope != "cudnn" or not isinstance(earlier, Earlier):
        return None
    return earlier.later.get(cell.mode_session(source.value))


def _handed(path: Path, results_dir: Path, cell: Cell, mode: str, fingerprint: dict[str, object],
            log: Callable[[str], None]) -> Result | None:
    """The census the parent handed over, as `_prior` would have it; None (and why, logged) where there is none."""
    session = cell.mode_session(mode)
    try:
        ref, why = wait_ref(path)  # unbounded: the parent always writes it, and this process dies with the parent
        if ref is None:
            log(f"{session}: no census was handed over: {term(why or '')}")  # read from a file: escaped
            return None
        found = census_from_store(results_dir, ref)
    except (HandoffError, CensusError) as exc:
        log(f"{session}: {exc}")
        return None
    return _prior({found.session: found}, cell, mode, fingerprint)


class CensusError(Exception):
    """A --census reference that names no require_cudnn run in the results dir; the message says which."""


_RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$")


def census_from_store(results_dir: Path, ref: str) -> Result:
    """`SESSION=RUN_ID`: the require_cudnn run a --gpus parent saw its child store in this sweep, read from that
    run's own bundle. Its venv fingerprint is checked against teeth's own when teeth uses it (`_prior`)."""
    session, sep, run_id = ref.partition("=")
    if not sep or not _RUN_ID.match(run_id) or not session or "/" in session or session.startswith("."):
        raise CensusError(f"--census {ref!r}: expected SESSION=RUN_ID, e.g. gpu-3.12-x-require_cudnn=20261130T061203Z-3fa2c1d8")
    path = results_dir / "runs" / session / run_id / "result.json"
    try:
        found = results.load(path)
    except results.ResultError as exc:
        raise CensusError(f"the require_cudnn census {ref} cannot be read: {exc}") from None
    if (found.session, found.run_id, found.mode) != (session, run_id, Mode.REQUIRE_CUDNN.value):
        raise CensusError(f"{path} holds {found.session} run {found.run_id} ({found.mode}), not {ref}")
    return found


def censuses(results_dir: Path, refs: Sequence[str], warn: Callable[[str], None]) -> dict[str, Result]:
    """The require_cudnn runs a --gpus parent named (`--census`), by session; one that cannot be read is left out
    with a warning, and the teeth that needed it then says it had no census."""
    found = {}
    for ref in refs:
        try:
            result = census_from_store(results_dir, ref)
        except CensusError as exc:
            warn(str(exc))
            continue
        found[result.session] = result
    return found


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
    named = {n for n in collected(prior.outcomes) if any(re.search(rule.test, n) for rule in expect.known_toothless)}
    keep = sorted(set(prior.dispatch.cudnn_tests()) | named)
    if not keep:
        return None, (f'teeth_scope = "cudnn": {source} dispatched no cuDNN test and known_toothless names none of '
                      "its tests: teeth has nothing to run")
    return keep, None


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


def few_workers(cell: Cell, posargs: Sequence[str], keep: Sequence[str] | None, log: Callable[[str], None]) -> list[str]:
    """A scoped run of fewer tests than its -n starts no worker that would run nothing: -n K, or no xdist for one
    test. Every worker pays the whole start (interpreter, torch, ORT); on CPU a 1-test teeth took 18.3 s at
    -n 2 against 11.4 s in one process (bench/one_gpu.py). Which tests run, and so every figure, is unchanged."""
    if keep is None:
        return []
    asked = workers_of([*cell.suite.pytest_args, *posargs], cores())
    if asked <= 1 or len(keep) >= asked:
        return []
    given = len(keep) if len(keep) > 1 else 0
    log(f"{cell.mode_session(Mode.TEETH.value)}: {len(keep)} test(s) to run: -n {given} instead of -n {asked}")
    return ["-n", str(given)]


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
            source: SourceTree | None = None, watch: Watch | None = None) -> Result:
    ws = matrix.workspace
    session = cell.mode_session(mode)
    if watch is not None:
        watch.mode_started(session)
    lock = session_lock(ws.results_dir, session, log)
    try:
        early_path = _later(earlier, cell, mode) is not None and _prior(earlier, cell, mode, venv.fingerprint) is None
        basis = earlyteeth.basis(ws.results_dir, session) if early_path else None
        if not early_path:  # a teeth that waits for its census retires its last result once the census came
            results.retire_current(ws.results_dir, session)
        log(f"{session}: pytest in a private dir, LD_PRELOAD={':'.join(resolved.preload) or '(none)'}")
        workdir = new_workdir(session, log)
        try:
            prior = _prior(earlier, cell, mode, venv.fingerprint)
            early: RunOutcome | None = None
            if early_path and (later := _later(earlier, cell, mode)) is not None:
                early, prior, workdir, handed = _run_early(cell, resolved, venv, mode, workdir, posargs, later, basis,
                                                           ws.results_dir, echo, log)
                if early is not None and not handed and early.interrupt is not None:
                    # stopped while it waited: no test ran, as none would have serially; nothing is stored,
                    # and the session's last result stays current
                    log(f"{session}: stopped while it waited for its census: nothing stored")
                    raise early.interrupt
            keep, refusal = teeth_selection(cell, mode, prior)
            if early is not None:  # it ran (or was interrupted while it waited): judged as any run is
                outcome = early
                verdict = judge(outcome_judge(mode), cell.suite.expect[mode], evidence(outcome), resolved.pinned,
                                str(venv.path), prior.dispatch if prior is not None else None, source,
                                cell=cell.name)
                verdict = scoped(verdict, cell.suite.teeth_scope, None if keep is None else len(keep))
            elif refusal is not None:
                log(f"{session}: not run: {refusal}")
                outcome = not_started(workdir, refusal)
                verdict = refused(refusal, cell.suite.teeth_scope)
            else:
                if keep is not None:
                    log(f"{session}: teeth_scope cudnn: {len(keep)} test(s) of {len(prior.outcomes) if prior else 0} "
                        f"from {prior.session if prior else '?'} run {prior.run_id if prior else '?'}")
                outcome = run_mode(cell, resolved, venv, mode, workdir, [*posargs, *few_workers(cell, posargs, keep, log)],
                                   echo, log, keep=keep)
                verdict = judge(outcome_judge(mode), cell.suite.expect[mode], evidence(outcome), resolved.pinned,
                                str(venv.path), prior.dispatch if prior is not None else None, source,
                                cell=cell.name)
                if spec(mode).coverage_from is not None:
                    verdict = scoped(verdict, cell.suite.teeth_scope, None if keep is None else len(keep))
            result = results.build(session, mode, cell, venv.path, venv.fingerprint, outcome, verdict,
                                   results.new_run_id(outcome.started), source)
            result = dataclasses.replace(result, expected=expected_of(cell.suite.expect[mode], tests_of(outcome.report),
                                                                      verdict.teeth_coverage))
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
    if watch is not None:
        watch.mode_ended(stored)
    if outcome.interrupt is not None:
        raise outcome.interrupt  # stored first; now stop nox, as the signal asked
    return stored


def _run_early(cell: Cell, resolved: Resolved, venv: Venv, mode: str, workdir: Path, posargs: Sequence[str],
               later: Path, basis: list[str] | None, results_dir: Path, echo: Callable[[str], None],
               log: Callable[[str], None]) -> tuple[RunOutcome | None, Result | None, Path, bool]:
    """A teeth started before its census is stored: pytest collects on the files of its last run while
    require_cudnn runs, and keeps what the handed-over census says (run.py's KeepLater). Returns (the outcome,
    or None where nothing ran and the caller goes on as after require_cudnn; the census; the workdir to use;
    whether the census came). The session's last result is retired only once it came."""
    session = cell.mode_session(mode)
    got: dict[str, Result | None] = {}

    def resolve() -> list[str] | None:
        got["prior"] = prior = _handed(later, results_dir, cell, mode, venv.fingerprint, log)
        results.retire_current(results_dir, session)
        keep, _ = teeth_selection(cell, mode, prior)
        if keep is not None and prior is not None:
            log(f"{session}: teeth_scope cudnn: {len(keep)} test(s) of {len(prior.outcomes)} from {prior.session} "
                f"run {prior.run_id}")
        return keep

    if basis is None:  # no last run to start on: wait for the census, then start as after require_cudnn
        log(f"{session}: no earlier run of it to start on: waiting for the census first")
        prior = _handed(later, results_dir, cell, mode, venv.fingerprint, log)
        results.retire_current(results_dir, session)
        return None, prior, workdir, True
    log(f"{session}: started early, on the files of its last run ({len(basis)} test(s)), while "
        f"{cell.mode_session(Mode.REQUIRE_CUDNN.value)} runs: its tests wait for that census")
    try:
        outcome = run_mode(cell, resolved, venv, mode, workdir, [*posargs, *few_workers(cell, posargs, basis, log)],
                           echo, log, later=KeepLater(basis, resolve,
                                                      lambda keep: few_workers(cell, posargs, keep, lambda _: None)))
    except EarlyAbandoned as exc:
        log(f"{session}: the early start is given up after {exc.waited_s} s ({exc}): no test ran in it")
        remove_workdir(workdir)
        return None, got.get("prior"), new_workdir(session, log), True
    return outcome, got.get("prior"), workdir, "prior" in got


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
             echo: Callable[[str], None] = print, overlap: Overlap | None = None,
             watch: Watch | None = None) -> list[Result]:
    """The cell's modes, one after another in this process; with `overlap` (a cell session), at once on its
    GPU where the host has room (overlap.py), the decision and its reasons logged either way."""
    ws = matrix.workspace
    cores()  # a bad MATRIX_CORES stops the cell here, before anything is built or retired
    if ws.cache_dir is not None:
        mark_cache_dir(ws.cache_dir)
    problems = pinned_files(matrix, cell)[1]  # the sonames too, which `nox -l` leaves to this moment
    if problems:
        raise MatrixError(problems)
    resolved = with_libset(matrix, cell, resolved, log)
    source = ortsource.find(Path(resolved.suite_root))  # the ORT release the tests come from, if any
    if source is not None:
        log(f"tests from the ORT tree {source.path}: {source.label()}")
    chosen = [m for m in MODES if m in modes]
    with ensure_venv(matrix, cell, resolved, log) as venv:
        room = room_for(matrix, cell, chosen, posargs, overlap.wanted) if overlap and len(chosen) > 1 else None
        if room is not None:
            log(f"{cell.name}: {'overlapping' if room.slots > 1 else 'one after another'}: {room.slots} mode run(s) "
                f"at once on one GPU ({room.why})")
        if room is None or room.slots < 2:
            return [run_one(matrix, cell, resolved, venv, mode, posargs, earlier, log, echo, source, watch)
                    for mode in chosen]
    assert overlap is not None  # the venv's lock is let go: the children take it, each for its own run
    return run_overlapped(matrix, cell, chosen, posargs, room, overlap.noxfile, earlier, log)
