"""Cells in parallel, one per GPU slot, as child processes: a small scheduler over subprocess.

nox's own parallelism knows nothing of GPUs, so each cell runs as its own `nox -s sweep -- --child
--select <cell>` with CUDA_VISIBLE_DEVICES set to its slot. Each child writes its own log; the
terminal shows a line as each cell starts and ends, and every 30 s the cells still running. A
failing or crashing child never stops the others. Ctrl-C (or SIGTERM) is passed to every child,
whose harness then stores an `interrupted` result for its unfinished modes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .cells import Cell

CHILD_GRACE_S = 30.0


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
    timeline: list[str] = field(default_factory=list)


def _selector(job: Job) -> list[str]:
    if tuple(job.modes) == tuple(job.cell.modes):
        return [job.cell.name]
    return [job.cell.mode_session(m) for m in job.modes]


def run(jobs: Sequence[Job], gpus: Sequence[str], noxfile: Path, child_args: Sequence[str],
        say: Callable[[str], None] = print, poll_s: float = 0.2) -> list[Job]:
    """Run every job, at most one per GPU slot at a time; returns them with their timings and exit codes."""
    waiting = list(jobs)
    free = list(gpus)
    running: list[Job] = []
    last_status = time.time()

    def terminated(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    saved = signal.signal(signal.SIGTERM, terminated)
    try:
        while waiting or running:
            while waiting and free:
                job = waiting.pop(0)
                job.gpu = free.pop(0)
                env = {**os.environ, "CUDA_VISIBLE_DEVICES": job.gpu, "NCCL_NVLS_ENABLE": "0"}
                job.log.parent.mkdir(parents=True, exist_ok=True)
                with job.log.open("wb") as sink:
                    job.proc = subprocess.Popen(
                        [sys.executable, "-m", "nox", "-f", str(noxfile), "-s", "sweep", "--", "--child",
                         "--select", *_selector(job), *child_args],
                        env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                        start_new_session=True)  # a terminal's Ctrl-C reaches only us; we pass it on once
                job.started = time.time()
                running.append(job)
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
    except KeyboardInterrupt:
        say(f"interrupted: stopping {len(running)} running cell(s); each stores an interrupted result")
        for job in running:
            if job.proc is not None and job.proc.poll() is None:
                job.proc.send_signal(signal.SIGINT)
        deadline = time.time() + CHILD_GRACE_S
        for job in running:
            if job.proc is not None:
                try:
                    job.proc.wait(timeout=max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    job.proc.kill()
        raise
    finally:
        signal.signal(signal.SIGTERM, saved)
    return list(jobs)
