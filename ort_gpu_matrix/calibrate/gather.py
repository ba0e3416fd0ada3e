"""Where calibrate's runs come from: the chosen cells run now, each mode --runs times, or their results read.

Read results are the current ones under the dirs given, as `nox -s report` gathers them; a run
that was stopped, or left no probe report, is not calibrated from, and says why. Either way each
run's probe report is read from its bundle, since the failure messages and skip reasons are there.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.model import expect_path
from ..config.modes import MODES
from ..config.overrides import Workspace
from ..drive import scheduler
from ..drive.cell import CELL_ERRORS, run_cell
from ..drive.context import CellRuns
from ..host.host import Resolved, check
from ..judge.counts import TestResult
from ..judge.verdicts import tests_of
from ..plan.cells import Cell
from ..report import progress
from ..report.model import InputError, gather
from ..report.render.live import Display
from ..store.results import Result
from ..util.errors import MatrixError, UserError
from ..util.voice import Voice
from .seen import CalibrationRun

RUNS = 2  # --runs N: each mode runs N times, so that a flake is told from a failure


class CalibrateError(UserError):
    """Calibrate cannot go on; the message says what to do. Nothing was written."""


def report_of(result: Result, search: Sequence[Path]) -> dict[str, Any] | None:
    """The run's probe report, from its bundle; looked for under `search` too when the results were moved."""
    moved = (p for d in search for p in sorted(d.rglob(f"runs/{result.session}/{result.run_id}/report.json")))
    for path in itertools.chain([Path(result.report)] if result.report else [], moved):
        data = json_of(path)
        if data is not None:
            return data
    if result.report is None:
        return None  # the run wrote none
    raise CalibrateError(f"{result.session}: its probe report ({result.report}) cannot be read: calibrate reads each "
                         "test's failure message and skip reason from it; copy the results dir whole, runs/ included")


def json_of(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("tests"), dict) else None


def seen_of(cell: Cell, result: Result, search: Sequence[Path], voice: Voice) -> CalibrationRun | None:
    if result.stopped:
        voice.say(f"not calibrated: {result.session}: the run was {result.stopped}")
        return None
    if result.selection is not None and result.selection.left_out:  # nothing is known of them: no rule could say
        voice.say(f"not calibrated: {result.session}: it left {len(result.selection.left_out)} test(s) out "
                  "(teeth_scope \"known\"): calibrate from a run of every test (nox -s calibrate runs them, or a sweep "
                  "with --full)")
        return None
    report = report_of(result, search)
    if report is None:
        voice.say(f"not calibrated: {result.session}: the run left no probe report (see its log)")
        return None
    return CalibrationRun(cell, result, tests_of(report) + carried_tests(result, search))  # type: ignore[arg-type]


def carried_tests(result: Result, search: Sequence[Path]) -> list[TestResult]:
    """The tests a run carried from another (drive/carry.py), as that run's probe report has them: a carried outcome
    calibrates as the run it came from."""
    sel = result.selection
    if sel is None or not sel.carried or sel.carried_from is None:
        return []
    session, _, run_id = sel.carried_from.partition(" ")
    source = dataclasses.replace(result, session=session, run_id=run_id, report=None)
    report = report_of(source, [*search, Path(result.bundle).parent.parent] if result.bundle else search)
    if report is None:
        raise CalibrateError(f"{result.session}: the run it carried outcomes from ({sel.carried_from}) left no probe "
                             "report: copy the results dir whole, runs/ included")
    wanted = set(sel.carried)
    return tests_of({"tests": {n: e for n, e in report["tests"].items() if n in wanted}})  # type: ignore[arg-type]


def as_run(workspace: Workspace, cell: Cell, voice: Voice) -> Cell:
    """A cell whose suite names an expect file not written yet runs on the matrix's own tables."""
    path = expect_path(workspace.base, cell.suite)
    if path is None or path.is_file():
        return cell
    voice.say(f"{cell.name}: {path} does not exist yet: the run is judged by [suite.{cell.suite.id}.expect] alone")
    return dataclasses.replace(cell, suite=dataclasses.replace(cell.suite, expect_file=None))


def run(workspace: Workspace, chosen: Sequence[Cell], explicit: bool, rounds: int, voice: Voice,
        display: Display | None = None) -> list[CalibrationRun]:
    """Every chosen cell in all its modes. A cell this host cannot run is an error when chosen by name or
    tag (calibrating without it would drop what it needs), and is skipped when no selector was given.
    `voice.say` takes calibrate's own lines (its outcome); `log` the harness's; `echo` pytest's output.
    With a `display`, the runs are watched as a sweep's are (progress.py)."""
    runnable: list[tuple[Cell, Resolved]] = []
    for cell in chosen:
        cell = as_run(workspace, cell, voice)
        resolved = check(cell, workspace)
        if isinstance(resolved, MatrixError):
            why = "; ".join(f"{p.key}: {p.problem}" for p in resolved.problems)
            if explicit:
                raise CalibrateError(f"{cell.name} cannot run on this host: {why}")
            voice.say(f"skipped: {cell.name} cannot run on this host: {why}")
            continue
        runnable.append((cell, resolved))
    seen = []
    results_dir = workspace.results_dir
    # one job per mode run of every round: a session runs `rounds` times, each run watched as its own
    watch = None if display is None else progress.SweepProgress(
        [j for _ in range(rounds) for j in scheduler.jobs_of([(c, c.modes) for c, _ in runnable], results_dir)],
        (), display, results_dir)
    heard = voice if watch is None else watch.heard(voice)
    try:
        for cell, resolved in runnable:
            for n in range(rounds):
                if watch is None:
                    voice.log(f"calibrate: {cell.name} ({', '.join(cell.modes)}), run {n + 1} of {rounds}")
                try:
                    # every test in every mode: a carried outcome is normal's, and would hide a require_cudnn flake
                    results = run_cell(CellRuns(cell, resolved, workspace, (), {}, heard, full=True), cell.modes)
                except CELL_ERRORS as exc:
                    raise CalibrateError(f"{cell.name} did not run: {str(exc).splitlines()[0]}") from None
                seen += [dataclasses.replace(s, round=n) for s in (seen_of(cell, r, [], voice) for r in results)
                         if s is not None]
    finally:
        if watch is not None:
            watch.close()
    return seen


def read(chosen: Sequence[Cell], dirs: Sequence[Path], voice: Voice) -> list[CalibrationRun]:
    """The chosen cells' current results under `dirs` (as `nox -s report` gathers them), running nothing."""
    try:
        results = gather(list(dirs))
    except InputError as exc:
        raise CalibrateError(str(exc)) from None
    by_name = {c.name: c for c in chosen}
    seen = []
    for r in sorted(results, key=lambda r: (r.cell.name, MODES.index(r.mode) if r.mode in MODES else 99)):
        cell = by_name.get(r.cell.name)
        if cell is None or r.mode not in cell.modes:
            continue
        if r.cell.suite != cell.suite.id:
            voice.say(f"not calibrated: {r.session}: it ran suite {r.cell.suite}, the matrix gives {cell.name} "
                f"suite {cell.suite.id}")
            continue
        found = seen_of(cell, r, dirs, voice)
        if found is not None:
            seen.append(found)
    for c in chosen:
        if not any(s.cell.name == c.name for s in seen):
            voice.say(f"no result: {c.name} has no usable result in {', '.join(map(str, dirs))}")
    return seen
