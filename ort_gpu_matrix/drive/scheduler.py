"""Mode runs in parallel over GPU slots, as child processes: a small scheduler over subprocess.

nox's own parallelism knows nothing of GPUs, so each mode run is a child `nox -s sweep -- --child
--select <cell>-<mode>` with CUDA_VISIBLE_DEVICES set to its slot's GPU. The unit is the mode run,
not the cell: a slot that drew two 3-mode cells in a row would otherwise finish long after the
others went idle. normal and require_cudnn of one cell may run at once on two slots; teeth waits
for its cell's require_cudnn, whose census it reads (its parent names that run to it, see
`readback.census_args`), and prefers the slot that ran it. A scoped teeth marked early
(earlyteeth.py) may start while its require_cudnn runs, ahead of any other waiting run: its
processes collect, then wait for the census, which its parent hands over once require_cudnn's
child has exited.

A cell session that overlaps its modes on one GPU (overlap.py) uses this same scheduler, its slots
all on the GPU it was given ("" leaves CUDA_VISIBLE_DEVICES as it is); room.py says how many.

A suite that sets CUDA_VISIBLE_DEVICES in its env decides the GPU of its runs itself (a CPU-fallback
scenario hides the GPU with ""). Its runs get no GPU slot: they run one at a time in a lane of their
own beside the slots (SUITE_LANE), with nothing set over the sweep's environment, and the log says so.

The queue is planned in makespan.py: longest first, refined by simulating this scheduler's picks.

Each child writes its own log; the terminal shows a line as each run starts and ends, and every
30 s the runs still going. A failing or crashing child never stops the others, and its exit code
counts: a child that stored no fresh result fails its cell with its log's last lines. Every child
dies with this process (PR_SET_PDEATHSIG). Ctrl-C (or SIGTERM) is passed to every child, whose
harness then stores an `interrupted` result; runs not yet started never start. The scheduler then
returns (it does not raise), so the sweep still reads back what the children stored and writes
its report before it fails.

Signals are blocked while a child is being started and entered in `running`: an interrupt that
lands between fork and bookkeeping would otherwise leave a child (in a session of its own, so the
terminal's Ctrl-C never reaches it) running on, unsignalled.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..config.modes import MODES, spec
from ..host.gpus import slot_env
from ..plan.cells import Cell
from ..util.voice import Voice
from . import children
from .history import current_run, last_whole

SUITE_LANE = "suite"  # the lane of the runs whose suite sets CUDA_VISIBLE_DEVICES: no GPU slot of their own
CHILD_GRACE_S = 30.0
STATUS_EVERY_S = 30.0
POLL_S = 0.2  # between looks at the running children


@dataclass(eq=False)  # identity: a job is one run of one child
class Job:
    cell: Cell
    mode: str
    log: Path
    predicted_s: float | None = None  # its last run's cost (last_duration); None: no data (planned as the longest)
    after: Job | None = None  # must have ended before this one starts: teeth reads its require_cudnn's census
    # the run whose outcomes this one carries (require_cudnn: its normal, drive/carry.py); it does not wait to start:
    # if that run is going when this starts, its parent hands it over once stored, and if not, this runs every test
    carry_from: Job | None = None
    early_s: float | None = None  # may start this long after `after` started, before it ends (a census handed over)
    tail_s: float | None = None  # of its last run, the part from its first test to its end: what a start paid early leaves
    before_run: str | None = None  # run id of the session's current result before the sweep: a fresh one differs
    slot: int | None = None
    gpu: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ended: float = 0.0
    returncode: int | None = None
    interrupted: bool = False  # the sweep was stopped while this job ran, or before it could start
    env: dict[str, str] = field(default_factory=dict)  # what its slot set over the sweep's environment (slot_env)
    full: bool = False  # every test runs (--full, or its suite's `full`): it carries nothing and leaves nothing out

    @property
    def session(self) -> str:
        return self.cell.mode_session(self.mode)

    @property
    def suite_gpu(self) -> str | None:
        """CUDA_VISIBLE_DEVICES as the suite sets it ("" hides the GPU), or None where the slot decides."""
        return self.cell.suite.env.get("CUDA_VISIBLE_DEVICES")


class JobEvents(Protocol):
    """Who watches the children (progress.SweepProgress): told as each job starts and as it ends, in place of the
    lines here. Not the Voice's mode events (util/voice.py): a job is a child process this scheduler owns, told
    of by its parent; a mode run's events come from the process that runs it."""

    def job_started(self, job: Job) -> None: ...
    def job_ended(self, job: Job) -> None: ...


def jobs_of(runnable: Sequence[tuple[Cell, Sequence[str]]], results_dir: Path, full: bool = False) -> list[Job]:
    """One job per chosen mode run, in the matrix's order, each with its last known duration and what it waits on.
    `full`: --full, every mode runs every test."""
    jobs: list[Job] = []
    for cell, modes in runnable:
        mine: dict[str, Job] = {}
        for mode in (m for m in MODES if m in modes):
            session = cell.mode_session(mode)
            cost, tail = last_whole(results_dir, session) or (None, None)
            job = Job(cell, mode, results_dir / "sweep-logs" / f"{session}.log", cost,
                      before_run=current_run(results_dir, session), tail_s=tail, full=full or cell.suite.full)
            source, carries = spec(mode).coverage_from, spec(mode).carries_from
            job.after = mine.get(source.value) if source is not None else None
            job.carry_from = mine.get(carries.value) if carries is not None and not job.full else None
            mine[mode] = job
            jobs.append(job)
    return jobs


def _early(job: Job, began: Mapping[Job, float], now: float) -> bool:
    """A job with `early_s` whose predecessor has run that long: it starts now and is handed the census later."""
    after = job.after
    return after is not None and job.early_s is not None and after in began and now >= began[after] + job.early_s


def pick(waiting: Sequence[Job], free: Sequence[int] | Mapping[int, str], finished: set[Job], slot_of: dict[Job, int],
         began: Mapping[Job, float] | None = None, now: float = 0.0) -> tuple[Job, int] | None:
    """The first waiting job that may start, and its slot: the one its predecessor ran on, if free. `began`: when
    each running job started, so that a job with `early_s` may start before its predecessor ends.

    A job that may start early goes before any other: while it waits for its census it holds a slot but no core,
    and the start it pays then (interpreter, imports, collection: much of a scoped teeth) would otherwise be
    paid after the census, on the critical path.

    `free` maps each free slot to its GPU where lanes matter (a run whose suite sets CUDA_VISIBLE_DEVICES takes
    only SUITE_LANE, any other run only a GPU slot); a plain list of slots, as the plan's simulation gives, has
    no lanes."""
    began = began or {}
    ready = [j for j in waiting if (j.after is None or j.after in finished or _early(j, began, now))
             and _lanes_for(j, free)]
    if not ready:
        return None
    job = next((j for j in ready if j.after is not None and j.after not in finished), ready[0])
    if job.carry_from is not None and job.carry_from in ready:
        job = job.carry_from  # the run it carries from first: started after it, it can carry (carry.py)
    fits = _lanes_for(job, free)
    preferred = slot_of.get(job.after) if job.after is not None else None
    return job, preferred if preferred is not None and preferred in fits else min(fits)


def _lanes_for(job: Job, free: Sequence[int] | Mapping[int, str]) -> list[int]:
    """The free slots `job` may take: the suite lane for a run whose suite decides its GPU, a GPU slot otherwise."""
    if not isinstance(free, Mapping):
        return list(free)
    return [i for i, gpu in free.items() if (gpu == SUITE_LANE) == (job.suite_gpu is not None)]


def _label(job: Job, slots: Sequence[str]) -> str:
    if job.gpu == SUITE_LANE:
        return f"[suite's CUDA_VISIBLE_DEVICES={job.suite_gpu!r}]"
    if not job.gpu:  # the GPU this process was given, inherited as it is (a cell session)
        return f"[slot {job.slot}]"
    return f"[gpu {job.gpu}]" if slots.count(job.gpu or "") <= 1 else f"[gpu {job.gpu} slot {job.slot}]"


@dataclass(frozen=True)
class ChildCommand:
    """What each job's child runs: `nox -f <noxfile> -s sweep -- --child --select <session>`, then `args_for(job)`,
    its own arguments as it starts (teeth's census), `args`, the sweep's for every child, and `pytest_for(job)`,
    pytest arguments of its own (an -n cut to its share, room.py)."""

    noxfile: Path
    args: Sequence[str] = ()
    args_for: Callable[[Job], Sequence[str]] = lambda job: ()
    pytest_for: Callable[[Job], Sequence[str]] = lambda job: ()

    def argv(self, job: Job, own: Sequence[str]) -> list[str]:
        tail = list(self.pytest_for(job))
        tail = [*([] if "--" in self.args else ["--"]), *tail] if tail else []
        return [sys.executable, "-m", "nox", "-f", str(self.noxfile), "-s", "sweep", "--", "--child",
                "--select", job.session, *own, *self.args, *tail]


@dataclass(frozen=True)
class Hooks:
    """Who hears of the runs: `voice` logs the lines; `events`, when given, is told of each start and end instead of
    the lines logged here (and the 30 s status lines); `ended(job)` is called as each child is seen to exit, before
    anything else starts (a census handed over)."""

    voice: Voice
    events: JobEvents | None = None
    ended: Callable[[Job], None] = lambda job: None


@dataclass
class _Slots:
    """What `run` keeps as it goes: the jobs waiting, the free slots, the jobs running and ended, and their slots."""

    slots: Sequence[str]
    waiting: list[Job]
    free: list[int]
    running: list[Job] = field(default_factory=list)
    finished: set[Job] = field(default_factory=set)
    slot_of: dict[Job, int] = field(default_factory=dict)


def run(order: Sequence[Job], slots: Sequence[str], command: ChildCommand, hooks: Hooks,
        poll_s: float = POLL_S) -> str | None:
    """Run every job in `order`, one per slot at a time (slots[i] is slot i's GPU; "" leaves CUDA_VISIBLE_DEVICES
    as it is), each as `command`'s child, filling in their timings and exit codes; `hooks` hear of it.

    Returns None, or the signal ("SIGINT", "SIGTERM") that stopped the sweep.
    """
    log = hooks.voice.log
    own = [j for j in order if j.suite_gpu is not None]
    if own:
        slots = [*slots, SUITE_LANE]
        log(f"{len(own)} mode run(s) get no GPU slot: their suite sets CUDA_VISIBLE_DEVICES and decides their "
            f"GPU itself ({', '.join(f'{j.session}: {j.suite_gpu!r}' for j in own)}); they run one at a time "
            f"beside the {len(slots) - 1} slot(s)")
    state = _Slots(slots, list(order), list(range(len(slots))))
    last_status = time.time()
    stopped: str | None = None
    saved = signal.signal(signal.SIGTERM, _terminated)
    try:
        while state.waiting or state.running:
            while state.free and (chosen := pick(state.waiting, {i: slots[i] for i in state.free}, state.finished,
                                                 state.slot_of, {j: j.started for j in state.running},
                                                 time.time())) is not None:
                _start(state, *chosen, command, hooks)
            if not state.running:
                break  # nothing runs and nothing may start: a job waits on one that is not in this sweep
            time.sleep(poll_s)
            _reap(state, hooks)
            if hooks.events is None and state.running and time.time() - last_status >= STATUS_EVERY_S:
                last_status = time.time()
                log("running: " + "; ".join(f"{_label(j, slots)} {j.session} {time.time() - j.started:.0f} s"
                                            for j in state.running))
    except KeyboardInterrupt as exc:
        stopped = "SIGTERM" if str(exc) == "SIGTERM" else "SIGINT"
        log(f"{stopped}: stopping {len(state.running)} running mode run(s), each stores an interrupted result;"
            f" {len(state.waiting)} not started")
        _stop(state.running, state.waiting)
    finally:
        signal.signal(signal.SIGTERM, saved)
        _kill_left(state.running)  # whatever ended the loop (an OSError, a closed pipe): no child runs on, unsignalled
    return stopped


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt("SIGTERM")


def _start(state: _Slots, job: Job, slot: int, command: ChildCommand, hooks: Hooks) -> None:
    """Start the job's child on the slot. Signals are held from its start until it is counted in `running`."""
    own = list(command.args_for(job))
    state.waiting.remove(job)
    state.free.remove(slot)
    state.slot_of[job], job.slot, job.gpu = slot, slot, state.slots[slot]
    job.env = {} if job.gpu == SUITE_LANE else slot_env(job.gpu)  # the suite's own value is set in the test process
    env = {**os.environ, **job.env}
    argv = command.argv(job, own)
    job.log.parent.mkdir(parents=True, exist_ok=True)
    with children.held():  # a pending signal lands as this ends, the job counted
        job.proc = children.spawn(argv, env, job.log)
        job.started = time.time()
        state.running.append(job)
    if hooks.events is not None:
        hooks.events.job_started(job)
    else:
        hooks.voice.log(f"{_label(job, state.slots)} {job.session}: started (log {job.log})")


def _reap(state: _Slots, hooks: Hooks) -> None:
    """Every child seen to have exited: its end and exit code counted, its slot freed, and `hooks` told."""
    for job in [j for j in state.running if j.proc is not None and j.proc.poll() is not None]:
        assert job.proc is not None and job.slot is not None
        job.ended, job.returncode = time.time(), job.proc.returncode
        state.running.remove(job)
        state.finished.add(job)
        state.free.append(job.slot)
        hooks.ended(job)
        if hooks.events is not None:
            hooks.events.job_ended(job)
            continue
        result = "done" if job.returncode == 0 else f"FAILED (exit {job.returncode})"
        hooks.voice.log(f"{_label(job, state.slots)} {job.session}: {result} after {job.ended - job.started:.1f} s")


def _kill_left(running: list[Job]) -> None:
    """SIGKILL every child still running; each leads its own session, and its pytest dies with it."""
    with children.held():
        for job in running:
            if job.proc is not None and job.proc.poll() is None:
                job.proc.kill()
                job.proc.wait()
                job.ended, job.returncode, job.interrupted = time.time(), job.proc.returncode, True


def _stop(running: list[Job], waiting: list[Job]) -> None:
    """SIGINT to every running child (its harness stores the result), SIGKILL to any still there after the grace."""
    for job in (*running, *waiting):
        job.interrupted = True
    for job in running:
        if job.proc is not None and job.proc.poll() is None:
            job.proc.send_signal(signal.SIGINT)
    deadline = time.time() + CHILD_GRACE_S
    try:
        for job in running:
            if job.proc is None:
                continue
            try:
                job.proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                job.proc.kill()  # its pytest dies with it (PR_SET_PDEATHSIG)
                job.proc.wait()
            job.ended, job.returncode = time.time(), job.proc.returncode
    except KeyboardInterrupt:  # a second Ctrl-C: no more waiting
        for job in running:
            if job.proc is not None and job.proc.poll() is None:
                job.proc.kill()
        raise


def timeline(jobs: Sequence[Job]) -> list[dict[str, object]]:
    """sweep-timeline.json: each run that started, with its slot, GPU, times, exit code and log."""
    return [{"cell": j.cell.name, "mode": j.mode, "session": j.session, "gpu": j.gpu, "slot": j.slot,
             "predicted_s": j.predicted_s, "started": round(j.started, 3), "ended": round(j.ended, 3),
             "exit": j.returncode, "log": str(j.log), "interrupted": j.interrupted}
            for j in jobs if j.proc is not None]
