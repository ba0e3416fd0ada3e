"""What confirming a mode's regressions found: typed, stored in the mode's Result (`confirmation`).

A regression counts only once it reproduces (drive/confirm.py). This record keeps the first run's own
verdict, reasons and counts (the run's bundle keeps its probe report, every outcome), each rerun
with its bundle, and for each test under confirmation what every run gave and which of its
changes did not reproduce. Reports and `nox -s report` read it from the result alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..judge.counts import Counts
from ..judge.verdicts import Status


@dataclass(frozen=True)
class Rerun:
    """One confirmation rerun of a mode: a fresh test process, the tests under confirmation only."""

    run_id: str
    bundle: str | None
    selected: int  # node ids it was given
    duration_s: float
    problems: list[str] = field(default_factory=list)  # cross-check or audit reasons: it cleared nothing


@dataclass(frozen=True)
class TestRuns:
    """One test under confirmation: what it is checked for, what each run gave, what did not reproduce."""

    test: str
    checks: list[str]  # what a rerun checks the test for (compare/suspects.py): test, tier, ep, fallback, unexpected, libs
    runs: list[str]  # the first run, then each rerun that ran it: "failed", "passed CUDNN_FLASH_ATTENTION"
    unconfirmed: list[str] = field(default_factory=list)  # the checks some rerun did not reproduce
    # the baseline's line the test/tier checks were judged against ("absent": not in it; None: no baseline, or a
    # record from before this was kept); a report against another baseline filters nothing by this record
    against: str | None = None

    @property
    def confirmed(self) -> list[str]:
        return [c for c in self.checks if c not in self.unconfirmed]


@dataclass(frozen=True)
class Confirmation:
    asked: int  # --confirm N
    first_verdict: Status
    first_reasons: list[str]
    first_counts: Counts
    reruns: list[Rerun] = field(default_factory=list)
    tests: list[TestRuns] = field(default_factory=list)

    def test(self, nodeid: str) -> TestRuns | None:
        return next((t for t in self.tests if t.test == nodeid), None)

    @property
    def amended(self) -> bool:
        """Some change did not reproduce: the verdict and counts follow the reruns, not the first run."""
        return any(t.unconfirmed for t in self.tests)
