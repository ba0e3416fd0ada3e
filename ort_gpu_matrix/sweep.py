"""The release sweep: every selected cell in all its modes, one report, and regressions against a baseline.

A sweep carries on past a failing cell (a failed build, a failing verdict) and judges the whole at the
end: it fails when any mode failed, a selected cell could not run, or anything regressed. It writes
`<results>/sweep.json` (for tools and CI), `report.md` and `report.html`, and appends the Markdown to
$GITHUB_STEP_SUMMARY when that is set.
"""
from __future__ import annotations

import dataclasses
import json
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from . import scheduler
from .baseline import Baseline, resolve_baseline
from .cells import Cell
from .config.model import Matrix
from .errors import MatrixError
from .fsutil import write_atomic
from .harness import run_cell
from .host import check
from .render import html, markdown
from .report import Report, build
from .results import Result, StoreError, current_path
from .venvs import BuildError

SWEEP_VERSION = 1
RERUN_PLUGIN = "pytest-rerunfailures"


class SelectionError(Exception):
    """A --select that matches nothing; the message lists what exists."""


def select(cells: Sequence[Cell], selectors: Sequence[str]) -> list[tuple[Cell, tuple[str, ...]]]:
    """Cells and modes chosen by cell name, mode session name, or tag (a mode, an id of python/ort/torch/libs)."""
    if not selectors:
        return [(c, c.modes) for c in cells]
    chosen: dict[str, tuple[Cell, set[str]]] = {}
    for sel in selectors:
        hits = 0
        for c in cells:
            tags = {c.python, c.ort.id, c.torch.id, c.libs.id, "cells"}
            modes = ({m for m in c.modes if sel in (c.name, c.mode_session(m))} or
                     (set(c.modes) if sel in tags else {m for m in c.modes if m == sel}))
            if modes:
                hits += 1
                chosen.setdefault(c.name, (c, set()))[1].update(modes)
        if not hits:
            names = ", ".join(c.name for c in cells)
            raise SelectionError(f"--select {sel!r} matches no cell, mode session or tag; cells: {names}")
    return [(c, tuple(m for m in c.modes if m in modes)) for c, modes in chosen.values()]


@dataclass
class SweepOutcome:
    report: Report
    errors: dict[str, str] = field(default_factory=dict)  # cell -> what stopped it (a build, a store)
    files: dict[str, Path] = field(default_factory=dict)
    interrupted: str | None = None  # "SIGINT"/"SIGTERM" when the sweep was stopped (its report is still written)

    @property
    def ok(self) -> bool:
        """Nothing failed, nothing regressed, and something ran: a sweep of nothing is no green."""
        return self.report.ok and not self.errors and bool(self.report.results) and not self.interrupted


def with_reruns(matrix: Matrix, reruns: int) -> tuple[Matrix, list[str]]:
    """pytest-rerunfailures in every venv (part of the fingerprint) and the pytest arguments that use it."""
    if reruns <= 0:
        return matrix, []
    tools = matrix.settings.tools if RERUN_PLUGIN in matrix.settings.tools else (*matrix.settings.tools, RERUN_PLUGIN)
    settings = dataclasses.replace(matrix.settings, tools=tools)
    return dataclasses.replace(matrix, settings=settings), ["-p", "pytest_rerunfailures", f"--reruns={reruns}"]


def run(matrix: Matrix, chosen: list[tuple[Cell, tuple[str, ...]]], posargs: Sequence[str], explicit: bool,
        baseline: str | None, save_baseline: str | None, out_dir: Path | None,
        log: Callable[[str], None] = print, echo: Callable[[str], None] = print,
        slots: Sequence[str] = (), child_args: Sequence[str] = (), noxfile: Path | None = None,
        child: bool = False, earlier: dict[str, Result] | None = None) -> SweepOutcome:
    """Every chosen cell; with `slots`, one child process per GPU slot at a time (scheduler.py).

    A `child` sweep (one cell, started by a parent's scheduler) stores its results and writes no
    report, sweep.json or baseline: the parent does, once every child is done.
    `earlier`: results of this sweep stored by other children that a mode reads (teeth's census).
    """
    started = datetime.now(UTC).isoformat(timespec="seconds")
    before = Baseline.load(resolve_baseline(baseline, matrix.path)) if baseline else None  # fail before running
    earlier = dict(earlier or {})
    results: list[Result] = []
    not_run: dict[str, str] = {}
    errors: dict[str, str] = {}
    runnable: list[tuple[Cell, tuple[str, ...]]] = []
    for cell, modes in chosen:
        resolved = check(matrix, cell)
        if isinstance(resolved, MatrixError):
            why = "; ".join(f"{p.key}: {p.problem}" for p in resolved.problems)
            if explicit:
                errors[cell.name] = f"cannot run on this host: {why}"
            else:
                not_run[cell.name] = why
            log(f"sweep: {cell.name} cannot run here: {why}")
            continue
        if slots:
            runnable.append((cell, modes))
            continue
        log(f"sweep: {cell.name} ({', '.join(modes)})")
        try:
            results += run_cell(matrix, cell, resolved, modes, posargs, earlier, log, echo)
        except (BuildError, StoreError, MatrixError) as exc:
            errors[cell.name] = ("; ".join(f"{p.key}: {p.problem}" for p in exc.problems)
                                 if isinstance(exc, MatrixError) else str(exc).splitlines()[0])
            log(f"sweep: {cell.name} stopped: {errors[cell.name]}")
    interrupted = None
    if runnable:
        assert noxfile is not None
        found, interrupted = _in_slots(matrix, runnable, slots, noxfile, child_args, errors, log)
        results += found
    report = build(results, before, baseline, skipped=not_run)
    outcome = SweepOutcome(report, errors, interrupted=interrupted)
    if child:
        return outcome
    outcome.files = write(matrix, outcome, started, out_dir)
    if save_baseline:
        path = resolve_baseline(save_baseline, matrix.path)
        Baseline.of(results, save_baseline).save(path)
        outcome.files["baseline"] = path
        log(f"sweep: baseline saved as {path}")
    return outcome


def _in_slots(matrix: Matrix, runnable: list[tuple[Cell, tuple[str, ...]]], slots: Sequence[str], noxfile: Path,
              child_args: Sequence[str], errors: dict[str, str],
              log: Callable[[str], None]) -> tuple[list[Result], str | None]:
    """Each chosen mode run as a child sweep in a GPU slot (scheduler.py); then each one's fresh result, read back."""
    results_dir = matrix.workspace.results_dir
    jobs = scheduler.jobs_of(runnable, results_dir)
    order, makespan = scheduler.plan(jobs, len(slots))
    log(f"sweep: {scheduler.describe(order, makespan, len(slots))}")
    stopped = scheduler.run(order, slots, noxfile, child_args, say=log,
                            args_for=lambda job: scheduler.census_args(job, results_dir, log))
    found: list[Result] = []
    failed: dict[str, list[str]] = {}
    for job in jobs:
        got = scheduler.collect(job, results_dir, stopped)
        if isinstance(got, Result):
            found.append(got)
        else:
            failed.setdefault(job.cell.name, []).append(got)
    for cell, whys in failed.items():
        errors[cell] = "; ".join(dict.fromkeys(whys))
    write_atomic(results_dir / "sweep-timeline.json", json.dumps(scheduler.timeline(jobs), indent=2) + "\n")
    return found, stopped


def write(matrix: Matrix, outcome: SweepOutcome, started: str, out_dir: Path | None) -> dict[str, Path]:
    """sweep.json beside the results, report.md and report.html in out_dir (default: the results dir)."""
    report = outcome.report
    results_dir = matrix.workspace.results_dir
    out = out_dir or results_dir
    cmp = report.comparison.to_dict() if report.comparison else {
        "regressions": [], "improvements": [], "added": [], "removed": [], "flaky": []}
    data = {
        "sweep_version": SWEEP_VERSION, "started": started, "host": socket.gethostname(), "ok": outcome.ok,
        "baseline": report.baseline_name,
        "interrupted": outcome.interrupted,
        "cells": [{"session": r.session, "cell": r.cell.name, "mode": r.mode, "verdict": r.verdict.value,
                   "result": str(current_path(results_dir, r.session)), "bundle": r.bundle} for r in report.results],
        **cmp, "skipped": report.skipped, "errors": outcome.errors,
    }
    files = {"sweep": results_dir / "sweep.json", "markdown": out / "report.md", "html": out / "report.html"}
    md = markdown.render(report)
    write_atomic(files["sweep"], json.dumps(data, indent=2) + "\n")
    write_atomic(files["markdown"], md)
    write_atomic(files["html"], html.render(report, out))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as f:
            f.write(md)
    return files


def report_only(matrix: Matrix, results: list[Result], baseline: str | None, out_dir: Path | None) -> SweepOutcome:
    """`nox -s report`: the same report from result files, running nothing."""
    before = Baseline.load(resolve_baseline(baseline, matrix.path)) if baseline else None
    outcome = SweepOutcome(build(results, before, baseline))
    outcome.files = write(matrix, outcome, datetime.now(UTC).isoformat(timespec="seconds"), out_dir)
    return outcome


