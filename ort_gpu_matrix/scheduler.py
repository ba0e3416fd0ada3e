"""Cells in parallel, one per GPU slot, as child processes: a small scheduler over subprocess.

nox's own parallelism knows nothing of GPUs, so each cell runs as its own `nox -s sweep -- --child
--select <cell>` with CUDA_VISIBLE_DEVICES set to its slot. Each child writes its own log; the
terminal shows a line as each cell starts and ends, and every 30 s the cells still running. A
failing or crashing child never stops the others. Ctrl-C (or SIGTERM) is passed to every child,
whose harness then stores an `interrupted` result for the mode it was running; cells not yet
started never start. The scheduler then returns (it does not raise), so the sweep still reads back
what the children stored and writes its report before it fails.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .cells import Cell

CHILD_GRACE_S = 30.0
_STOP = {signal.SIGINT, signal.SIGTERM}


def _unblock() -> None:
    """In the child, before exec: the mask blocked around Popen is inherited, so lift it."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)


@dataclass
class Job:
    cell: Cell
    modes: tuple[str, ...]
    log: Path
    gpu: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ended: float = 0.0
    returncode: int | None = None
    interrupted: bool = False  # the sweep was stopped while this job ran, or before it could start


def _selector(job: Job) -> list[str]:
    if tuple(job.modes) == tuple(job.cell.modes):
        return [job.cell.name]
    return [job.cell.mode_session(m) for m in job.modes]


def run(jobs: Sequence[Job], gpus: Sequence[str], noxfile: Path, child_args: Sequence[str],
        say: Callable[[str], None] = print, poll_s: float = 0.2) -> str | None:
    """Run every job, at most one per GPU slot at a time, filling in their timings and exit codes.

    Returns None, or the signal ("SIGINT", "SIGTERM") that stopped the sweep.
    """
    waiting = list(jobs)
    free = list(gpus)
    running: list[Job] = []
    last_status = time.time()

    def terminated(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    stopped: str | None = None

    saved = signal.signal(signal.SIGTERM, terminated)
    try:
        while waiting or running:
            while waiting and free:
                job = waiting.pop(0)
                job.gpu = free.pop(0)
                env = {**os.environ, "CUDA_VISIBLE_DEVICES": job.gpu, "NCCL_NVLS_ENABLE": "0"}
                job.log.parent.mkdir(parents=True, exist_ok=True)
                signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
                try:
                    with job.log.open("wb") as sink:
                        job.proc = subprocess.Popen(
                            [sys.executable, "-m", "nox", "-f", str(noxfile), "-s", "sweep", "--", "--child",
                             "--select", *_selector(job), *child_args],
                            env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                            start_new_session=True,  # a terminal's Ctrl-C reaches only us; we pass it on once
                            preexec_fn=_unblock)
                    job.started = time.time()
                    running.append(job)
                finally:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)  # a pending signal lands here, job counted
                say(f"[gpu {job.gpu}] {job.cell.name}: started (log {job.log})")
            time.sleep(poll_s)
            for job in [j for j in running if j.proc is not None and j.proc.poll() is not None]:
                assert job.proc is not None
                job.ended, job.returncode = time.time(), job.proc.returncode
                running.remove(job)
                assert job.gpu is not None
                free.append(job.gpu)
                state = "done" if job.returncode == 0 else f"FAILED (exit {job.returncode})"
                say(f"[gpu {job.gpu}] {job.cell.name}: {state} after {job.ended - job.started:.1f} s")
            if running and time.time() - last_status >= 30:
                last_status = time.time()
                say("running: " + "; ".join(f"[gpu {j.gpu}] {j.cell.name} {time.time() - j.started:.0f} s"
                                            for j in running))
    except KeyboardInterrupt as exc:
        stopped = "SIGTERM" if str(exc) == "SIGTERM" else "SIGINT"
        say(f"{stopped}: stopping {len(running)} running cell(s), each stores an interrupted result;"
            f" {len(waiting)} not started")
        _stop(running, waiting)
    finally:
        signal.signal(signal.SIGTERM, saved)
        _kill_left(running)  # whatever ended the loop (an OSError, a closed pipe): no child runs on, unsignalled
    return stopped


def _kill_left(running: list[Job]) -> None:
    """SIGKILL every child still running; each leads its own session, and its pytest dies with it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
    try:
        for job in running:
            if job.proc is not None and job.proc.poll() is None:
                job.proc.kill()
                job.proc.wait()
                job.ended, job.returncode, job.interrupted = time.time(), job.proc.returncode, True
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)


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
