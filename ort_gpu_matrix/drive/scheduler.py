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

The queue is longest first: each run's last known duration from the results dir (no data counts
as the longest), with a require_cudnn ranked by the teeth that waits on it too, and one that an
early teeth waits on kept ahead of every run nothing waits on. The order is then refined by
simulating the schedule (`plan`, an early start included), a few hundred moves at most, and the
predicted makespan is logged with it.

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
from . import children
from .history import current_run, last_whole

CHILD_GRACE_S = 30.0
STATUS_EVERY_S = 30.0
POLL_S = 0.2  # between looks at the running children
SEARCH_BUDGET = 400  # schedules simulated while refining the order: milliseconds for a matrix's worth of runs


@dataclass(eq=False)  # identity: a job is one run of one child
class Job:
    cell: Cell
    mode: str
    log: Path
    predicted_s: float | None = None  # its last run's cost (last_duration); None: no data (planned as the longest)
    after: Job | None = None  # must have ended before this one starts: teeth reads its require_cudnn's census
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

    @property
    def session(self) -> str:
        return self.cell.mode_session(self.mode)


class Events(Protocol):
    """Who watches the runs (progress.Watch): told as each job starts and as it ends, in place of the lines here."""

    def job_started(self, job: Job) -> None: ...
    def job_ended(self, job: Job) -> None: ...


def jobs_of(runnable: Sequence[tuple[Cell, Sequence[str]]], results_dir: Path) -> list[Job]:
    """One job per chosen mode run, in the matrix's order, each with its last known duration and what it waits on."""
    jobs: list[Job] = []
    for cell, modes in runnable:
        mine: dict[str, Job] = {}
        for mode in (m for m in MODES if m in modes):
            session = cell.mode_session(mode)
            cost, tail = last_whole(results_dir, session) or (None, None)
            job = Job(cell, mode, results_dir / "sweep-logs" / f"{session}.log", cost,
                      before_run=current_run(results_dir, session), tail_s=tail)
            source = spec(mode).coverage_from
            job.after = mine.get(source.value) if source is not None else None
            mine[mode] = job
            jobs.append(job)
    return jobs


def _early(job: Job, began: Mapping[Job, float], now: float) -> bool:
    """A job with `early_s` whose predecessor has run that long: it starts now and is handed the census later."""
    after = job.after
    return after is not None and job.early_s is not None and after in began and now >= began[after] + job.early_s


def pick(waiting: Sequence[Job], free: Sequence[int], finished: set[Job],
         slot_of: dict[Job, int], began: Mapping[Job, float] | None = None, now: float = 0.0) -> tuple[Job, int] | None:
    """The first waiting job that may start, and its slot: the one its predecessor ran on, if free. `began`: when
    each running job started, so that a job with `early_s` may start before its predecessor ends.

    A job that may start early goes before any other: while it waits for its census it holds a slot but no core,
    and the start it pays then (interpreter, imports, collection: much of a scoped teeth) would otherwise be
    paid after the census, on the critical path."""
    began = began or {}
    ready = [j for j in waiting if j.after is None or j.after in finished or _early(j, began, now)]
    if not ready:
        return None
    job = next((j for j in ready if j.after is not None and j.after not in finished), ready[0])
    preferred = slot_of.get(job.after) if job.after is not None else None
    return job, preferred if preferred is not None and preferred in free else min(free)


def simulate(order: Sequence[Job], cost: dict[Job, float], slots: int,
             tail: Mapping[Job, float] | None = None) -> float:
    """The makespan of running `order` on `slots` slots as `run` does, with each job taking `cost` seconds. A job
    started early (before its predecessor ends) ends `tail[job]` after that predecessor, or `cost` after its own
    start if later (its start, `cost - tail`, is paid meanwhile; without a tail, half its cost is)."""
    waiting, free = list(order), list(range(slots))
    running: list[tuple[float, int, Job]] = []
    finished: set[Job] = set()
    slot_of: dict[Job, int] = {}
    began: dict[Job, float] = {}
    end_of: dict[Job, float] = {}
    now = 0.0
    while waiting or running:
        while free and (chosen := pick(waiting, free, finished, slot_of, began, now)) is not None:
            job, slot = chosen
            waiting.remove(job)
            free.remove(slot)
            slot_of[job] = slot
            began[job] = now
            end = now + cost[job]
            if job.after is not None and job.after not in finished:  # early: its tests wait for the census
                rest = min(cost[job], (tail or {}).get(job, cost[job] / 2))
                end = max(now + cost[job] - rest, end_of[job.after]) + rest
            end_of[job] = end
            running.append((end, slot, job))
        if not running:
            return float("inf")  # a job waits on one that is not in the plan
        running.sort(key=lambda r: (r[0], r[1]))
        now, slot, job = running.pop(0)
        finished.add(job)
        free.append(slot)
    return now


def plan(jobs: Sequence[Job], slots: int) -> tuple[list[Job], float | None]:
    """The queue order, longest first and refined by simulation, and its predicted makespan (None: no data).

    A run that a teeth started early waits on (its require_cudnn) stays ahead of every run that nothing waits on.
    The simulation gives each run a fixed cost, blind to runs slowing each other down, and on one GPU they do: the
    CPU, not the GPU, is what overlapped runs share (docs/evidence/one-gpu-cells-h200.md). Blind to that, it
    would start a long normal first; but each require_cudnn started
    lets its teeth's start be paid beside it, holding no core while it waits, and frees that teeth early."""
    known = [j.predicted_s for j in jobs if j.predicted_s is not None]
    longest = max(known, default=1.0)
    cost = {j: j.predicted_s if j.predicted_s is not None else longest for j in jobs}
    tail = {j: j.tail_s for j in jobs if j.tail_s is not None}
    ahead = {j.after for j in jobs if j.early_s is not None and j.after is not None}

    def chain(job: Job) -> float:  # the job and everything that waits on it
        return cost[job] + max((chain(d) for d in jobs if d.after is job), default=0.0)

    def keeps_ahead(candidate: list[Job]) -> bool:
        free = [i for i, j in enumerate(candidate) if j not in ahead and not any(d.after is j for d in jobs)]
        return not free or all(i < free[0] for i, j in enumerate(candidate) if j in ahead)

    # unknown first among equals (it may be longer still); stable: equal ranks keep the matrix's order
    order = sorted(jobs, key=lambda j: (j not in ahead, -chain(j), j.predicted_s is not None))
    best = simulate(order, cost, slots, tail)
    tried = 0
    improved = True
    while improved and tried < SEARCH_BUDGET:  # move one job elsewhere in the queue; keep a strictly better plan
        improved = False
        for i in range(len(order)):
            for k in range(len(order)):
                if i == k or tried >= SEARCH_BUDGET:
                    continue
                candidate = order[:i] + order[i + 1:]
                candidate.insert(k, order[i])
                if ahead and not keeps_ahead(candidate):
                    continue
                tried += 1
                makespan = simulate(candidate, cost, slots, tail)
                if makespan < best - 1e-9:
                    order, best, improved = candidate, makespan, True
                    break
            if improved:
                break
    return order, best if known else None


def describe(order: Sequence[Job], makespan: float | None, slots: int) -> str:
    """The plan, for the log: the queue with each run's last known duration, and the predicted makespan."""
    queue = ", ".join(f"{j.session} {'?' if j.predicted_s is None else f'{j.predicted_s:.1f}'} s" for j in order)
    total = sum(j.predicted_s or 0.0 for j in order)
    unknown = sum(j.predicted_s is None for j in order)
    if makespan is None:
        guess = "no predicted makespan: no run has a recorded duration yet"
    else:
        guess = f"predicted makespan {makespan:.1f} s of {total:.1f} s run time"
        if unknown:
            guess += f" ({unknown} run(s) without a recorded duration counted as the longest)"
    return f"plan: {len(order)} mode run(s) on {slots} slot(s), longest first: {queue}; {guess}"


def _label(job: Job, slots: Sequence[str]) -> str:
    if not job.gpu:  # the GPU this process was given, inherited as it is (a cell session)
        return f"[slot {job.slot}]"
    return f"[gpu {job.gpu}]" if slots.count(job.gpu or "") <= 1 else f"[gpu {job.gpu} slot {job.slot}]"


@dataclass(frozen=True)
class Command:
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
    """Who hears of the runs: `say` takes the lines; `events`, when given, is told of each start and end instead of
    the lines said here (and the 30 s status lines); `ended(job)` is called as each child is seen to exit, before
    anything else starts (a census handed over)."""

    say: Callable[[str], None] = print
    events: Events | None = None
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


def run(order: Sequence[Job], slots: Sequence[str], command: Command, hooks: Hooks | None = None,
        poll_s: float = POLL_S) -> str | None:
    """Run every job in `order`, one per slot at a time (slots[i] is slot i's GPU; "" leaves CUDA_VISIBLE_DEVICES
    as it is), each as `command`'s child, filling in their timings and exit codes; `hooks` hear of it.

    Returns None, or the signal ("SIGINT", "SIGTERM") that stopped the sweep.
    """
    hooks = hooks or Hooks()
    state = _Slots(slots, list(order), list(range(len(slots))))
    last_status = time.time()
    stopped: str | None = None
    saved = signal.signal(signal.SIGTERM, _terminated)
    try:
        while state.waiting or state.running:
            while state.free and (chosen := pick(state.waiting, state.free, state.finished, state.slot_of,
                                                 {j: j.started for j in state.running}, time.time())) is not None:
                _start(state, *chosen, command, hooks)
            if not state.running:
                break  # nothing runs and nothing may start: a job waits on one that is not in this sweep
            time.sleep(poll_s)
            _reap(state, hooks)
            if hooks.events is None and state.running and time.time() - last_status >= STATUS_EVERY_S:
                last_status = time.time()
                hooks.say("running: " + "; ".join(f"{_label(j, slots)} {j.session} {time.time() - j.started:.0f} s"
                                                  for j in state.running))
    except KeyboardInterrupt as exc:
        stopped = "SIGTERM" if str(exc) == "SIGTERM" else "SIGINT"
        hooks.say(f"{stopped}: stopping {len(state.running)} running mode run(s), each stores an interrupted result;"
                  f" {len(state.waiting)} not started")
        _stop(state.running, state.waiting)
    finally:
        signal.signal(signal.SIGTERM, saved)
        _kill_left(state.running)  # whatever ended the loop (an OSError, a closed pipe): no child runs on, unsignalled
    return stopped


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt("SIGTERM")


def _start(state: _Slots, job: Job, slot: int, command: Command, hooks: Hooks) -> None:
    """Start the job's child on the slot. Signals are held from its start until it is counted in `running`."""
    own = list(command.args_for(job))
    state.waiting.remove(job)
    state.free.remove(slot)
    state.slot_of[job], job.slot, job.gpu = slot, slot, state.slots[slot]
    job.env = slot_env(job.gpu)
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
        hooks.say(f"{_label(job, state.slots)} {job.session}: started (log {job.log})")


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
        hooks.say(f"{_label(job, state.slots)} {job.session}: {result} after {job.ended - job.started:.1f} s")


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
