"""One bisect step: one ORT build, the followed tests only, each judged against the good end, changes confirmed.

The build gets a cell of its own (the pairing with that [ort.<id>]), so its venv is built or reused and
fingerprinted as any cell's is, and its results are stored under the bisect's own results dir, never as the
sweep's current results. A test is judged as the sweep judges a change: by its outcome and its tiers, and a test
followed for an `ep` change by the EPs that served it too and, for a per-op change, the EPs the op ran on (so a
build where the op is back on the CUDA EP is good, one where it runs on the CPU bad). One
that differs from the good end is rerun `confirm` times and is bad only if every rerun differs too; one
whose reruns disagree is untestable at that build (as the sweep lists a change that did not reproduce
apart). A build whose cell cannot be resolved, whose venv will not build, or whose run broke (pytest
stopped, crashed, or collected nothing) is a skip for every test: never good, never bad.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..config.overrides import Workspace
from ..envs.venvs import BuildError, ensure_venv
from ..execute.mode_run import run_mode
from ..execute.request import Launch, ModeRun
from ..host.host import check
from ..judge.eps import short_eps
from ..judge.outcomes import test_of
from ..plan.bisection import BAD, GOOD, SKIP, StepRun
from ..plan.builds import Build
from ..plan.cells import Cell
from ..store.baseline import TestLine, ops_by_ep
from ..store.results import Result
from ..util.errors import MatrixError
from ..util.voice import Voice
from .attempt import keep, locked, verdict_of
from .cell import with_libset

ABSENT = "absent"
RAN = (0, 1)  # pytest's exit codes of a run that ran its tests: all passed, some failed


def line(result: Result, test: str, ops: Sequence[str] | None = None) -> str:
    """A test as a change is judged: its outcome and the tiers it dispatched (`passed CUDNN_FLASH_ATTENTION`). `ops`:
    the test is followed for an ep change, and its line says what served it (`ep=CUDA`) and where each of these ops
    ran, as a baseline line writes them (`ep=CUDA ops.CPU=Relu`); () for a change of the test as a whole."""
    outcome = result.outcomes.get(test)
    if outcome is None:
        return ABSENT
    tiers = sorted(set(result.dispatch.tests.get(test, [])))
    if ops is None:
        return " ".join([outcome, *tiers])
    entry = result.ep.tests.get(test)
    if entry is None:
        return TestLine(outcome, tuple(tiers)).encode()  # it asked for no CUDA session: no ep= token
    ran = tuple((ep, kept) for ep, names in ops_by_ep(entry.nodes) if (kept := tuple(n for n in names if n in ops)))
    return TestLine(outcome, tuple(tiers), eps=short_eps(entry.runs), ops=ran).encode()


@dataclass(frozen=True)
class Stepper:
    """How every step runs: the pairing, its mode, where results go, how it speaks (a step that cannot test its
    build says so on `voice.say`, as the bisect's own steps are said), pytest's extra arguments."""

    cell: Cell
    mode: str
    workspace: Workspace  # results_dir: the bisect's own
    voice: Voice
    posargs: tuple[str, ...] = ()
    confirm: int = 2
    watch: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # test -> the ops of its ep change (line)

    def cell_of(self, build: Build) -> Cell:
        return dataclasses.replace(self.cell, name=f"{self.cell.name}@{build.version}", ort=build.ort(self.cell.ort))

    def run(self, index: int, build: Build, tests: Sequence[str], reference: Mapping[str, str] | None) -> StepRun:
        """Run `tests` on `build`; without a reference (the good end itself) every test that ran is good."""
        started = time.monotonic()
        cell = self.cell_of(build)
        resolved = check(cell, self.workspace)
        if isinstance(resolved, MatrixError):
            why = "; ".join(p.problem for p in resolved.problems)
            return self._skip(index, build, tests, f"cannot run here: {why}", started)
        try:
            resolved = with_libset(cell, resolved, self.workspace, self.voice)
            with ensure_venv(cell, resolved, self.workspace.venvs_dir, self.voice) as venv:
                run = ModeRun(cell, self.mode, resolved, venv, self.workspace)
                first = self._once(run, tests)
                if first.pytest_exit_code not in RAN or first.stopped:
                    return self._skip(index, build, tests, _broken(first), started, [first.run_id])
                lines = {t: [line(first, t, self.watch.get(t))] for t in tests}
                if reference is None:
                    return StepRun(index, build, tuple(tests), {t: GOOD for t in tests}, lines,
                                   seconds=time.monotonic() - started, run_ids=[first.run_id])
                ids = [first.run_id]
                changed = [t for t in tests if lines[t][0] != reference[t]]
                for _ in range(self.confirm if changed else 0):
                    again = self._once(run, changed, rerun_of=first.run_id)
                    ids.append(again.run_id)
                    for t in changed:
                        lines[t].append(line(again, t, self.watch.get(t)) if again.pytest_exit_code in RAN
                                        else f"broken: {_broken(again)}")
        except BuildError as exc:
            return self._skip(index, build, tests, f"its venv would not build: {exc}", started)
        verdicts = {t: GOOD if lines[t][0] == reference[t] else
                    BAD if all(x != reference[t] and not x.startswith("broken") for x in lines[t]) else SKIP
                    for t in tests}
        return StepRun(index, build, tuple(tests), verdicts, lines, seconds=time.monotonic() - started, run_ids=ids)

    def _once(self, run: ModeRun, tests: Sequence[str], rerun_of: str | None = None) -> Result:
        with locked(run, self.voice) as scratch:
            selected = sorted({test_of(t) for t in tests})  # a subtest runs in its test, and is judged by its id
            outcome = run_mode(run, scratch.workdir, list(self.posargs), self.voice, Launch(keep=selected))
            stored = keep(run, outcome, verdict_of(run, outcome), None, rerun_of)
        if outcome.interrupt is not None:
            raise outcome.interrupt  # stored first, as a sweep's run is; the bisect keeps its steps and stops
        return stored

    def _skip(self, index: int, build: Build, tests: Sequence[str], why: str, started: float,
              run_ids: list[str] | None = None) -> StepRun:
        self.voice.say(f"bisect: {build.version} is untestable: {why}")
        return StepRun(index, build, tuple(tests), {t: SKIP for t in tests}, skipped=why,
                       seconds=time.monotonic() - started, run_ids=run_ids or [])


def _broken(result: Result) -> str:
    if result.stopped:
        return f"its run was stopped ({result.stopped})"
    return f"pytest exited {result.pytest_exit_code}" + (" (nothing collected)" if result.pytest_exit_code == 5 else "")
