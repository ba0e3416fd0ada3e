"""What a sweep is asked for, what it plans before the first cell runs, and what it ends with.

Kept apart from the sweep's steps so that the files it writes (outputs.py) and the sessions that
start it read the same typed values, and none of them imports the runner.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..compare.changes import Scope
from ..drive.confirm import DEFAULT as CONFIRM_DEFAULT
from ..host.host import Resolved
from ..plan.cells import Cell
from ..report.model import Report
from ..store.baseline import Baseline
from ..util.errors import UserError

SWEEP_VERSION = 3  # 3: confirm, unconfirmed, confirmation (the reruns), libs_unconfirmed


class SweepError(UserError):
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
    confirm: int = CONFIRM_DEFAULT  # --confirm N: reruns of a mode's regressed tests before they count (drive/confirm.py)
    slots_per_gpu: int | None = None  # --slots-per-gpu N (None: auto): also how many of a cell's reruns share the GPU
    junit_xml: Path | None = None  # --junit-xml PATH: the sweep as one JUnit file (report/render/junitxml.py)


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
