"""When a cell session's teeth starts early, so that its start is paid while require_cudnn still runs.

A scoped teeth runs a third of the tests, so its start (interpreter, torch, ORT, collection) is most of it:
6.9 of 12.2 s on the H200 (docs/evidence/one-gpu-cells-h200.md). It cannot run a test before require_cudnn's
census is stored, but it can start before: its processes collect, then wait (the probe's keepwait.py) for the
census its parent hands over (handoff.py) the moment require_cudnn's child exits.

When: `early_s` after require_cudnn started = its last duration less teeth's last start, less a margin, so
that teeth's start falls in require_cudnn's last seconds, when its workers are running out of tests and
its collection is long done, rather than beside the pair's own collection (the CPU-heavy part of every
start). Only on the data of a second run: without both figures on record, teeth waits as before (a first
run also has no last teeth run whose files it could start on). Only for `teeth_scope = "cudnn"`: an
unscoped teeth runs every test and has no start worth hiding.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from . import scheduler
from .handoff import Handoff
from .results import ResultError, current_path, load

MARGIN_S = 1.0  # teeth is ready a little before the census, rather than the census waiting for teeth


def last_start_s(results_dir: Path, session: str) -> float | None:
    """Seconds from the session's last run's process start to the moment its tests could run: the first test's
    start in a run that waited for nothing, the start of its wait in one that started early (timings.py)."""
    try:
        r = load(current_path(results_dir, session))
        marks = json.loads((Path(r.bundle or "") / "report.json").read_text()).get("timings") or {}
        t0 = marks["controller"]["process_start"]
        ready = [m.get("keep_wait_start") or m.get("first_test_start") for m in marks.values()]
        ready = [x for x in ready if isinstance(x, (int, float))]
        return round(max(ready) - t0, 3) if ready and isinstance(t0, (int, float)) else None
    except (ResultError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def plan(jobs: list[scheduler.Job], results_dir: Path, scope: str, log: Callable[[str], None]) -> Handoff | None:
    """Set `early_s` on the teeth job where its start can be hidden; its Handoff, or None (teeth waits as before)."""
    teeth = next((j for j in jobs if j.after is not None), None)
    if teeth is None or teeth.after is None or scope != "cudnn":
        return None
    rc_s, start_s = teeth.after.predicted_s, last_start_s(results_dir, teeth.session)
    if rc_s is None or start_s is None:
        log(f"{teeth.session}: starts after {teeth.after.session} (no recorded "
            f"{'duration of it' if rc_s is None else 'start of teeth'} to time an early start by)")
        return None
    teeth.early_s = round(max(0.0, rc_s - start_s - MARGIN_S), 1)
    handoff = Handoff()
    log(f"{teeth.session}: starts {teeth.early_s} s after {teeth.after.session} does ({teeth.after.session} last "
        f"took {rc_s} s, teeth's start {start_s} s): its processes collect meanwhile and run once the census is "
        f"stored (handed over in {handoff.dir})")
    return handoff


def args(job: scheduler.Job, handoff: Handoff | None, results_dir: Path, say: Callable[[str], None]) -> list[str]:
    """A child's census arguments as it starts: --census-file while its require_cudnn still runs, else --census."""
    if handoff is not None and job.after is not None and job.early_s is not None and job.after.ended == 0:
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
