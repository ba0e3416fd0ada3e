"""When a cell session's scoped teeth starts with the pair, so that its start is paid while require_cudnn runs.

A scoped teeth runs a third of the tests, so its start (interpreter, torch, ORT, collection) is most of it:
6.0 of 10.8 s on the H200 (docs/evidence/one-gpu-cells-h200.md). It cannot run a test before require_cudnn's
census is stored, but it can start before: its processes collect, then wait (the probe's keepwait.py) for the
census its parent hands over (handoff.py) the moment require_cudnn's child exits.

So a cell of normal, require_cudnn and a scoped teeth counts as three runs at once where the host has room
(room.py: the GPU's memory for three peaks, and the cores for three runs' workers, each -n cut to its share).
Measured on the H200 first, before this: starting teeth in require_cudnn's last seconds, beside the pair's
-n 8 + 8 on 16 cores, left no core for its collection, which then ended after the census came, hiding
nothing; and the pair at -n 4 or 5 each ran faster than at 8 + 8 (24.5 s against 27.0 s). Three runs of
-n 5 fill 15 of the 16 cores and never oversubscribe them.

Only for `teeth_scope = "cudnn"`: an unscoped teeth runs every test and would not wait, it would compete.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from . import scheduler
from .cells import Cell
from .handoff import Handoff
from .modes import Mode
from .results import ResultError, current_path, load

TEARDOWN = "::teardown"  # the id verdicts give a teardown error, beside its test's own (as harness.py)


def basis(results_dir: Path, session: str) -> list[str] | None:
    """The tests a teeth's last stored run kept: what an early start collects on (their files), None if none."""
    try:
        last = load(current_path(results_dir, session))
    except ResultError:
        return None
    kept = [n for n in last.outcomes if not (n.endswith(TEARDOWN) and n[:-len(TEARDOWN)] in last.outcomes)]
    return kept or None


def possible(cell: Cell, modes: Sequence[str], results_dir: Path) -> bool:
    """A cell whose teeth can start with the pair: scoped, its require_cudnn in the same session, and a last run
    of it to collect on (without one it could only wait, holding a third of the cores for nothing)."""
    return (cell.suite.teeth_scope == "cudnn" and Mode.TEETH.value in modes
            and Mode.REQUIRE_CUDNN.value in modes and basis(results_dir, cell.mode_session(Mode.TEETH.value)) is not None)


def mark(jobs: list[scheduler.Job], slots: int, results_dir: Path, log: Callable[[str], None]) -> Handoff | None:
    """Let every teeth that can start early do so (`early_s` 0): scoped, its require_cudnn in the plan, a last run
    of it to collect on, and a second slot to start in. The scheduler then starts it as soon as a slot is free
    while its require_cudnn runs (scheduler._pick), in a cell session as in a sweep. Their Handoff, else None."""
    early = [j for j in jobs if j.after is not None and j.cell.suite.teeth_scope == "cudnn" and slots > 1
             and basis(results_dir, j.session) is not None]
    if not early:
        return None
    handoff = Handoff(log)
    for job in early:
        job.early_s = 0.0
        assert job.after is not None
        log(f"{job.session}: may start while {job.after.session} runs: its processes collect meanwhile, and its "
            f"tests run once that census is stored (handed over in {handoff.dir})")
    return handoff


def args(job: scheduler.Job, handoff: Handoff | None, results_dir: Path, say: Callable[[str], None]) -> list[str]:
    """A child's census arguments as it starts: --census-file while its require_cudnn still runs, else --census."""
    if handoff is not None and job.after is not None and job.early_s is not None and job.after.ended == 0:
        say(f"{job.session}: starts while {job.after.session} runs; its census is handed over when that ends")
        return ["--census-file", f"{job.after.session}={handoff.path(job.session)}"]
    return scheduler.census_args(job, results_dir, say)


def hand_over(ended: scheduler.Job, jobs: list[scheduler.Job], handoff: Handoff | None, results_dir: Path,
              say: Callable[[str], None]) -> None:
    """require_cudnn's child exited: tell a teeth already started what it stored (or why nothing)."""
    if handoff is None:
        return
    for job in jobs:
        if job.after is ended and job.proc is not None:
            found = scheduler.fresh_result(ended, results_dir)
            try:
                handoff.give(job.session, found)
            except OSError as exc:  # the teeth then waits out its bound and fails, saying so; nothing else stops
                say(f"{job.session}: the census could not be handed over: {exc}")
            else:
                say(f"{job.session}: handed the census of {ended.session}"
                    + (f" run {found.run_id}" if not isinstance(found, str) else f": none ({found})"))
