"""`nox -s bisect`: from a change the sweep confirmed to the ORT build that made it, as mozregression does for
Firefox's nightlies and `git bisect run` for commits.

What it follows: the confirmed regressions (or, with --improvement, the improvements) of a test's outcome, tiers
or EPs (`ep`, of the test as a whole or of one op) of the last sweep (`<results>/sweep.json`) in one cell and
mode, or the tests --tests picks from that cell's last result. Over
the builds given, oldest first, it runs the two ends, then halves (plan/bisection.py): each step one build, the
followed tests only, judged against the good end (drive/bisect_step.py). Everything a user can get wrong is
checked before anything is built: the cell, the mode, the test set, the builds against the index. The ends
are checked before any halving: a good end that is not good, or a bad end that is not bad, answers no question,
and the bisect stops there and says which test and why. The record is written after every step (store/bisection.py).
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..compare.changes import Change, ChangeKind
from ..compare.epmoves import eps_text, op_text
from ..config.model import Matrix
from ..config.modes import MODES
from ..drive.bisect_step import ABSENT, Stepper
from ..host.host import Resolved, check
from ..plan.bisection import BAD, GOOD, StepRun, groups, next_step, replayed
from ..plan.builds import PYPI, Build, BuildsError, Index, between, dist_of, from_versions, from_wheels
from ..plan.cells import Cell, cells_of
from ..store import results
from ..store.baseline import TestLine
from ..store.bisection import Bisection, RecordError, load
from ..store.results import ResultError
from ..util.codec import CodecError
from ..util.errors import MatrixError, UserError
from ..util.voice import Voice
from .outputs import read_changes

# the changes a bisect follows: a test's outcome, the tiers it dispatched, the EPs that served it or ran one of its ops
KINDS = (ChangeKind.TEST, ChangeKind.TIER, ChangeKind.EP)


class BisectError(UserError):
    """Nothing was built: the message is one line that names what was wrong and the fix."""


@dataclass(frozen=True)
class BisectArgs:
    """`nox -s bisect -- ...` as the session parsed it: the change to follow and the builds to follow it over."""

    cell: str | None = None
    mode: str | None = None
    tests: str | None = None
    improvement: bool = False
    versions: tuple[str, ...] = ()
    between: tuple[str, str] | None = None
    wheels: tuple[Path, ...] = ()
    confirm: int = 2
    resume: bool = False
    posargs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Followed:
    cell: Cell
    mode: str
    source: str
    tests: dict[str, str]  # test -> its changes, as people read them
    good: dict[str, list[Change]] = field(default_factory=dict)  # test -> its changes: `before` is the baseline's

    def watch(self) -> dict[str, tuple[str, ...]]:
        """Each test followed for an ep change, with the ops of its per-op ones (() the test as a whole): its step
        lines say what served it and where those ops ran (drive/bisect_step.line)."""
        return {t: tuple(sorted({c.op for c in cs if c.op})) for t, cs in self.good.items()
                if any(c.kind == ChangeKind.EP for c in cs)}


def _cell(matrix: Matrix, name: str) -> Cell:
    cells = {c.name: c for c in cells_of(matrix)}
    if name not in cells:
        raise BisectError(f"--cell {name}: no such cell in {matrix.path}; fix: one of {', '.join(sorted(cells))}")
    return cells[name]


def follow(matrix: Matrix, asked: BisectArgs) -> Followed:
    """The cell, the mode and the tests to follow, each refused in one line when it cannot be."""
    if asked.mode is not None and asked.mode not in MODES:
        raise BisectError(f"--mode {asked.mode}: not a mode; fix: one of {', '.join(MODES)}")
    results_dir = matrix.workspace.results_dir
    if asked.tests is not None:
        try:
            pattern = re.compile(asked.tests)
        except re.error as exc:
            raise BisectError(f"--tests {asked.tests!r}: not a regex ({exc})") from None
        if asked.cell is None:
            raise BisectError(f"--tests {asked.tests!r}: which cell's tests? fix: add --cell NAME (and --mode, "
                              "default normal)")
        cell, mode = _cell(matrix, asked.cell), asked.mode or "normal"
        session = cell.mode_session(mode)
        try:
            last = results.load(results.current_path(results_dir, session))
        except (OSError, ResultError):
            raise BisectError(f"--tests {asked.tests!r}: no result of {session} in {results_dir} to pick the tests "
                              f"from; fix: run nox -s {session} first") from None
        picked = sorted(t for t in last.outcomes if pattern.search(t))
        if not picked:
            raise BisectError(f"--tests {asked.tests!r}: matches none of the {len(last.outcomes)} tests of {session}'s "
                              "last run: the test set is empty; fix: a regex that matches node ids")
        return Followed(cell, mode, f"--tests {asked.tests}", {t: "picked by --tests" for t in picked})
    return _from_sweep(matrix, asked, results_dir / "sweep.json")


def _from_sweep(matrix: Matrix, asked: BisectArgs, path: Path) -> Followed:
    what = "improvements" if asked.improvement else "regressions"
    try:
        sweep = read_changes(path)
    except CodecError as exc:
        raise BisectError(f"{path}: is not a sweep's record ({exc}); fix: run nox -s sweep -- --baseline NAME again, "
                          "or pick tests with --cell NAME --tests REGEX") from None
    except (OSError, ValueError):
        raise BisectError(f"{path}: no sweep to follow; fix: run nox -s sweep -- --baseline NAME first, or pick "
                          "tests with --cell NAME --tests REGEX") from None
    changes = [c for c in (sweep.improvements if asked.improvement else sweep.regressions) if _followable(c, asked)]
    places = sorted({(c.cell, c.mode or "") for c in changes})
    narrowed = f" in {asked.cell or 'any cell'} {asked.mode or ''}".rstrip()
    if not places:
        raise BisectError(f"{path}: the last sweep (baseline {sweep.baseline!r}) has no confirmed {what} of a "
                          f"test's outcome, tiers or EPs{narrowed}: the test set is empty; fix: "
                          + ("drop --improvement, or " if asked.improvement else "--improvement, or ")
                          + "pick tests with --cell NAME --tests REGEX")
    if len(places) > 1:
        listed = ", ".join(f"--cell {c} --mode {m}" for c, m in places[:6])
        raise BisectError(f"{path}: the last sweep's {what} are in {len(places)} cell modes; fix: pick one: {listed}")
    cell_name, mode = places[0]
    cell = _cell(matrix, cell_name)
    good: dict[str, list[Change]] = {}
    for c in changes:
        if c.test:
            good.setdefault(c.test, []).append(c)
    tests = {t: "; ".join(_said(c) for c in cs) for t, cs in good.items()}
    return Followed(cell, mode, what, tests, good)


def _said(c: Change) -> str:
    """`tier ['CUDNN_FLASH_ATTENTION'] -> ['MATH']`, `ep CUDA -> CPU`, `ep Relu: CUDA -> CPU`."""
    return f"{c.kind} {f'{c.op}: ' if c.op else ''}{c.before} -> {c.after}"


def _followable(c: Change, asked: BisectArgs) -> bool:
    """A change of a test's outcome, tiers or EPs, in the cell and mode asked for (any, when not asked)."""
    return bool(c.test and c.kind in KINDS and c.cell and c.mode and asked.cell in (None, c.cell)
                and asked.mode in (None, c.mode))


def builds(cell: Cell, resolved: Resolved, asked: BisectArgs) -> list[Build]:
    given = sum(bool(x) for x in (asked.versions, asked.between, asked.wheels))
    if given != 1:
        raise BisectError("the builds: give exactly one of --versions V1 V2 ..., --between V1 V2, or --wheels "
                          f"FILE_OR_DIR ... ({given} given)")
    try:
        if asked.wheels:
            return from_wheels(list(asked.wheels), dist_of(cell.ort))
        index = Index(dist_of(cell.ort), resolved.wheelhouse,
                      None if cell.settings.offline else (cell.ort.index_url or PYPI))
        if asked.versions:
            return from_versions(list(asked.versions), index)
        assert asked.between is not None
        return between(*asked.between, index)
    except BuildsError as exc:
        raise BisectError(str(exc)) from None


def _good_problem(f: Followed, step: StepRun, build: Build) -> str | None:
    """Why the good end is not good: untestable, a test that did not run, or not what the baseline had."""
    if step.skipped:
        return f"the good end {build.version} cannot be tested: {step.skipped}"
    for test in sorted(f.tests):
        got = step.lines[test][0]
        if got == ABSENT:
            return f"the good end {build.version} is not good: {test} did not run there"
        for change in f.good.get(test, []):
            what, has, want = _piece(change, got)
            if has != want:
                return (f"the good end {build.version} is not good: {test} gave {got!r} where the baseline has "
                        f"{what} {change.before!r}; fix: an older good end")
    return None


def _piece(change: Change, got: str) -> tuple[str, object, object]:
    """Of a step's line (bisect_step.line), the piece a change is about, as the good end has it and as the baseline
    had it: the outcome, the tiers (as a set), the EPs that served the test, or the EPs one op ran on."""
    outcome, *rest = got.split()
    if change.kind == ChangeKind.TIER:
        before = change.before
        return "tiers", sorted(t for t in rest if "=" not in t), sorted(before) if isinstance(before, list) else before
    if change.kind != ChangeKind.EP:
        return "outcome", outcome, change.before
    try:
        line = TestLine.decode(got)
    except ValueError:
        return "EPs", got, change.before  # a line no ep change can be read from is not the baseline's
    if change.op is None:
        return "EPs", eps_text(line.eps), change.before
    return f"{change.op} on", op_text(line, change.op), change.before


def _bad_problem(step: StepRun, build: Build) -> str | None:
    if step.skipped:
        return f"the bad end {build.version} cannot be tested: {step.skipped}"
    not_bad = sorted(t for t, v in step.verdicts.items() if v != BAD)
    if not_bad:
        how = "ran as at the good end" if step.verdicts[not_bad[0]] == GOOD else "did not differ in every rerun"
        more = f" and {len(not_bad) - 1} more" if len(not_bad) > 1 else ""
        return (f"the bad end {build.version} is not bad: {not_bad[0]}{more} {how}; fix: a newer bad end, or follow "
                "only the tests that changed")
    return None


def whole_suite_s(cell: Cell, mode: str, results_dir: Path) -> float | None:
    """One whole-suite run of the mode, from the cell's last stored result (the cost a sweep per build pays)."""
    try:
        return results.load(results.current_path(results_dir, cell.mode_session(mode))).duration_s
    except (OSError, ResultError):
        return None


def bisect(matrix: Matrix, asked: BisectArgs, voice: Voice) -> tuple[Bisection, Path]:
    """Follow, check the builds, run the ends, halve; the record is saved after every step, and said (`voice.say`)."""
    f = follow(matrix, asked)
    resolved = check(f.cell, matrix.workspace)
    if isinstance(resolved, MatrixError):
        raise BisectError(f"{f.cell.name}: cannot run here: {'; '.join(p.problem for p in resolved.problems)}")
    walk = builds(f.cell, resolved, asked)
    # one dir per cell, mode and what is followed: a bisect of the improvements never overwrites the regressions'
    where = matrix.workspace.results_dir / "bisect" / f"{f.cell.name}-{f.mode}-{f.source.split()[0].lstrip('-')}"
    record = Bisection(f.cell.name, f.mode, f.source, dict(f.tests), walk,
                       whole_suite_s=whole_suite_s(f.cell, f.mode, matrix.workspace.results_dir))
    done = _resumed(where, record) if asked.resume else []
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    where.chmod(0o700)
    stepper = Stepper(f.cell, f.mode, dataclasses.replace(matrix.workspace, results_dir=where), voice, asked.posargs,
                      asked.confirm, f.watch())
    tests = sorted(f.tests)
    by_index = {s.index: s for s in done}
    record.steps = list(done)
    last = len(walk) - 1
    try:
        good = by_index.get(0) or _ran(record, where, stepper.run(0, walk[0], tests, None), voice)
        record.problem = _good_problem(f, good, walk[0])
        reference = {t: good.lines[t][0] for t in tests} if record.problem is None else {}
        if record.problem is None:
            bad = by_index.get(last) or _ran(record, where, stepper.run(last, walk[last], tests, reference), voice)
            record.problem = _bad_problem(bad, walk[last])
        if record.problem is not None:
            record.save(where)
            return record, where
        spans = replayed(len(walk), tests, done)  # --resume: the steps done replay; halving goes on from there
        while (step := next_step(spans)) is not None:
            index, which = step
            ran = _ran(record, where, stepper.run(index, walk[index], which, reference), voice)
            spans.record(index, ran.verdicts)
        record.groups, record.left = groups(spans)
    except KeyboardInterrupt:
        record.interrupted = True
        record.save(where)
        raise
    record.save(where)
    return record, where


def _ran(record: Bisection, where: Path, step: StepRun, voice: Voice) -> StepRun:
    record.steps.append(step)
    record.save(where)
    counts = {v: sum(1 for x in step.verdicts.values() if x == v) for v in sorted(set(step.verdicts.values()))}
    voice.say(f"bisect: {step.build.version}: " + ", ".join(f"{v} {n}" for v, n in counts.items())
              + f" ({step.seconds:.1f} s)")
    return step


def _resumed(where: Path, record: Bisection) -> Sequence[StepRun]:
    try:
        saved = load(where)
    except RecordError as exc:
        raise BisectError(f"--resume: {exc}") from None
    if (saved.cell, saved.mode, saved.builds, sorted(saved.followed)) != (record.cell, record.mode, record.builds,
                                                                          sorted(record.followed)):
        raise BisectError(f"--resume: {where / 'bisect.json'} followed other builds or tests ({len(saved.builds)} "
                          f"builds, {len(saved.followed)} tests); fix: give the same builds and tests, or run without "
                          "--resume to start again")
    return saved.steps
