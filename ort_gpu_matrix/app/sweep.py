"""The release sweep: every selected cell in all its modes, one report, and regressions against a baseline.

A sweep carries on past a failing cell (a failed build, a failing verdict) and judges the whole at the
end under its gate (report.py). It writes `<results>/sweep.json` (for tools and CI), `report.md` and
`report.html`, the baseline asked for, and appends the Markdown to $GITHUB_STEP_SUMMARY when that is set.

Everything that comes from a file or names one is checked before the first cell runs (`prepare`): the
baseline and its field types, the baseline to be saved and whether saving it would shrink or poison it,
every output dir, and which chosen cells cannot run and why. A sweep that has run for an hour must
never end in a traceback, or lose its report, over something that could have been seen at the start.
An optional output (the step summary) that fails is a warning, never a lost run.
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

from ..compare.changes import Comparison, Scope
from ..compare.reruns import DEFAULT as CONFIRM_DEFAULT
from ..compare.reruns import confirm
from ..config.model import Matrix
from ..drive import earlyteeth, readback, scheduler
from ..drive.cell import Earlier, run_cell
from ..drive.overlap import own_workers
from ..envs.venvs import BuildError
from ..execute.mode_run import Interrupted
from ..host.host import Resolved, check
from ..host.room import Room
from ..plan.cells import Cell, cells_of
from ..report import progress
from ..report.model import GATES, Report, build
from ..report.render import html, markdown
from ..report.render.live import Display
from ..store.baseline import Baseline, BaselineError, baselines_dir, resolve_baseline, save_path
from ..store.results import Result, StoreError, current_path, plain
from ..util.errors import MatrixError, anywhere
from ..util.fs import unwritable, write_atomic

SWEEP_VERSION = 3  # 3: confirm, unconfirmed, confirmation (the reruns), libs_unconfirmed
RERUN_PLUGIN = "pytest-rerunfailures"


class SweepError(Exception):
    """Something the sweep was asked for that it cannot do; found before any cell runs. Names the fix."""


@dataclass(frozen=True)
class Options:
    """What the user asked of this sweep, beyond which cells."""

    baseline: str | None = None
    save_baseline: str | None = None
    out: Path | None = None
    gate: str = "all"
    allow_missing: bool = False
    replace: bool = False  # --save-baseline writes exactly this sweep's records, dropping what it did not run
    accept_regressions: bool = False  # --baseline X --save-baseline X may fold this sweep's regressions in
    confirm: int = CONFIRM_DEFAULT  # --confirm N: reruns of each mode's regressed tests before they count (confirm.py)
    slots_per_gpu: int | None = None  # --slots-per-gpu N (None: auto): also how many of a cell's reruns share the GPU


@dataclass
class Plan:
    """What `prepare` found: the baseline, where things go, and what can run."""

    before: Baseline | None
    save_to: Path | None
    saved_before: Baseline | None  # the baseline that --save-baseline would replace, when there is one
    before_path: Path | None = None  # the file --baseline named: is it the one --save-baseline writes?
    runnable: list[tuple[Cell, tuple[str, ...], Resolved]] = field(default_factory=list)
    not_run: dict[str, str] = field(default_factory=dict)  # cell -> why this host cannot run it
    errors: dict[str, str] = field(default_factory=dict)  # cell -> a problem of the matrix: it fails the sweep
    scope: Scope = field(default_factory=Scope)


@dataclass
class SweepOutcome:
    report: Report
    errors: dict[str, str] = field(default_factory=dict)  # cell -> what stopped it (a build, a store)
    files: dict[str, Path] = field(default_factory=dict)
    interrupted: str | None = None  # "SIGINT"/"SIGTERM" when the sweep was stopped (its report is still written)
    warnings: list[str] = field(default_factory=list)  # an optional output that failed, a baseline not saved
    refused: str | None = None  # why the asked-for baseline was not saved

    @property
    def ok(self) -> bool:
        """Green under the report's gate, and the baseline asked for was saved."""
        return self.report.ok and self.refused is None


def with_reruns(matrix: Matrix, reruns: int) -> tuple[Matrix, list[str]]:
    """pytest-rerunfailures in every venv (part of the fingerprint) and the pytest arguments that use it."""
    if reruns <= 0:
        return matrix, []
    tools = matrix.settings.tools if RERUN_PLUGIN in matrix.settings.tools else (*matrix.settings.tools, RERUN_PLUGIN)
    settings = dataclasses.replace(matrix.settings, tools=tools)
    return dataclasses.replace(matrix, settings=settings), ["-p", "pytest_rerunfailures", f"--reruns={reruns}"]


def _check_gate(opts: Options) -> None:
    if opts.gate not in GATES:
        raise SweepError(f"--gate {opts.gate!r}: use one of {', '.join(GATES)}")
    if opts.gate == "regressions" and not opts.baseline:
        raise SweepError("--gate regressions compares with a baseline: add --baseline NAME (or use --gate all)")


def _outputs(matrix: Matrix, opts: Options, saving: bool) -> None:
    wanted = [("the results dir (MATRIX_RESULTS)", matrix.workspace.results_dir)]
    if opts.out is not None:
        wanted.append(("--out", opts.out))
    if saving:
        wanted.append(("the baselines dir (MATRIX_BASELINES, else baselines/ beside the matrix)",
                       baselines_dir(matrix.path)))
    for what, path in wanted:
        why = unwritable(path)
        if why:
            raise SweepError(f"{what} {path}: {why}; nothing was run. Fix: point it at a directory you can write")


def _baselines(matrix: Matrix, opts: Options) -> tuple[Baseline | None, Path | None, Baseline | None, Path | None]:
    before, path = None, None
    if opts.baseline:
        path = resolve_baseline(opts.baseline, matrix.path)
        before = Baseline.load(path)
        names = {c.name for c in cells_of(matrix)}
        if before.cells and not set(before.cells) & names:
            raise BaselineError(
                f"{path}: baseline {before.name or opts.baseline!r} holds no cell of {matrix.path} (it has "
                f"{', '.join(sorted(before.cells)[:5])}{', ...' if len(before.cells) > 5 else ''}; this matrix has "
                f"{', '.join(sorted(names)[:5])}{', ...' if len(names) > 5 else ''}): it was saved from another "
                "matrix, so comparing would find nothing. Fix: name the baseline saved from this matrix")
    save_to, saved_before = None, None
    if opts.save_baseline is not None:
        save_to = save_path(opts.save_baseline, matrix.path)
        if save_to.exists() and not opts.replace:
            try:
                saved_before = Baseline.load(save_to)
            except BaselineError as exc:
                raise BaselineError(f"{exc}. --save-baseline {opts.save_baseline} would replace it: pass --replace "
                                    "to overwrite it with this sweep's records") from None
    elif opts.replace or opts.accept_regressions:
        raise SweepError("--replace and --accept-regressions go with --save-baseline NAME; nothing was run")
    return before, save_to, saved_before, path


def prepare(matrix: Matrix, chosen: list[tuple[Cell, tuple[str, ...]]], opts: Options, explicit: bool,
            log: Callable[[str], None] = print) -> Plan:
    """Everything that can be known before a cell runs, checked; raises SweepError or BaselineError."""
    _check_gate(opts)
    before, save_to, saved_before, before_path = _baselines(matrix, opts)
    _outputs(matrix, opts, save_to is not None)
    plan = Plan(before, save_to, saved_before, before_path)
    for cell, modes in chosen:
        resolved = check(matrix, cell)
        if not isinstance(resolved, MatrixError):
            plan.runnable.append((cell, modes, resolved))
            continue
        broken = [p for p in resolved.problems if anywhere(p)]
        why = "; ".join(f"{p.key}: {p.problem}" for p in broken or resolved.problems)
        if broken:  # no host could run it: a matrix problem, never "not runnable here"
            plan.errors[cell.name] = f"the matrix is broken for this cell: {why}"
        elif explicit:
            plan.errors[cell.name] = f"cannot run on this host: {why}"
        else:
            plan.not_run[cell.name] = why
        log(f"sweep: {cell.name} cannot run: {why}")
    plan.scope = Scope(frozenset(c.name for c in cells_of(matrix)),
                       frozenset((c.name, m) for c, modes in chosen for m in modes), {})
    return plan


def run(matrix: Matrix, chosen: list[tuple[Cell, tuple[str, ...]]], posargs: Sequence[str], explicit: bool,
        opts: Options, log: Callable[[str], None] = print, echo: Callable[[str], None] = print,
        slots: Sequence[str] = (), child_args: Sequence[str] = (), noxfile: Path | None = None,
        child: bool = False, earlier: dict[str, Result] | None = None,
        room: Room | None = None, display: Display | None = None) -> SweepOutcome:
    """Every chosen cell; with `slots`, one child process per GPU slot at a time (scheduler.py).

    With a `display`, the runs are watched (progress.py): one line as each starts and ends, pytest's
    output only in each run's log, the harness's own lines in <results>/sweep.log. Without one, the
    harness's lines go to `log` and pytest's output to `echo`, as a cell session streams them.

    A `child` sweep (one cell, started by a parent's scheduler) stores its results and writes no
    report, sweep.json or baseline: the parent does, once every child is done.
    `earlier`: results of this sweep stored by other children that a mode reads (teeth's census).
    `room`: what room.py decided for the slots (logged; each run's -n cut to its share where it says so).
    """
    started = datetime.now(UTC).isoformat(timespec="seconds")
    plan = prepare(matrix, chosen, Options() if child else opts, explicit, log)
    earlier = earlier if isinstance(earlier, Earlier) else dict(earlier or {})  # Earlier: with its handed-over censuses
    results: list[Result] = []
    errors = dict(plan.errors)
    in_slots: list[tuple[Cell, tuple[str, ...]]] = []
    serial = [(cell, modes) for cell, modes, _ in plan.runnable] if not slots else []
    watch = progress.Watch(scheduler.jobs_of(serial, matrix.workspace.results_dir), (), display,
                           matrix.workspace.results_dir) if display is not None and serial and not child else None
    try:
        for cell, modes, resolved in plan.runnable:
            if slots:
                in_slots.append((cell, modes))
                continue
            if watch is None:
                log(f"sweep: {cell.name} ({', '.join(modes)})")
            try:
                results += run_cell(matrix, cell, resolved, modes, posargs, earlier,
                                    log if watch is None else watch.detail,
                                    echo if watch is None else _quiet, watch=watch)
            except (BuildError, StoreError, MatrixError) as exc:
                errors[cell.name] = ("; ".join(f"{p.key}: {p.problem}" for p in exc.problems)
                                     if isinstance(exc, MatrixError) else str(exc).splitlines()[0])
                log(f"sweep: {cell.name} stopped: {errors[cell.name]}")
                if watch is not None:
                    watch.not_run(cell.name, errors[cell.name])
    finally:
        if watch is not None:
            watch.close()
    interrupted = None
    given: dict[str, dict[str, str]] = {}  # session -> what its slot set: its confirmation reruns get it again
    if in_slots:
        assert noxfile is not None
        if room is not None:
            log(f"sweep: {room.slots} mode run(s) at once per GPU ({room.why})")
        found, interrupted = _in_slots(matrix, in_slots, slots, noxfile, child_args, errors, log,
                                       lambda job: room.pytest_args(own_workers(job, posargs)) if room else [],
                                       None if child else display, given)
        results += found
    if opts.confirm and not child and interrupted is None and results:
        try:
            results = confirm(matrix, plan.runnable, results, plan.before, opts.confirm, posargs, log,
                              echo if display is None else _quiet, given, wanted=opts.slots_per_gpu)  # watched: pytest's output stays in the logs
        except (BuildError, StoreError, MatrixError) as exc:  # the first runs stand, every change unconfirmed-checked
            log(f"sweep: warning: confirmation stopped, every change counts as it was first seen: {exc}")
        except KeyboardInterrupt as exc:  # stopped while confirming: the first runs stand, and the report is written
            interrupted = "SIGTERM" if isinstance(exc, Interrupted) else "SIGINT"
            log(f"sweep: {interrupted} during confirmation: every change counts as it was first seen")
    scope = dataclasses.replace(plan.scope, not_run={**plan.not_run, **errors})
    report = build(results, plan.before, opts.baseline, skipped=plan.not_run, scope=scope, gate=opts.gate,
                   allow_missing=opts.allow_missing, errors=errors, interrupted=interrupted,
                   confirm=None if child else opts.confirm)
    outcome = SweepOutcome(report, errors, interrupted=interrupted)
    if child:
        return outcome
    outcome.files = write(matrix, outcome, started, opts.out, log)
    if plan.save_to is not None:
        _save(plan, opts, results, outcome, log)
    _summary(outcome, log)
    return outcome


def _save(plan: Plan, opts: Options, results: list[Result], outcome: SweepOutcome, log: Callable[[str], None]) -> None:
    """--save-baseline: never shrunk, never overwritten silently, never fed this sweep's own regressions."""
    assert plan.save_to is not None and opts.save_baseline is not None
    cmp = outcome.report.comparison
    # the same file, however each option named it (a name, a path, baselines/ beside the matrix or MATRIX_BASELINES)
    same = plan.before_path is not None and plan.before_path.resolve() == plan.save_to.resolve()
    if same and cmp and cmp.regressions and not opts.accept_regressions:
        outcome.refused = (f"baseline {opts.save_baseline} was NOT saved: this sweep has {len(cmp.regressions)} "
                           f"regression(s) against it, and saving would make them the new normal. Fix: look at them, "
                           "then re-run with --accept-regressions to save anyway")
        log(f"sweep: {outcome.refused}")
        return
    if not results:
        outcome.refused = f"baseline {opts.save_baseline} was NOT saved: nothing ran"
        log(f"sweep: {outcome.refused}")
        return
    new = Baseline.of(results, opts.save_baseline)
    existed = plan.save_to.exists()
    kept: list[str] = []
    if plan.saved_before is not None:
        new, kept = new.merged_over(plan.saved_before)
    new.save(plan.save_to)
    outcome.files["baseline"] = plan.save_to
    updated = f"updated {len(Baseline.of(results).modes())} mode record(s)"
    if kept:
        how = f"{updated}, kept {len(kept)} this sweep did not run ({', '.join(kept[:6])}" \
              f"{', ...' if len(kept) > 6 else ''}; --replace drops them)"
    else:
        how = "replaced (--replace)" if existed and opts.replace else updated if existed else "saved"
    log(f"sweep: baseline {opts.save_baseline} {how}: {plan.save_to}")


def _summary(outcome: SweepOutcome, log: Callable[[str], None]) -> None:
    """Append report.md to $GITHUB_STEP_SUMMARY; a failure there is one warning line, never a lost run."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary or "markdown" not in outcome.files:
        return
    try:
        with open(summary, "a") as f:
            f.write(outcome.files["markdown"].read_text())
    except OSError as exc:
        warning = f"GITHUB_STEP_SUMMARY={summary} could not be written ({exc.strerror or exc}); " \
                  "the report, sweep.json and any baseline were written"
        outcome.warnings.append(warning)
        log(f"warning: {warning}")


def _quiet(line: str) -> None:
    """pytest's output of a watched sweep: already in the run's pytest.log, not on the terminal."""


def _in_slots(matrix: Matrix, runnable: list[tuple[Cell, tuple[str, ...]]], slots: Sequence[str], noxfile: Path,
              child_args: Sequence[str], errors: dict[str, str],
              log: Callable[[str], None],
              pytest_for: Callable[[scheduler.Job], Sequence[str]] = lambda job: (),
              display: Display | None = None,
              given: dict[str, dict[str, str]] | None = None) -> tuple[list[Result], str | None]:
    """Each chosen mode run as a child sweep in a GPU slot (scheduler.py); then each one's fresh result, read back,
    and (into `given`) what each run's slot set, for its confirmation reruns."""
    results_dir = matrix.workspace.results_dir
    jobs = scheduler.jobs_of(runnable, results_dir)
    handoff = earlyteeth.mark(jobs, len(slots), results_dir, log)  # a scoped teeth may start beside its census's run
    order, makespan = scheduler.plan(jobs, len(slots))
    log(f"sweep: {scheduler.describe(order, makespan, len(slots))}")
    watch = progress.Watch(jobs, slots, display, results_dir) if display is not None else None
    try:
        stopped = scheduler.run(order, slots,
                                scheduler.Command(noxfile, child_args, pytest_for=pytest_for,
                                                  args_for=lambda job: earlyteeth.args(job, handoff, results_dir, log)),
                                scheduler.Hooks(say=log, events=watch, ended=lambda job: earlyteeth.hand_over(
                                    job, jobs, handoff, results_dir, log)))
    finally:
        if watch is not None:
            watch.close()
        if handoff is not None:
            handoff.close()
    found: list[Result] = []
    failed: dict[str, list[str]] = {}
    for job in jobs:
        if given is not None and job.proc is not None:
            given[job.session] = job.env
        got = readback.collect(job, results_dir, stopped)
        if isinstance(got, Result):
            found.append(got)
        else:
            failed.setdefault(job.cell.name, []).append(got)
    for cell, whys in failed.items():
        errors[cell] = "; ".join(dict.fromkeys(whys))
    write_atomic(results_dir / "sweep-timeline.json", json.dumps(scheduler.timeline(jobs), indent=2) + "\n")
    return found, stopped


def _document(matrix: Matrix, outcome: SweepOutcome, started: str) -> dict[str, object]:
    report = outcome.report
    results_dir = matrix.workspace.results_dir
    cmp = report.comparison.to_dict() if report.comparison else {k: [] for k in Comparison.KEYS}
    return {
        "sweep_version": SWEEP_VERSION, "started": started, "host": socket.gethostname(), "ok": outcome.ok,
        "gate": report.gate, "allow_missing": report.allow_missing, "why_failed": report.why_failed(),
        "baseline": report.baseline_name,
        "interrupted": outcome.interrupted,
        "cells": [{"session": r.session, "cell": r.cell.name, "mode": r.mode, "verdict": r.verdict.value,
                   "result": str(current_path(results_dir, r.session)), "bundle": r.bundle} for r in report.results],
        "already_failing": [r.session for r in report.already_failing],
        **cmp, "skipped": report.skipped, "errors": outcome.errors,
        "confirm": report.confirm,
        "unconfirmed": [u.to_dict() for u in report.unconfirmed],
        "libs_unconfirmed": [{"mode": d.mode, "cells": list(d.cells), "test": t, "left": a, "right": b}
                             for d in report.libs for t, a, b in d.unconfirmed],
        "confirmation": {r.session: plain(r.confirmation) for r in report.results if r.confirmation is not None},
    }


def write(matrix: Matrix, outcome: SweepOutcome, started: str, out_dir: Path | None,
          log: Callable[[str], None] = print, name: str = "sweep.json",
          roots: Sequence[Path] = ()) -> dict[str, Path]:
    """sweep.json beside the results (a report writes report.json instead), report.md and report.html in out_dir."""
    results_dir = matrix.workspace.results_dir
    out = out_dir or results_dir
    files = {"sweep": (results_dir if name == "sweep.json" else out) / name, "markdown": out / "report.md",
             "html": out / "report.html"}
    write_atomic(files["sweep"], json.dumps(_document(matrix, outcome, started), indent=2) + "\n")
    write_atomic(files["markdown"], markdown.render(outcome.report))
    write_atomic(files["html"], html.render(outcome.report, out, roots or [results_dir]))
    return files


def report_only(matrix: Matrix, results: list[Result], opts: Options, roots: Sequence[Path]) -> SweepOutcome:
    """`nox -s report`: the same report from result files, running nothing.

    It writes report.json, never the results dir's sweep.json: that file says what a sweep ran, and a
    report built from other inputs must not stand in for it.
    """
    _check_gate(opts)
    before, _, _, _ = _baselines(matrix, Options(baseline=opts.baseline))
    out = opts.out or matrix.workspace.results_dir
    why = unwritable(out)
    if why:
        raise SweepError(f"--out {out}: {why}. Fix: point it at a directory you can write")
    # what the matrix holds, not what arrived: a baseline cell whose artifact never came is missing, not removed
    cells = cells_of(matrix)
    scope = Scope(frozenset(c.name for c in cells), frozenset((c.name, m) for c in cells for m in c.modes),
                  {c.name: "no result file among the inputs" for c in cells})
    outcome = SweepOutcome(build(results, before, opts.baseline, scope=scope, gate=opts.gate,
                                 allow_missing=opts.allow_missing))
    outcome.files = write(matrix, outcome, datetime.now(UTC).isoformat(timespec="seconds"), out,
                          name="report.json", roots=roots)
    _summary(outcome, print)
    return outcome
