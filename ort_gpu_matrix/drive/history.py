"""What a session's stored runs tell its next: the cost and tail the plan orders by, the GPU peak room.py counts.

The one reader of stored results that does not go through the codec (store/results.py's `load`), on purpose: it
reads a few keys (duration, command, stopped, rerun_of, the GPU peak) of the last few bundles to order a
sweep's queue, and a result written by another version, or cut short, must still order it rather than drop the
session's history. An estimate that reads too much would turn a format change into a slower sweep.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..store.results import current_path


def newest(results_dir: Path, session: str, looked_at: int) -> list[Path] | None:
    """The session's newest `looked_at` run bundles, newest first; None if it has none to list."""
    try:
        return sorted((p for p in (results_dir / "runs" / session).iterdir() if not p.name.startswith(".")),
                      reverse=True)[:looked_at]  # run ids sort by start time
    except OSError:
        return None


def last_duration(results_dir: Path, session: str, looked_at: int = 5) -> float | None:
    """The duration of the session's newest stored run that ran to its end (an interrupted one tells too little,
    and one refused before pytest started tells nothing), less any wait for a census handed over: what the run
    costs when it starts with its census there."""
    found = last_whole(results_dir, session, looked_at)
    return None if found is None else found[0]


def last_whole(results_dir: Path, session: str, looked_at: int = 5) -> tuple[float, float | None] | None:
    """(its cost, its tail) from the newest run that ran to its end (see last_duration). The tail: the seconds
    from its first test to its end, what a teeth started early still runs once its census comes (None: no marks)."""
    bundles = newest(results_dir, session, looked_at)
    if bundles is None:
        return None
    for bundle in bundles:
        try:
            data = json.loads((bundle / "result.json").read_text())
            if data.get("command") and not str(data.get("stopped") or "").startswith("interrupted") \
                    and not data.get("rerun_of"):  # a confirmation rerun runs a few tests: not the run's length
                return _cost(bundle, float(data["duration_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def _cost(bundle: Path, duration: float) -> tuple[float, float | None]:
    """A run's cost and tail from its processes' marks (timings.py, in report.json). A teeth started early counts
    its duration from its census (execute/mode_run.py), so its cost is its processes' whole span less the wait,
    which every worker spent from its own `keep_wait_start` to the common `kept`: the shortest of those waits is
    the one the run's end was put off by. Without marks: its duration, and no tail."""
    try:
        marks = json.loads((bundle / "report.json").read_text())["timings"]
        top = marks["controller"]
        span = float(top["finished"]) - float(top["process_start"])
        tail = float(top["finished"]) - float(top["first_test_start"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return duration, None
    # every process that waited: xdist's workers, or the one pytest process of a suite without -n (rv25)
    waits = [float(m["kept"]) - float(m["keep_wait_start"]) for m in marks.values()
             if isinstance(m, dict) and "kept" in m and "keep_wait_start" in m]
    if not waits:
        return duration, round(max(0.0, tail), 3)
    return round(max(0.0, span - max(0.0, min(waits))), 3), round(max(0.0, tail), 3)


def last_peak_mib(results_dir: Path, session: str, looked_at: int = 5) -> int | None:
    """The peak GPU memory (MiB) of the session's newest stored run that recorded one (gpumem.py)."""
    bundles = newest(results_dir, session, looked_at)
    if bundles is None:
        return None
    for bundle in bundles:
        try:
            data = json.loads((bundle / "result.json").read_text())
            if data.get("rerun_of"):
                continue  # a confirmation rerun of a few tests: its peak is not the whole run's
            peak = data.get("gpu_memory", {}).get("peak_mib")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(peak, int) and not isinstance(peak, bool):
            return peak
    return None


def current_run(results_dir: Path, session: str) -> str | None:
    """The run id of the session's current result, if it has one: a fresh result of this sweep differs from it."""
    try:
        return str(json.loads(current_path(results_dir, session).read_text()).get("run_id"))
    except (OSError, ValueError, AttributeError):
        return None
