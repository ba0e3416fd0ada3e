"""A cell session's mode runs overlapped on the one GPU it was given: the sweep's scheduler, reused.

`nox -s gpu-3.12-h200` runs normal and require_cudnn at once, then teeth as soon as require_cudnn has
stored its result, when the host has room for two (room.py); with room for three, a scoped teeth
with a last run on record starts with the pair and its tests wait for the census (earlyteeth.py).
Each mode run is then what a `--gpus` sweep makes of it: a child `nox -s sweep -- --child --select
<mode session>` of its own, in a process session of its own, with its own private dir, result, fd
tap and library audit, and its own log under `<results>/sweep-logs/`. A child that fails or hangs
stops only itself. Teeth's tests run only after its require_cudnn child has exited, on that run's
stored bundle (`--census`, or `--census-file` for a teeth started early), never on the session's
current file. The children inherit CUDA_VISIBLE_DEVICES as the session has it (or not),
so each run sees the GPU a serial run would.

The venv is built (or checked) once, here, before any child starts: the children then reuse it.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config.modes import spec
from ..host.room import Ask, Room, cores, decide, gpu_memory, workers_of
from ..plan.cells import Cell
from ..store.results import Result, current_path
from ..util.escape import term
from . import earlyteeth, history, readback, scheduler
from .batch import run_batch
from .context import CellRuns


@dataclass(frozen=True)
class Overlap:
    """Asked of a cell session: overlap its modes where there is room. `wanted`: --slots-per-gpu (None: auto)."""

    noxfile: Path
    wanted: int | None = None


class RunsMissing(Exception):
    """Mode runs of an overlapped cell that stored no fresh result; `written` holds those that did."""

    def __init__(self, written: list[Result], problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.written = written


def at_once(modes: Sequence[str]) -> int:
    """How many of these modes may run together: those that wait on no other chosen mode."""
    return sum(1 for m in modes if (src := spec(m).coverage_from) is None or src.value not in modes)


def together_of(cell: Cell, modes: Sequence[str], results_dir: Path, full: bool = False) -> int:
    """The cell's runs that may go at once: all of them where its scoped teeth can start with the pair
    (earlyteeth.py), else those that wait on no other. `full`: --full."""
    return len(modes) if earlyteeth.possible(cell, modes, results_dir, full) else at_once(modes)


def ask_of(chosen: Sequence[tuple[Cell, Sequence[str]]], posargs: Sequence[str], results_dir: Path,
           wanted: int | None, together: int) -> Ask:
    """What the chosen mode runs ask of a GPU, from their suites, the command line and their last recorded
    peaks: the one place a room decision is assembled (a cell session, a --gpus sweep, confirmation reruns)."""
    n = cores()
    peaks = [history.last_peak_mib(results_dir, c.mode_session(m)) for c, modes in chosen for m in modes]
    caps = [c.suite.slots_per_gpu for c, _ in chosen if c.suite.slots_per_gpu is not None]
    widest = max((workers_of([*c.suite.pytest_args, *posargs], n) for c, _ in chosen), default=1)
    return Ask(together, widest, peaks, wanted, min(caps, default=None))


def room_for(cr: CellRuns, modes: Sequence[str], wanted: int | None) -> Room:
    """The room for this cell's modes on the GPU this process was given, from what the host has now. A scoped
    teeth with a last run on record counts as a third run at once (earlyteeth.py): with room for three it starts
    with the pair and waits for its census; with room for two it starts after require_cudnn."""
    results_dir = cr.workspace.results_dir
    ask = ask_of([(cr.cell, modes)], cr.posargs, results_dir, wanted, together_of(cr.cell, modes, results_dir, cr.full))
    return decide(ask, cores(), gpu_memory(os.environ.get("CUDA_VISIBLE_DEVICES")))


def run_overlapped(cr: CellRuns, modes: Sequence[str], room: Room, noxfile: Path) -> list[Result]:
    """Every mode run of the cell as a child, `room.slots` at a time; their stored results, in mode order."""
    cell, posargs, earlier, log, results_dir = cr.cell, cr.posargs, cr.earlier, cr.voice.log, cr.workspace.results_dir
    own = workers_of([*cell.suite.pytest_args, *posargs], cores())
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    jobs = scheduler.jobs_of([(cell, tuple(modes))], results_dir, cr.full)
    stopped = run_batch(jobs, [gpu] * room.slots,
                        scheduler.ChildCommand(noxfile, [*(["--full"] if cr.full else []),
                                                         *(["--", *posargs] if posargs else [])],
                                          pytest_for=lambda job: room.pytest_args(own)),
                        scheduler.Hooks(cr.voice), results_dir, cell.name)
    written: list[Result] = []
    problems: list[str] = []
    for job in jobs:
        got = readback.collect(job, results_dir, stopped)
        if isinstance(got, str):
            problems.append(got)
            log(f"{job.session}: {got}")
            continue
        written.append(got)
        earlier[got.session] = got  # as a serial run would leave it: a later teeth session of this nox reads it
        log(f"{got.session}: {got.verdict.value.upper()} -> {current_path(results_dir, got.session)}")
        for reason in got.reasons:
            log(f"  reason: {term(reason)}")
    if stopped is not None:
        raise KeyboardInterrupt(stopped)  # every child stored what it could; now stop nox, as the signal asked
    if problems:
        raise RunsMissing(written, problems)
    return written


def sweep_room(results_dir: Path, chosen: Sequence[tuple[Cell, Sequence[str]]], gpus: Sequence[str],
               wanted: int | None, posargs: Sequence[str], full: bool = False) -> Room:
    """The room on each of a `--gpus` sweep's GPUs: the tightest GPU's free memory, the two largest last peaks
    of the chosen runs, and the widest suite's -n against the cores all the GPUs' runs share."""
    memories = [gpu_memory(g) for g in gpus]
    known = [m for m in memories if not isinstance(m, str)]
    memory = min(known, key=lambda m: m[0]) if known and len(known) == len(memories) else \
        next((m for m in memories if isinstance(m, str)), "no GPU")
    together = sum(together_of(c, modes, results_dir, full) for c, modes in chosen)
    ask = dataclasses.replace(ask_of(chosen, posargs, results_dir, wanted, together), gpus=max(1, len(gpus)))
    return decide(ask, cores(), memory)


def own_workers(job: scheduler.Job, posargs: Sequence[str]) -> int:
    """The -n a job's suite (and the command line) asks for: what room.py may cut to its share."""
    return workers_of([*job.cell.suite.pytest_args, *posargs], cores())
