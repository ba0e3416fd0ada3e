"""A sweep confirms before it counts: each mode's suspects rerun, and each result re-judged and re-stored.

What is a suspect and whether a rerun reproduced it is decided in compare/suspects.py; this module
runs the reruns. Each suspect test reruns up to N times in a fresh test process of the same venv,
mode and libraries, and under the same GPU: a --gpus sweep's reruns run in its own process after
the slots, each given what its first run's slot set (`given`: CUDA_VISIBLE_DEVICES, NCCL_NVLS_ENABLE;
gpus.slot_env). The tests of one mode rerun together, one process per rerun (node ids in a file the
probe reads, as a scoped teeth does), so confirmation adds at most N short runs per mode. A test
whose every check some rerun already failed to reproduce is not rerun again.

A rerun is a mode run like any other: its own private 0700 dir, the probe, the fd tap, the library
audit, its own bundle under runs/<session>/ (never the session's current result). Once the reruns
are done, a mode whose tests did not all reproduce is judged again by the judge (judge/rejudge.py)
with those tests as their clearing rerun gave them, and the result takes its verdict, reasons,
counts, census, coverage, tier-rule breaks and EP census (the cross-checks, audit and warnings of
the first run stay). The first run's verdict, reasons and counts stay in the result's
`confirmation`, and its probe report, with every outcome, in its bundle.
"""
from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..compare.suspects import Suspects, suspects
from ..config.modes import spec
from ..config.overrides import Workspace
from ..envs.venvs import Venv, ensure_venv
from ..execute.mode_run import run_mode
from ..execute.request import Launch, ModeRun
from ..host.host import Resolved
from ..host.room import cores, decide, gpu_memory, workers_of
from ..judge.counts import TestResult, collected_of, count
from ..judge.libraries import library_audit
from ..judge.outcomes import test_of
from ..judge.rejudge import rejudge
from ..judge.verdicts import Standard, outcome_judge, tests_of
from ..judge.witnesses import cross_checks
from ..plan.cells import Cell
from ..store import results as store
from ..store.baseline import Baseline
from ..store.confirmation import Rerun
from ..store.results import Result
from ..util.escape import term
from ..util.voice import Voice
from .attempt import evidence, keep, locked, session_lock, verdict_of
from .cell import with_libset
from .overlap import ask_of

DEFAULT = 2  # --confirm N: reruns per mode with something to confirm


@dataclass(frozen=True)
class ConfirmSettings:
    """How a sweep confirms: `n` reruns per mode with something to confirm, with the sweep's posargs.

    `given`: session -> what its run's slot set over the sweep's environment; each rerun gets it again.
    `wanted`: the sweep's --slots-per-gpu (None: auto), how many of a cell's mode reruns share the GPU at once.
    `voice`: who hears the reruns (util/voice.py)."""

    workspace: Workspace
    n: int
    voice: Voice
    posargs: tuple[str, ...] = ()
    given: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    wanted: int | None = None

    def given_to(self, m: Suspects) -> Mapping[str, str]:
        """What the first run of `m` was given by its slot (gpus.slot_env): its reruns get it again."""
        return self.given.get(m.result.session, {})


def _rerun(rr: ConfirmSettings, run: ModeRun, m: Suspects, keep_ids: list[str], extra: Sequence[str],
           started_group: Callable[[int], None] | None = None) -> tuple[Result, dict[str, TestResult], list[str]]:
    """One confirmation rerun: a mode run in a private dir with only `keep_ids`, stored as a bundle of its own."""
    with locked(run, rr.voice) as scratch:
        outcome = run_mode(run, scratch.workdir, extra, rr.voice,
                           Launch(keep=keep_ids, given=rr.given_to(m), started_group=started_group))
        verdict = verdict_of(run, outcome)
        ev = evidence(outcome)
        tests = tests_of(outcome.report)
        problems = cross_checks(ev, tests, count(outcome.report, tests, collected_of(outcome.report, ev.collected)))
        problems += library_audit(outcome.report, run.resolved.pinned, str(run.venv.path))[1]
        stored = keep(run, outcome, verdict, rerun_of=m.result.run_id)
    if outcome.interrupt is not None:
        raise outcome.interrupt
    return stored, {t.nodeid: t for t in tests}, problems


def _amend(m: Suspects, prior: Result | None, n: int) -> Result:
    """The result with the tests that did not reproduce judged by their clearing rerun, and the record."""
    r, mode = m.result, m.result.mode
    record = m.confirmation(n)
    if not m.substitute:
        return dataclasses.replace(r, confirmation=record)
    census_from = prior.dispatch if prior is not None and prior.venv.fingerprint == r.venv.fingerprint else None
    again = rejudge(Standard(outcome_judge(mode), m.cell.suite.expect[mode]), m.report, m.substitute, r, census_from)
    # the breaks follow the amended tests, as the reasons do: the tier table and the unexpected marks read them
    breaks = [b.record(mode) for b in again.tier_breaks]
    return dataclasses.replace(r, verdict=again.status, reasons=again.reasons, counts=again.counts,
                               dispatch=again.dispatch, teeth_coverage=again.teeth_coverage, tier_breaks=breaks,
                               outcomes=again.outcomes, confirmation=record, ep=again.ep)


def _side_by_side(batch: list[tuple[Suspects, list[str]]],
                  one: Callable[[Suspects, list[str], Callable[[int], None] | None], None]) -> None:
    """The batch's first rerun on this thread, where an interrupt lands; the others in threads, each of whose
    process groups is stopped (SIGINT) when it does."""
    live: set[int] = set()  # the process groups of the side reruns still running

    def tracked(m: Suspects, selected: list[str]) -> None:
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


def _round(rr: ConfirmSettings, todo: list[tuple[Suspects, list[str]]], resolved: Resolved, venv: Venv, k: int) -> None:
    """Rerun k of n of one cell's modes: each its own process, side by side on the GPU where the host has room.

    The modes' reruns are independent (each its own private dir, fd tap, audit and bundle), like a cell's
    normal and require_cudnn (room.py decides how many share the GPU, and cuts -n to the cores' share).
    Within one round no rerun reads another's result; rounds stay in order, since a round reruns only what
    the rounds before it have not cleared. The first rerun runs on this thread, where an interrupt lands;
    the others, in threads, are stopped (SIGINT to their process group) when it does.
    """
    if not todo:
        return
    n, posargs, log, cell = rr.n, rr.posargs, rr.voice.log, todo[0][0].cell
    own = workers_of([*cell.suite.pytest_args, *posargs], cores())
    ask = ask_of([(cell, [m.result.mode for m, _ in todo])], posargs, rr.workspace.results_dir, rr.wanted, len(todo))
    gpu = rr.given_to(todo[0][0]).get("CUDA_VISIBLE_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES")
    room = decide(ask, cores(), gpu_memory(gpu))
    if len(todo) > 1:
        log(f"confirm: {cell.name}: rerun {k} of {n}: {room.slots} mode rerun(s) at once ({room.why})")
    extra = [*posargs, *room.pytest_args(own)] if room.slots > 1 else list(posargs)

    def one(m: Suspects, selected: list[str], started: Callable[[int], None] | None) -> None:
        keep = sorted({test_of(t) for t in selected})
        gpu = rr.given_to(m).get("CUDA_VISIBLE_DEVICES")
        log(f"confirm: {m.result.session}: rerun {k} of {n}, {len(keep)} test(s)"
            + (f" on gpu {gpu}, as its first run" if gpu else ""))
        run = ModeRun(m.cell, m.result.mode, resolved, venv, rr.workspace)
        stored, got, problems = _rerun(rr, run, m, keep, extra, started)
        m.reruns.append(Rerun(stored.run_id, stored.bundle, len(keep), stored.duration_s, problems))
        for p in problems:
            log(f"confirm: {m.result.session}: rerun {k} cannot clear anything: {term(p)}")
        m.weigh(selected, got, problems)

    for at in range(0, len(todo), room.slots):
        _side_by_side(todo[at:at + room.slots], one)


def _store(rr: ConfirmSettings, m: Suspects, results: list[Result]) -> Result:
    """One mode's confirmed result, amended and stored over the first run's (see store_amended)."""
    log, ws = rr.voice.log, rr.workspace
    source = spec(m.result.mode).coverage_from
    prior = None if source is None else next(
        (r for r in results if r.cell.name == m.cell.name and r.mode == source.value), None)
    new = _amend(m, prior, rr.n)
    lock = session_lock(ws.results_dir, new.session, rr.voice)
    try:
        if not store.store_amended(ws.results_dir, new):
            log(f"confirm: {new.session}: a newer run of it is the current result now; the confirmed one is "
                f"in its bundle {new.bundle}")
    finally:
        lock.release()
    for t in new.confirmation.tests if new.confirmation else []:
        if t.unconfirmed:
            log(f"confirm: {new.session}: {term(t.test)}: not reproduced ({', '.join(t.unconfirmed)}); "
                f"runs: {term(' | '.join(t.runs))}")
    if new.verdict is not m.result.verdict:
        log(f"confirm: {new.session}: {m.result.verdict.value.upper()} -> {new.verdict.value.upper()} "
            "(what the confirmed tests show)")
    return new


def confirm(rr: ConfirmSettings, runnable: Sequence[tuple[Cell, tuple[str, ...], Resolved]], results: list[Result],
            before: Baseline | None) -> list[Result]:
    """The sweep's results with every change confirmed or not (see the module doc); each amended result re-stored."""
    if rr.n <= 0:
        return results
    n, ws = rr.n, rr.workspace
    resolved_of = {c.name: r for c, _, r in runnable}
    modes = suspects({c.name: c for c, _, _ in runnable}, results, before)
    by_cell: dict[str, list[Suspects]] = {}
    for m in modes:
        by_cell.setdefault(m.cell.name, []).append(m)
    for ms in by_cell.values():
        cell = ms[0].cell
        resolved = with_libset(cell, resolved_of[cell.name], ws, rr.voice)
        with ensure_venv(cell, resolved, ws.venvs_dir, rr.voice) as venv:
            for k in range(1, n + 1):
                todo = [(m, m.pending()) for m in ms]
                _round(rr, [(m, selected) for m, selected in todo if selected], resolved, venv, k)
    amended = {}
    for m in modes:
        new = _store(rr, m, results)
        amended[new.session] = new
    return [amended.get(r.session, r) for r in results]
