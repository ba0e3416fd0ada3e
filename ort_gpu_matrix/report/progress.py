"""A sweep you can watch: one line as each mode run starts and ends, and on a terminal one live line.

An observer of the runs' start and end events, whoever schedules them: the scheduler's child
processes (`job_started`/`job_ended`, scheduler.JobEvents) or the in-process harness of a serial sweep
(`mode_started`/`mode_ended`, the ModeEvents of util/voice.py, where `heard` puts it). It owns no scheduling, so a
scheduler that orders or overlaps runs differently still feeds it the same two events.

The time left is estimated from each run's last duration (history.last_duration, the same figure
the plan orders by): what the runs not yet ended are still expected to take, spread over the slots.
A run without a recorded duration counts as the mean of those with one; with none at all the
estimate says so rather than guess.

pytest's output goes to each run's pytest.log (in its bundle); a failing run prints its reasons, its
log's path and the log's last lines, as tox does in parallel mode. Every untrusted line (a test id, a
log line) is escaped for the terminal.
"""
from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from ..config.kernels import short_tier
from ..drive.readback import fresh_result
from ..drive.scheduler import Job
from ..store.results import Result
from ..util.escape import term
from ..util.voice import Voice, unheard
from .render.live import Display
from .states import counts_text, tally_text

TAIL = 10  # lines of a failing run's log
REASONS = 3  # reasons of a failing run shown under its end line


def tiers_short(result: Result) -> str:
    """`cuDNN 8, MATH 2`: tests per tier, as the end line has room for it."""
    return ", ".join(f"{short_tier(t)} {n}" for t, n in result.dispatch.tests_per_tier.items()) or "no tier"


def gpu_text(result: Result | None, job: Job) -> str:
    """The GPU the run had: its name and index where the result knows them, else the slot's, else none."""
    gpu = result.gpu if result is not None else None
    if gpu:
        return f"gpu {gpu.get('index')}" + (f" {gpu['name']}" if gpu.get("name") else "")
    return f"gpu {job.gpu}" if job.gpu else "no gpu"


def tail(path: Path | None, n: int = TAIL) -> list[str]:
    """The last `n` non-empty lines of a log, escaped; empty when it cannot be read."""
    if path is None:
        return []
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return [term(ln.rstrip("\r")) for ln in text.split("\n") if ln.strip()][-n:]


class SweepProgress:
    """The sweep's runs as the person watching sees them. Feed it events; `close` ends the live line."""

    def __init__(self, jobs: Sequence[Job], slots: Sequence[str], display: Display, results_dir: Path,
                 clock: Callable[[], float] = time.time):
        """`slots`: each slot's GPU, as the scheduler has them; empty for a serial sweep (one run at a time)."""
        self.jobs = list(jobs)
        self.by_session: dict[str, list[Job]] = {}  # a session's runs in order: calibrate --runs N runs it N times
        for j in self.jobs:
            self.by_session.setdefault(j.session, []).append(j)
        self.gpus = list(slots)
        self.slots = max(1, len(self.gpus))
        self.display = display
        self.results_dir = results_dir
        self.clock = clock
        self.began = clock()
        self.done: set[Job] = set()
        self.running: set[Job] = set()
        self._detail: IO[str] | None = None
        self.detail_path = results_dir / "sweep.log"
        display.start(self)

    # -- what the display asks
    @property
    def total(self) -> int:
        return len(self.jobs)

    def finished(self) -> int:
        return len(self.done)

    def elapsed(self) -> float:
        return self.clock() - self.began

    def left_s(self) -> float | None:
        """Seconds left by the runs' last durations, or None when no run has one."""
        known = [j.predicted_s for j in self.jobs if j.predicted_s is not None]
        if not known:
            return None
        guess = sum(known) / len(known)
        now = self.clock()
        pending = [j for j in self.jobs if j not in self.done]
        work = [max(0.0, (j.predicted_s if j.predicted_s is not None else guess)
                    - (now - j.started if j in self.running else 0.0)) for j in pending]
        if not work:
            return 0.0
        return max(sum(work) / self.slots, max(work))

    def left_text(self) -> str:
        left = self.left_s()
        return "left: no run has a recorded duration yet" if left is None else f"left ~{_clock(left)}"

    def now_text(self) -> str:
        return ", ".join(sorted(j.session for j in self.running))

    # -- events from the scheduler (child processes)
    def job_started(self, job: Job) -> None:
        self.running.add(job)
        known = "no earlier run" if job.predicted_s is None else f"last took {job.predicted_s:.1f} s"
        where = f", {self._where(job)}" if job.gpu else ""
        self.display.line(f"start  {job.session}  ({self._place(job)}{where}, {known})")
        self.display.refresh()

    def job_ended(self, job: Job) -> None:
        found = fresh_result(job, self.results_dir)
        if isinstance(found, Result):
            self._ended(job, found, None, Path(found.log) if found.log else job.log)
        else:
            self._ended(job, None, f"{found}; its child exited {job.returncode}", job.log)

    # -- events from the harness (a serial sweep, in this process)
    def mode_started(self, session: str) -> None:
        job = next((j for j in self.by_session.get(session, []) if j not in self.done and j not in self.running), None)
        if job is not None:
            job.started = self.clock()
            self.job_started(job)

    def mode_ended(self, result: Result) -> None:
        job = next((j for j in self.by_session.get(result.session, []) if j in self.running), None)
        if job is not None:
            job.ended = self.clock()
            self._ended(job, result, None, Path(result.log) if result.log else None)

    def not_run(self, cell: str, why: str) -> None:
        """A cell that stopped before (some of) its runs started: they end here, unrun."""
        for job in self.jobs:
            if job.cell.name == cell and job not in self.done:
                self.running.discard(job)
                self.done.add(job)
                self.display.line(f"FAIL   {job.session}  not run: {term(why)}", verdict="FAIL")
        self.display.refresh()

    def heard(self, voice: Voice) -> Voice:
        """The voice of a run watched here: the harness's lines to <results>/sweep.log (`detail`), pytest's output
        only in each run's log, and each mode run's start and end to this display."""
        return dataclasses.replace(voice, log=self.detail, echo=unheard, events=self)

    def detail(self, line: str) -> None:
        """What the harness says as it goes (venvs, commands): --verbose shows it; here it goes to <results>/sweep.log."""
        try:
            if self._detail is None:
                self.detail_path.parent.mkdir(parents=True, exist_ok=True)
                self._detail = self.detail_path.open("w", encoding="utf-8")
            self._detail.write(line + "\n")
            self._detail.flush()
        except OSError:
            pass  # the details are a convenience; the run's own log and result hold what counts

    def close(self) -> None:
        self.display.stop()
        if self._detail is not None:
            self._detail.close()
            self._detail = None

    # -- lines
    def _where(self, job: Job) -> str:
        """`gpu 0`, or `gpu 0 slot 1` where one GPU holds several slots."""
        return f"gpu {job.gpu}" if self.gpus.count(job.gpu or "") <= 1 else f"gpu {job.gpu} slot {job.slot}"

    def _place(self, job: Job) -> str:
        return f"{len(self.done) + len(self.running)} of {self.total}"

    def _ended(self, job: Job, result: Result | None, why: str | None, log: Path | None) -> None:
        self.running.discard(job)
        self.done.add(job)
        took = (job.ended or self.clock()) - job.started if job.started else 0.0
        if result is not None:
            word = result.verdict.value.upper()
            told = tally_text(result)
            self.display.line(f"{word:<6} {job.session}  {counts_text(result)}"
                              f"{f' ({told})' if told else ''}  "
                              f"{tiers_short(result)}  {took:.1f} s  {gpu_text(result, job)}  "
                              f"[{len(self.done)}/{self.total}]", verdict=word)
            failed = not result.passed
            reasons = result.reasons
        else:
            self.display.line(f"FAIL   {job.session}  no result: {term(why)}  {took:.1f} s  {gpu_text(None, job)}  "
                              f"[{len(self.done)}/{self.total}]", verdict="FAIL")
            failed, reasons = True, []
        if failed:
            for reason in reasons[:REASONS]:
                self.display.line(f"       reason: {term(_one_line(reason))}")
            if len(reasons) > REASONS:
                self.display.line(f"       and {len(reasons) - REASONS} more reason(s) in the result")
            lines = tail(log)
            if log is not None:
                self.display.line(f"       log: {term(log)}" + (f" (last {len(lines)} lines):" if lines else ""))
            for ln in lines:
                self.display.line(f"       | {ln}")
        self.display.refresh()


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
