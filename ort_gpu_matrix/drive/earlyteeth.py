"""When a scoped teeth starts before its require_cudnn has ended, so that its start is paid while that runs: in a
cell session (with the pair) and in a `--gpus` sweep (beside its require_cudnn).

A scoped teeth runs a fraction of the tests, so its start (interpreter, torch, ORT, collection) is most of its
time (docs/evidence/one-gpu-cells-h200.md has the figures). It cannot run a test before require_cudnn's
census is stored, but it can start before: its processes collect, then wait (the probe's keepwait.py) for the
census its parent hands over (handoff.py) the moment require_cudnn's child exits.

So a cell of normal, require_cudnn and a scoped teeth counts as three runs at once where the host has room
(room.py: the GPU's memory for three peaks, and the cores for three runs' workers, each -n cut to its share).
Starting teeth late instead, beside a pair that already holds every core, leaves no core for its collection,
which then ends after the census came and hides nothing; cutting each run's -n to its share of the cores
is what lets three start together without oversubscribing them.

For `teeth_scope = "cudnn"` and `"known"`: an unscoped teeth runs every test and would not wait, it would
compete. A "cudnn" teeth collects the files of its last run and is handed the node ids to keep. A "known" one
does not wait at all: it cuts by the runs on record before this one (knowncut.py), runs at once, and is handed
require_cudnn's census only to be judged by it. Its tests would otherwise wait for normal too, since a
require_cudnn that carries outcomes ends only when normal does (carry.py). A "known" teeth under --full, or of
a suite that sets `full`, runs every test: it is not started early.
"""
from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path

from ..config.modes import Mode
from ..judge.outcomes import collected
from ..plan.cells import Cell
from ..store.results import ResultError, current_path, load
from ..util.escape import term
from ..util.voice import Voice
from . import readback, scheduler
from .handoff import Handoff

FEW_SLOTS = 4  # below this, teeth start early only where every run of the plan can start at once (see mark)


def basis(results_dir: Path, session: str) -> list[str] | None:
    """The tests a teeth's last stored run kept: what an early start collects on (their files), None if none."""
    try:
        last = load(current_path(results_dir, session))
    except ResultError:
        return None
    kept = collected(last.outcomes)
    return kept or None


def possible(cell: Cell, modes: Sequence[str], results_dir: Path, full: bool = False) -> bool:
    """A cell whose teeth can start with the pair: scoped, its require_cudnn in the same session, and a last run
    of it to collect on (without one it could only wait, holding a third of the cores for nothing; a "known"
    teeth collects every file, and without a run on record it would leave nothing out). `full`: --full, under
    which a "known" teeth runs every test, as its suite's `full` makes it: it would compete, not wait."""
    scope = cell.suite.teeth_scope
    return ((scope == "cudnn" or (scope == "known" and not (full or cell.suite.full))) and Mode.TEETH.value in modes
            and Mode.REQUIRE_CUDNN.value in modes and basis(results_dir, cell.mode_session(Mode.TEETH.value)) is not None)


def mark(jobs: list[scheduler.Job], slots: int, results_dir: Path, voice: Voice) -> Handoff | None:
    """Let the teeth that can start early do so (`early_s` 0): scoped, its require_cudnn in the plan, and a last run
    of it to collect on. The scheduler then starts it, before any other waiting run, as soon as its require_cudnn
    runs and a slot is free (scheduler.pick). Their Handoff, else None.

    Only in the two shapes that were measured to gain (docs/evidence/one-gpu-cells-h200.md): every run of the
    plan at once (a cell's three), or at least four slots, where each of the first `slots // 2` such teeth starts
    beside its require_cudnn and the rest follow. With fewer slots a waiting teeth holds the slot a normal would
    run in: a cell on two slots would run its normal only after require_cudnn, which is slower than serial."""
    can = [j for j in jobs if j.after is not None and possible(j.cell, (j.after.mode, j.mode), results_dir, j.full)]
    early = can if slots >= len(jobs) else can[:slots // 2] if slots >= FEW_SLOTS else []
    if not early and not any(j.carry_from is not None for j in jobs):
        return None
    handoff = Handoff(voice)  # also hands each require_cudnn the normal run it carries outcomes from (carry.py)
    for job in early:
        job.early_s = 0.0
        assert job.after is not None
        voice.log(f"{job.session}: may start while {job.after.session} runs: its processes collect meanwhile, and its "
            f"tests run once that census is stored (handed over in {handoff.dir})")
    return handoff


def args(job: scheduler.Job, handoff: Handoff | None, results_dir: Path, voice: Voice) -> list[str]:
    """A child's census arguments as it starts: --census-file while its require_cudnn still runs, else --census."""
    if handoff is not None and job.after is not None and job.early_s is not None and job.after.ended == 0:
        voice.log(f"{job.session}: starts while {job.after.session} runs; its census is handed over when that ends")
        return ["--census-file", f"{job.after.session}={handoff.path(job.session)}"]
    return [*readback.census_args(job, results_dir, voice), *_carry_args(job, handoff, results_dir, voice)]


def _carry_args(job: scheduler.Job, handoff: Handoff | None, results_dir: Path, voice: Voice) -> list[str]:
    """A require_cudnn's: its normal run of this sweep (--census once stored, --census-file while it runs, handed
    over as it ends), or nothing where that run has not started, and require_cudnn then runs every test."""
    source = job.carry_from
    if source is None:
        return []
    if handoff is not None and source.proc is not None and source.ended == 0:
        voice.log(f"{job.session}: starts while {source.session} runs; the run it carries outcomes from is handed "
                  "over when that ends")
        return ["--census-file", f"{source.session}={handoff.path(job.session)}"]
    found = readback.fresh_result(source, results_dir) if source.proc is not None else "it has not started"
    if isinstance(found, str):  # it may quote a run id read from a file: shown escaped
        voice.log(f"{job.session}: no {source.session} run of this sweep to carry outcomes from ({term(found)})")
        return []
    return ["--census", f"{found.session}={found.run_id}"]


def hand_over(ended: scheduler.Job, jobs: list[scheduler.Job], handoff: Handoff | None, results_dir: Path,
              voice: Voice) -> None:
    """require_cudnn's child exited: tell a teeth already started what it stored (or why nothing); normal's: tell
    its require_cudnn, which carries outcomes from it."""
    if handoff is None:
        return
    for job in jobs:
        if (job.after is ended or job.carry_from is ended) and job.proc is not None:
            found = readback.fresh_result(ended, results_dir)
            try:
                handoff.give(job.session, found)
            except OSError as exc:  # it would wait for ever: stopped instead, it stores an interrupted result
                voice.log(f"{job.session}: the census could not be handed over ({exc}): stopping it")
                job.proc.send_signal(signal.SIGINT)
            else:  # the reason may quote a stored run id, which is read from a file: escaped for the terminal
                voice.log(f"{job.session}: handed the census of {ended.session}"
                    + (f" run {found.run_id}" if not isinstance(found, str) else f": none ({term(found)})"))
