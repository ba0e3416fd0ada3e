"""What a mode run's child left, read back once it exited: its fresh result, or why none and its log's last lines."""
from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from ..store.results import Result, ResultError, current_path, load
from ..util.escape import term
from ..util.voice import Voice
from .scheduler import Job

TAIL_LINES = 5  # of a child's log, in the reason when it stored nothing


def last_lines(log: Path, n: int = TAIL_LINES) -> str:
    """The last `n` non-empty lines of a child's log, escaped, joined on one line."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            text = f.read().decode(errors="replace")
    except OSError as exc:
        return f"(its log cannot be read: {exc.strerror or exc})"
    lines = [ln.rstrip("\r").strip(" \t") for ln in text.split("\n")]  # a \r inside a line is shown, not obeyed
    lines = [ln for ln in lines if ln][-n:]
    return " | ".join(term(ln) for ln in lines) or "(its log is empty)"


def fresh_result(job: Job, results_dir: Path) -> Result | str:
    """The result the job's child stored in this sweep, or why there is none."""
    path = current_path(results_dir, job.session)
    try:
        result = load(path)
    except ResultError:
        return "it stored no result"
    started = datetime.fromtimestamp(int(job.started), UTC)
    try:
        stale = result.run_id == job.before_run or datetime.fromisoformat(result.started) < started
    except ValueError:
        stale = True
    return f"{path} is older than this sweep (run {result.run_id})" if stale else result


def census_args(job: Job, results_dir: Path, voice: Voice) -> list[str]:
    """For a teeth child: the require_cudnn run of this sweep whose census it reads. None fresh: no argument, and
    teeth then runs unchecked (or, scoped, refuses to run) as it would without require_cudnn."""
    if job.after is None:
        return []
    found = fresh_result(job.after, results_dir)
    if isinstance(found, str):  # it may quote a run id read from a file: shown escaped
        voice.log(f"{job.session}: starts without the census of {job.after.session}: {term(found)}")
        return []
    return ["--census", f"{found.session}={found.run_id}"]


def collect(job: Job, results_dir: Path, stopped: str | None) -> Result | str:
    """The job's fresh result, or what fails its cell: a child that stored no result of this sweep, whatever its
    exit code, with that code and its log's last lines. A fresh result is judged by what it says (a failing
    verdict also makes the child exit non-zero)."""
    if job.proc is None:
        return f"not started: the sweep was interrupted ({stopped})"
    found = fresh_result(job, results_dir)
    if isinstance(found, str):
        why = f"interrupted ({stopped}) before it stored a result" if job.interrupted else found
        return f"{job.mode}: {why}; its child exited {job.returncode} (log {job.log}): {last_lines(job.log)}"
    return found
