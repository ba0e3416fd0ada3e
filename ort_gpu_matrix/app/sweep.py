"""The release sweep: every selected cell in all its modes, one report, and regressions against a baseline.

A sweep carries on past a failing cell (a failed build, a failing verdict) and judges the whole at the
end under its gate (report/model.py). It writes `<results>/sweep.json` (for tools and CI), `report.md` and
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..compare.changes import Scope
from ..config.model import Matrix
from ..config.overrides import Workspace
from ..drive import readback, scheduler
from ..drive.batch import run_batch
from ..drive.cell import CELL_ERRORS, run_cell
from ..drive.census import censuses, handed_over
from ..drive.confirm import ConfirmSettings, confirm
from ..drive.context import CellRuns
from ..drive.overlap import own_workers, sweep_room
from ..execute.group import Interrupted
from ..host.gpus import slots, unasked
from ..host.host import check
from ..host.room import Room, parse_wanted
from ..plan.cells import Cell, cells_of
from ..plan.select import select
from ..report import progress
from ..report.model import GATES, Sweep, build
from ..report.render.live import Display
from ..store.baseline import Baseline, BaselineError, baselines_dir, resolve_baseline, save_path
from ..store.results import Result
from ..util.errors import MatrixError, anywhere
from ..util.fs import unwritable, write_atomic
from ..util.voice import Voice, unheard
from .outcome import Options, Plan, SweepError, SweepOutcome
from .outputs import expectations, junit, junit_problem, save, summary, write

RERUN_PLUGIN = "pytest-rerunfailures"


@dataclass(frozen=True)
class Invocation:
    """How this sweep process was started, beyond what the user asked of the sweep.

    `slots`: one child process per GPU slot at a time (scheduler.py), started with `noxfile` and `child_args`.
    A `child` sweep (one cell, started by a parent's scheduler) stores its results and writes no report,
    sweep.json or baseline: the parent does, once every child is done. `earlier`: results of this sweep
    stored by other children that a mode reads (teeth's census), and `census_files`: those a parent hands over
    while a teeth started early runs (census.py). `room`: what room.py decided for the slots
    (logged; each run's -n cut to its share where it says so). With a `display`, the runs are watched
    (progress.py): one line as each starts and ends, pytest's output only in each run's log, the harness's
    own lines in <results>/sweep.log. Without one, the harness's lines go to `voice.log` and pytest's output
    to `voice.echo`, as a cell session streams them.
    """

    voice: Voice
    posargs: tuple[str, ...] = ()
    explicit: bool = False  # cells chosen by name or tag: one this host cannot run is an error
    slots: tuple[str, ...] = ()
    child_args: tuple[str, ...] = ()
    noxfile: Path | None = None
    child: bool = False
    earlier: dict[str, Result] | None = None
    census_files: Mapping[str, Path] = field(default_factory=dict)
    room: Room | None = None
    display: Display | None = None
    full: bool = False  # --full: every mode runs every test

    def pytest_for(self, job: scheduler.Job) -> Sequence[str]:
        return self.room.pytest_args(own_workers(job, self.posargs)) if self.room else []


def with_reruns(chosen: list[tuple[Cell, tuple[str, ...]]], reruns: int
                ) -> tuple[list[tuple[Cell, tuple[str, ...]]], list[str]]:
    """pytest-rerunfailures in each chosen cell's venv (part of its fingerprint) and the pytest arguments that
    use it: the command line's option changes the cells it plans, never the matrix they came from."""
    if reruns <= 0:
        return chosen, []

    def rerunning(cell: Cell) -> Cell:
        tools = cell.settings.tools if RERUN_PLUGIN in cell.settings.tools else (*cell.settings.tools, RERUN_PLUGIN)
        return dataclasses.replace(cell, settings=dataclasses.replace(cell.settings, tools=tools))

    return [(rerunning(c), modes) for c, modes in chosen], ["-p", "pytest_rerunfailures", f"--reruns={reruns}"]


@dataclass(frozen=True)
class SweepArgs:
    """`nox -s sweep -- ...` as the session parsed it: what it hands the engine (the rest is in Options)."""

    select: tuple[str, ...] = ()
    rerun_failures: int = 0
    slots_per_gpu: str = "auto"
    gpus: str | None = None
    census: tuple[str, ...] = ()  # SESSION=RUN_ID, given by a --gpus parent to its child
    census_file: tuple[str, ...] = ()  # SESSION=PATH, for a teeth started early
    pytest_args: tuple[str, ...] = ()
    full: bool = False  # every mode runs every test (carry.py carries nothing)


def _gpus_of(given: str | None, voice: Voice) -> str | None:
    """--gpus as given, or what the host suggests unasked (gpus.unasked), said in the log either way."""
    if given is not None:
        return given
    spec, why = unasked(os.environ)
    if why:
        voice.log(f"sweep: {why}")
    return spec


def from_command(matrix: Matrix, cmd: SweepArgs, opts: Options, how: Invocation) -> SweepOutcome:
    """The sweep the command line asks for: cells chosen, reruns and GPU slots decided, censuses handed on.

    Raises what a bad option raises (SelectionError, GpuError, RoomError, CensusError, ...), before any cell runs.
    """
    chosen, rerun_args = with_reruns(select(cells_of(matrix), list(cmd.select)), cmd.rerun_failures)
    wanted = parse_wanted(cmd.slots_per_gpu)
    opts = dataclasses.replace(opts, slots_per_gpu=wanted)  # the confirmation reruns share the GPU alike
    gpu_slots = [] if how.child else slots(_gpus_of(cmd.gpus, how.voice), wanted or 1, how.voice)
    posargs = (*rerun_args, *cmd.pytest_args)
    room = None
    if gpu_slots:  # with --slots-per-gpu auto, one slot per GPU so far: now the room on each
        distinct = sorted(set(gpu_slots), key=gpu_slots.index)
        room = sweep_room(matrix.workspace.results_dir, chosen, gpu_slots if wanted is None else distinct, wanted,
                          list(posargs), cmd.full)
        gpu_slots = (gpu_slots if wanted is None else distinct) * room.slots
    child_args = (*(["--rerun-failures", str(cmd.rerun_failures)] if cmd.rerun_failures else []),
                  *(["--full"] if cmd.full else []), *(["--", *cmd.pytest_args] if cmd.pytest_args else []))
    earlier = censuses(matrix.workspace.results_dir, list(cmd.census), how.voice)
    how = dataclasses.replace(how, posargs=posargs, explicit=bool(cmd.select), slots=tuple(gpu_slots),
                              child_args=child_args, earlier=earlier, census_files=handed_over(list(cmd.census_file)),
                              room=room, full=cmd.full)
    return run(matrix, chosen, opts, how)


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
    _junit_path(opts, "nothing was run")


def _junit_path(opts: Options, done: str) -> None:
    why = junit_problem(opts.junit_xml) if opts.junit_xml is not None else None
    if why:
        raise SweepError(f"--junit-xml {opts.junit_xml}: {why}; {done}. Fix: name a file in a directory you can "
                         "write, e.g. --junit-xml results/junit.xml")


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
            voice: Voice) -> Plan:
    """Everything that can be known before a cell runs, checked; raises SweepError or BaselineError."""
    _check_gate(opts)
    before, save_to, saved_before, before_path = _baselines(matrix, opts)
    _outputs(matrix, opts, save_to is not None)
    plan = Plan(before, save_to, saved_before, before_path)
    for cell, modes in chosen:
        resolved = check(cell, matrix.workspace)
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
        voice.log(f"sweep: {cell.name} cannot run: {why}")
    plan.scope = Scope(frozenset(c.name for c in cells_of(matrix)),
                       frozenset((c.name, m) for c, modes in chosen for m in modes), {})
    return plan


def run(matrix: Matrix, chosen: list[tuple[Cell, tuple[str, ...]]], opts: Options, how: Invocation) -> SweepOutcome:
    """Every chosen cell, in this process or (with `how.slots`) as children; then the confirmation, the report,
    sweep.json and the baseline asked for."""
    started = datetime.now(UTC).isoformat(timespec="seconds")
    plan = prepare(matrix, chosen, Options() if how.child else opts, how.explicit, how.voice)
    earlier = dict(how.earlier or {})  # with the censuses a parent named
    errors = dict(plan.errors)
    results = [] if how.slots else _serial(matrix.workspace, plan, how, earlier, errors)
    interrupted = None
    given: dict[str, dict[str, str]] = {}  # session -> what its slot set: its confirmation reruns get it again
    if how.slots and plan.runnable:
        if how.room is not None:
            how.voice.log(f"sweep: {how.room.slots} mode run(s) at once per GPU ({how.room.why})")
        found, interrupted = _in_slots(matrix.workspace.results_dir, [(c, m) for c, m, _ in plan.runnable], how,
                                       errors, given)
        results += found
    if opts.confirm and not how.child and interrupted is None and results:
        results, interrupted = _confirmed(matrix.workspace, plan, opts, how, results, given)
    scope = dataclasses.replace(plan.scope, not_run={**plan.not_run, **errors})
    report = build(results, plan.before, opts.baseline, Sweep(skipped=plan.not_run, scope=scope, gate=opts.gate,
                   allow_missing=opts.allow_missing, errors=errors, interrupted=interrupted,
                   confirm=None if how.child else opts.confirm))
    outcome = SweepOutcome(report, errors, interrupted=interrupted)
    if how.child:
        return outcome
    outcome.files = write(matrix.workspace.results_dir, outcome, started, opts.out)
    if opts.junit_xml is not None:
        junit(opts.junit_xml, outcome, expectations(matrix), how.voice)
    if plan.save_to is not None:
        save(plan, opts, results, outcome, how.voice)
    summary(outcome, how.voice)
    return outcome


def _serial(ws: Workspace, plan: Plan, how: Invocation, earlier: dict[str, Result],
            errors: dict[str, str]) -> list[Result]:
    """Each runnable cell in this process, one after another; a cell that stops is an error, never the sweep's end."""
    results: list[Result] = []
    log, serial = how.voice.log, [(cell, modes) for cell, modes, _ in plan.runnable]
    watch = progress.SweepProgress(scheduler.jobs_of(serial, ws.results_dir), (), how.display,
                           ws.results_dir) if how.display is not None and serial and not how.child else None
    heard = how.voice if watch is None else watch.heard(how.voice)
    try:
        for cell, modes, resolved in plan.runnable:
            if watch is None:
                log(f"sweep: {cell.name} ({', '.join(modes)})")
            try:
                results += run_cell(CellRuns(cell, resolved, ws, how.posargs, earlier, heard,
                                             census_files=how.census_files, full=how.full), modes)
            except CELL_ERRORS as exc:
                errors[cell.name] = ("; ".join(f"{p.key}: {p.problem}" for p in exc.problems)
                                     if isinstance(exc, MatrixError) else str(exc).splitlines()[0])
                log(f"sweep: {cell.name} stopped: {errors[cell.name]}")
                if watch is not None:
                    watch.not_run(cell.name, errors[cell.name])
    finally:
        if watch is not None:
            watch.close()
    return results


def _confirmed(ws: Workspace, plan: Plan, opts: Options, how: Invocation, results: list[Result],
               given: dict[str, dict[str, str]]) -> tuple[list[Result], str | None]:
    """The results with their changes confirmed; where confirmation stops, the first runs stand."""
    try:
        voice = how.voice if how.display is None else dataclasses.replace(how.voice, echo=unheard)  # in the logs
        rr = ConfirmSettings(ws, opts.confirm, voice, how.posargs, given, wanted=opts.slots_per_gpu)
        return confirm(rr, plan.runnable, results, plan.before), None
    except CELL_ERRORS as exc:  # the first runs stand, every change unconfirmed-checked
        how.voice.log(f"sweep: warning: confirmation stopped, every change counts as it was first seen: {exc}")
        return results, None
    except KeyboardInterrupt as exc:  # stopped while confirming: the first runs stand, and the report is written
        interrupted = "SIGTERM" if isinstance(exc, Interrupted) else "SIGINT"
        how.voice.log(f"sweep: {interrupted} during confirmation: every change counts as it was first seen")
        return results, interrupted


def _in_slots(results_dir: Path, runnable: list[tuple[Cell, tuple[str, ...]]], how: Invocation,
              errors: dict[str, str], given: dict[str, dict[str, str]]) -> tuple[list[Result], str | None]:
    """Each chosen mode run as a child sweep in a GPU slot (scheduler.py); then each one's fresh result, read back,
    and (into `given`) what each run's slot set, for its confirmation reruns."""
    assert how.noxfile is not None
    slots, noxfile, child_args = list(how.slots), how.noxfile, list(how.child_args)
    pytest_for = how.pytest_for
    display = None if how.child else how.display
    jobs = scheduler.jobs_of(runnable, results_dir, how.full)
    watch = progress.SweepProgress(jobs, slots, display, results_dir) if display is not None else None
    try:
        stopped = run_batch(jobs, slots, scheduler.ChildCommand(noxfile, child_args, pytest_for=pytest_for),
                                  scheduler.Hooks(how.voice, events=watch), results_dir, "sweep")
    finally:
        if watch is not None:
            watch.close()
    found: list[Result] = []
    failed: dict[str, list[str]] = {}
    for job in jobs:
        if job.proc is not None:
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


def report_only(matrix: Matrix, results: list[Result], opts: Options, roots: Sequence[Path],
                voice: Voice) -> SweepOutcome:
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
    _junit_path(opts, "nothing was written")
    # what the matrix holds, not what arrived: a baseline cell whose artifact never came is missing, not removed
    cells = cells_of(matrix)
    scope = Scope(frozenset(c.name for c in cells), frozenset((c.name, m) for c in cells for m in c.modes),
                  {c.name: "no result file among the inputs" for c in cells})
    outcome = SweepOutcome(build(results, before, opts.baseline, Sweep(scope=scope, gate=opts.gate,
                                 allow_missing=opts.allow_missing)))
    outcome.files = write(matrix.workspace.results_dir, outcome, datetime.now(UTC).isoformat(timespec="seconds"), out,
                          name="report.json", roots=roots)
    if opts.junit_xml is not None:
        junit(opts.junit_xml, outcome, expectations(matrix), voice)
    summary(outcome, voice)
    return outcome
