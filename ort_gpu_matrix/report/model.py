"""The sweep report's data: a grid of cells x modes, what changed, the libs comparison, and the gate.

Built from Results alone (a sweep just run, or result files gathered from CI artifacts), plus a
baseline to compare against; rendered by render/ as a terminal grid, Markdown and HTML.

The gate says what makes the whole red. `all` (the default) is strict: every mode passes, nothing
regressed, every chosen baseline cell ran. `regressions` is the one a release CI can hold: a mode
that fails exactly as it failed in the baseline is listed as already failing, and only what got
worse, what is new and failing, and what did not run fail it.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare.changes import Comparison, LibsDiff, Scope, add_stale_rules, compare, libs_comparison
from ..compare.unreproduced import Unconfirmed, filter_comparison, filter_libs, listed
from ..judge.verdicts import Status
from ..store.baseline import Baseline
from ..store.results import Result, ResultError, load
from ..util.errors import UserError

GATES = ("all", "regressions")


@dataclass
class Report:
    results: list[Result]
    comparison: Comparison | None  # None: no baseline was given
    libs: list[LibsDiff]
    baseline_name: str | None = None
    provenance_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # cell -> (before, after)
    skipped: dict[str, str] = field(default_factory=dict)  # cell -> why this host cannot run it (listed only)
    gate: str = "all"
    allow_missing: bool = False
    errors: dict[str, str] = field(default_factory=dict)  # cell -> what stopped it (a build, a store, a child)
    interrupted: str | None = None
    baseline_verdicts: dict[tuple[str, str], Status] = field(default_factory=dict)  # (cell, mode) -> pass/fail
    unconfirmed: list[Unconfirmed] = field(default_factory=list)  # changes a confirmation rerun did not reproduce
    confirm: int | None = None  # --confirm N of the sweep (None: a report from files, or not asked)

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results if not r.passed]

    def _failed_before(self, r: Result) -> bool:
        return self.baseline_verdicts.get((r.cell.name, r.mode)) == Status.FAIL

    @property
    def already_failing(self) -> list[Result]:
        """Failing modes whose baseline record failed too: under --gate regressions, listed but not failing."""
        return [r for r in self.failed if self._failed_before(r)]

    @property
    def new_failures(self) -> list[Result]:
        return [r for r in self.failed if not self._failed_before(r)]

    def why_failed(self) -> list[str]:
        """Each thing that makes this report red under its gate, one line each; empty when it is green."""
        cmp = self.comparison
        failing = self.failed if self.gate == "all" else self.new_failures
        out = []
        if not self.results:
            out.append("nothing ran")
        if failing:
            out.append(f"{len(failing)} failing mode(s)" + (" not already failing in the baseline"
                                                            if self.gate == "regressions" else ""))
        if cmp and cmp.regressions:
            out.append(f"{len(cmp.regressions)} regression(s)")
        if cmp and cmp.missing and not self.allow_missing:
            out.append(f"{len(cmp.missing)} baseline mode(s) did not run (--allow-missing accepts that)")
        if self.errors:
            out.append(f"{len(self.errors)} cell(s) could not run")
        if self.interrupted:
            out.append(f"interrupted ({self.interrupted})")
        return out

    @property
    def ok(self) -> bool:
        return not self.why_failed()

    def cells(self) -> dict[str, dict[str, Result]]:
        grid: dict[str, dict[str, Result]] = {}
        for r in sorted(self.results, key=lambda r: r.cell.name):
            grid.setdefault(r.cell.name, {})[r.mode] = r
        return grid


@dataclass(frozen=True)
class Sweep:
    """What a report is told of its sweep beyond the results: the scope and gate it was asked for, the cells
    it did not or could not run, how it stopped and its --confirm (a report built from files has the defaults)."""

    skipped: Mapping[str, str] = field(default_factory=dict)  # cell -> why this host cannot run it
    scope: Scope | None = None  # what was chosen; None: a baseline mode without a result counts as removed
    gate: str = "all"
    allow_missing: bool = False
    errors: Mapping[str, str] = field(default_factory=dict)  # cell -> what stopped it
    interrupted: str | None = None
    confirm: int | None = None


def build(results: list[Result], baseline: Baseline | None = None, baseline_name: str | None = None,
          sweep: Sweep | None = None) -> Report:
    asked = sweep or Sweep()
    run = Baseline.of(results)
    ids = {r.cell.name: {"python": r.cell.python, "ort": r.cell.ort, "torch": r.cell.torch, "libs": r.cell.libs,
                         "suite": r.cell.suite} for r in results}
    flaky = {(r.cell.name, r.mode): r.known_flaky for r in results if r.known_flaky}
    comparison = compare(baseline, run, asked.scope, flaky) if baseline is not None else None
    if comparison is not None:
        filter_comparison(comparison, results, baseline)
    verdicts = {(c, m): rec.verdict for c, modes in baseline.cells.items() for m, rec in modes.items()} if baseline else {}
    if comparison is not None:
        add_stale_rules(comparison, results)
    changes: dict[str, tuple[Any, Any]] = {}
    if baseline is not None:
        for cell, modes in run.cells.items():
            before = next(iter(baseline.cells.get(cell, {}).values()), None)
            after = next(iter(modes.values()))
            if before is not None and before.provenance.get("ort") != after.provenance.get("ort"):
                changes[cell] = (before.provenance.get("ort"), after.provenance.get("ort"))
    return Report(results, comparison, filter_libs(libs_comparison(run, ids), results), baseline_name, changes,
                  dict(asked.skipped), asked.gate, asked.allow_missing, dict(asked.errors), asked.interrupted, verdicts,
                  listed(results), asked.confirm)


class InputError(UserError):
    """A results path that cannot be used; the message names it."""


def gather(paths: list[Path], latest: bool = False) -> list[Result]:
    """Current results (`<session>.json`) from files and dirs, from any number of hosts and runs.

    Bundles under runs/ are history and are not read. Two results for one session from different
    runs are refused, naming both, unless `latest` keeps the newer (by start time, then run id).
    """
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.rglob("*.json") if "runs" not in f.relative_to(p).parts
                            and not f.name.startswith((".", "sweep")) and f.parent.name != ".locks")
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"{p}: no such file or directory")
    out: list[tuple[Result, Path]] = []
    for f in files:
        try:
            head = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{f}: is not JSON ({exc})") from None
        if not (isinstance(head, dict) and "schema_version" in head and "session" in head):
            continue  # another JSON file in the dir (a probe report, a bench file)
        try:
            out.append((load(f), f))
        except ResultError as exc:
            raise InputError(str(exc)) from None
    return _one_per_session(out, latest)


def _one_per_session(found: list[tuple[Result, Path]], latest: bool) -> list[Result]:
    chosen: dict[str, tuple[Result, Path]] = {}
    for r, f in found:
        seen = chosen.get(r.session)
        if seen is None or seen[0].run_id == r.run_id:
            chosen.setdefault(r.session, (r, f))
            continue
        if not latest:
            raise InputError(f"{r.session}: two results from different runs: {seen[1]} (run {seen[0].run_id}, host "
                             f"{seen[0].host}) and {f} (run {r.run_id}, host {r.host}); pass --latest to keep the newer")
        if (r.started, r.run_id) > (seen[0].started, seen[0].run_id):
            chosen[r.session] = (r, f)
    return [r for r, _ in chosen.values()]
