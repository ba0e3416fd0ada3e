"""Calibrate: today's outcome of a suite's cells, written as the expectations that accept it, for review.

A real test tree is red on its first run for reasons that are no regression: tests that dispatch
cuDNN but check values only (toothless), tests that fail against this wheel, skips. Writing one
rule per test by hand does not scale, so calibrate runs the cells (or reads their results) and
writes an expect file that a person reviews and commits. From then on the suite's cells pass as
long as nothing changes, and every change shows: a new failure fails the verdict, and a rule
that no longer matches anything is stale (judge/stale.py) and is dropped at the next calibration.

What it never accepts: a failure whose first line is, or holds, the canary's message. In normal
and require_cudnn that is a test that asked for cuDNN and got another tier, the very change the
matrix exists to catch; in teeth, a failure that holds the message but is not exactly it is a
canary that half-bit. Each is refused by name on stdout.

Merging: one expect file serves every cell of its suite, so its rules are the union over the
calibrated cells, each rule naming the cells it was seen in (`observed`). A union is the only
merge that lets every cell pass; `observed` keeps it precise, because a calibrated rule counts
as stale only in the cells it was seen in. Re-calibrating keeps each rule of the old file that
still matches (its reason too, which a person may have edited), adds rules for what nothing
matches, and drops the rules that matched nothing, unless a cell they were seen in (or, for
rules without observations, any cell of the suite) was not calibrated this time.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.expectfile import Count, ModeTable, Skip, literal_regex
from ..config.loader import suite_expect
from ..config.model import CudaOpsRule, CudaRunsRule, DispatchExpect, Observation, Rule, Suite, TierRule, expect_path
from ..config.overrides import Workspace
from ..judge.covers import rule_covers
from ..judge.pollution import lines as pollution_lines
from ..judge.verdicts import expectation_reasons, outcome_judge
from ..util.errors import MatrixError
from ..util.escape import term
from ..util.fs import write_atomic
from ..util.voice import Voice
from . import flaky
from .eps import cuda_rules, fallbacks_seen
from .gather import CalibrateError
from .ops import cpu_nodes_seen, ops_rules
from .seen import (
    CalibrationRun,
    Item,
    bitten_in,
    canaries,
    failures,
    folded,
    observed_of,
    prior_census,
    reason_of,
    search,
    skip_note,
    toothless,
    uncovered,
)
from .tiers import ObservedRun, tier_rules

# written here (never allowed_fallbacks nor allowed_cpu_ops: accepting a fallback or a CPU node is a person's decision)
CALIBRATED = {"min_passed", "min_failures", "allowed_skips", "known_failures", "known_toothless",
              "known_flaky", "tiers", "cuda_runs", "cuda_ops"}


@dataclass
class Outcome:
    written: dict[str, Path] = field(default_factory=dict)  # suite id -> the file written
    lines: list[str] = field(default_factory=list)  # what calibrate says on stdout, in order


@dataclass
class SuiteCalibration:
    """One suite: its calibrated runs, the keys its matrix tables set, and what its old expect file said."""

    suite: Suite
    runs: list[CalibrationRun]
    inline: dict[str, set[str]]  # mode -> keys [suite.<id>.expect.<mode>] sets itself: never written
    old_keys: dict[str, set[str]]  # mode -> keys the suite's expect file set
    all_cells: dict[str, set[str]]  # mode -> every cell of the suite that runs it
    keep_stale: bool
    voice: Voice  # its `say`: calibrate's own lines, what it reports on stdout

    def _cells(self, mode: str) -> set[str]:
        return {s.cell.name for s in self.runs if s.mode == mode}

    def _complete(self, mode: str) -> bool:
        return self.all_cells.get(mode, set()) <= self._cells(mode)

    def _old(self, mode: str, key: str) -> Any:
        """The old expect file's value of a key, or None when it did not set it."""
        return getattr(self.suite.expect[mode], key) if key in self.old_keys.get(mode, set()) else None

    def _stale(self, mode: str, key: str, what: str, observed: tuple[Observation, ...]) -> bool:
        """Whether a rule that matched nothing today goes (said on stdout either way)."""
        cells = ", ".join(sorted(self._cells(mode)))
        if self.keep_stale or (not observed and not self._complete(mode)):
            why = "--keep-stale" if self.keep_stale else "some cells of the suite were not calibrated"
            self.voice.say(f"kept stale rule: {mode} {key} {what}: it matched nothing in {cells} ({why})")
            return False
        self.voice.say(f"dropped stale rule: {mode} {key} {what}: it matched nothing in {cells}")
        return True

    def rules(self, mode: str, key: str, items: list[Item]) -> list[Rule]:
        """The old file's rules that still match, observed afresh; new rules for the rest; the stale ones dropped."""
        calibrated = self._cells(mode)
        out: list[Rule] = []
        for rule in self._old(mode, key) or ():
            hits = [i for i in items if rule_covers(rule, i.text)]
            elsewhere = tuple(o for o in rule.observed if o.cell not in calibrated)
            if not hits and not elsewhere and self._stale(mode, key, f"{rule.test!r} ({rule.reason})", rule.observed):
                continue
            out.append(dataclasses.replace(rule, observed=tuple(sorted(
                elsewhere + observed_of(hits), key=lambda o: (o.cell, o.ort, o.date))) if hits or elsewhere
                else rule.observed))
        one_by_one, per_test = folded(uncovered(lambda text: any(rule_covers(r, text) for r in out), items),
                                      [s for s in self.runs if s.mode == mode])
        out += [Rule(literal_regex(text), reason_of(found), observed_of(found))
                for text, found in one_by_one.items()]
        out += [Rule(literal_regex(test), reason_of(found), observed_of(found), subtests=True)
                for test, found in sorted(per_test.items())]
        return out

    def skips(self, mode: str) -> list[Skip]:
        items = [Item(t.message, "", s) for s in self.runs if s.mode == mode for t in s.tests if t.outcome == "skipped"]
        out: list[Skip] = []
        for pattern in self._old(mode, "allowed_skips") or ():
            hits = [i for i in items if search(pattern, i.text)]
            if hits or not self._stale(mode, "allowed_skips", repr(pattern), ()):
                out.append(Skip(pattern, skip_note(hits) if hits else "matched nothing in the cells calibrated"))
        out += [Skip(literal_regex(text), skip_note(found))
                for text, found in uncovered(lambda text: any(search(s.pattern, text) for s in out), items).items()]
        return out

    def minimum(self, mode: str, key: str, values: dict[str, int]) -> Count | None:
        """The lowest count seen; the old file's, when lower, while some cell of the suite went uncalibrated."""
        if not values:
            return None
        value = min(values.values())
        old = self._old(mode, key)
        if old is not None and not self._complete(mode):
            value = min(value, old)
        return Count(key, value, "seen: " + ", ".join(f"{cell} {n}" for cell, n in sorted(values.items())))

    def _inline(self, mode: str, key: str, items: Sequence[Item] = ()) -> bool:
        """True when the matrix file sets `key` itself: then calibrate leaves it alone, and says what it misses."""
        if key not in self.inline.get(mode, set()):
            return False
        rules = getattr(self.suite.expect[mode], key, ())
        if key.startswith("known_"):
            left = list(uncovered(lambda text: any(rule_covers(r, text) for r in rules), items))
        else:
            patterns = list(rules) if key == "allowed_skips" else []
            left = list(uncovered(lambda text: any(search(p, text) for p in patterns), items))
        tail = f"; today it does not accept: {'; '.join(left)}" if left else ""
        self.voice.say(f"not written: {mode} {key}: [suite.{self.suite.id}.expect.{mode}] in the matrix file sets it "
                       f"(a key is set in one file only){tail}")
        return True

    def _function_rules(self, t: ModeTable, runs: list[ObservedRun]) -> None:
        """The rules written per test function, from its passing cases: tiers, cuda_runs, cuda_ops."""
        mode = t.mode

        def stale(key: str) -> Callable[[TierRule | CudaRunsRule | CudaOpsRule], bool]:
            return lambda r: self._stale(mode, key, f"{r.test!r} ({r.reason})", r.observed)

        if not self._inline(mode, "tiers"):
            t.tiers = tier_rules(self._old(mode, "tiers") or (), runs, stale("tiers"), self.voice)
        if not self._inline(mode, "cuda_runs"):
            t.cuda_runs = cuda_rules(self._old(mode, "cuda_runs") or (), runs, stale("cuda_runs"), self.voice)
        if not self._inline(mode, "cuda_ops"):
            t.cuda_ops = ops_rules(self._old(mode, "cuda_ops") or (), runs, self.suite.expect[mode].nodes.shape_ops,
                                   stale("cuda_ops"), self.voice)

    def table(self, mode: str) -> ModeTable:
        seen_flaky = flaky.flaky([s for s in self.runs if s.mode == mode], lambda s: s.cell.name)
        runs = [dataclasses.replace(s, tests=[x for x in s.tests if x.nodeid not in seen_flaky])
                for s in self.runs if s.mode == mode]  # every other rule is made from the stable tests
        observed = [ObservedRun(s.observation, s.tests) for s in runs]
        t = ModeTable(mode)
        for key in sorted(self.old_keys.get(mode, set()) - CALIBRATED):  # require_kernel, message, ...: a person's
            kept = getattr(self.suite.expect[mode], key)
            if isinstance(kept, tuple) and kept and not isinstance(kept[0], str):  # allowed_fallbacks, allowed_cpu_ops
                t.kept_rules[key] = kept
            else:
                t.kept[key] = kept
        if mode == "teeth":
            bitten = _least({(s.cell.name, len(bitten_in(s))) for s in runs})
            for cell in sorted(c for c, n in bitten.items() if n == 0):
                self.voice.say(f"not accepted: teeth of {cell}: nothing failed with the canary's message (the canary has "
                               "no teeth there); no expectation can accept that")
            found = self.minimum(mode, "min_failures", {c: n for c, n in bitten.items() if n})
            if found is not None and not self._inline(mode, "min_failures"):
                t.counts.append(found)
            teeth_items = [i for s in runs for i in toothless(s, self.runs, self.voice) if i.text not in seen_flaky]
            if not self._inline(mode, "known_toothless", teeth_items):
                t.rules["known_toothless"] = self.rules(mode, "known_toothless", teeth_items)
        else:
            passed = _least({(s.cell.name, s.result.counts.passed) for s in runs})
            for cell in sorted(c for c, n in passed.items() if n == 0):
                self.voice.say(f"not accepted: {mode} of {cell}: nothing passed; no expectation can accept that")
            found = self.minimum(mode, "min_passed", passed)
            if found is not None and not self._inline(mode, "min_passed"):
                t.counts.append(found)
            skipped = [Item(x.message, "", s) for s in runs for x in s.tests if x.outcome == "skipped"]
            if not self._inline(mode, "allowed_skips", skipped):
                t.skips = self.skips(mode) or None
            self._function_rules(t, observed)
        for line in cpu_nodes_seen(observed, self.suite.expect[mode]):
            self.voice.say(f"not accepted: {mode} {line}: add an allowed_cpu_ops rule if that is intended (a CPU node "
                           "is never written down)")
        for line in fallbacks_seen(observed):
            self.voice.say(f"not accepted: {mode} {line} (a fallback is never written down: add an allowed_fallbacks "
                           "rule by hand if the CPU may serve it)")
        failing = [i for s in runs for i in failures(s, canaries(self.suite), self.voice)]
        if not self._inline(mode, "known_failures", failing):
            t.rules["known_failures"] = self.rules(mode, "known_failures", failing)
        t.rules = {k: v for k, v in t.rules.items() if v}
        if not self._inline(mode, "known_flaky", [Item(n, "", seen[0][0]) for n, seen in seen_flaky.items()]):
            t.flaky = flaky.rules(
                self._old(mode, "known_flaky") or (), seen_flaky, [s for s in self.runs if s.mode == mode],
                lambda s: s.cell.name,
                lambda r: self._stale(mode, "known_flaky", f"{r.test!r} ({r.reason})", r.observed))
        for name in seen_flaky:
            self.voice.say(f"flaky: {mode} {name}: " + ", ".join(dict.fromkeys(flaky.state(x)
                                                                               for _, x in seen_flaky[name])))
        return t


def _least(seen: set[tuple[str, int]]) -> dict[str, int]:
    """Per cell, the lowest count of its runs."""
    out: dict[str, int] = {}
    for cell, n in seen:
        out[cell] = min(n, out.get(cell, n))
    return out


def targets(workspace: Workspace, suites: dict[str, Suite], write: Path | None, force: bool) -> dict[str, Path]:
    """Where each suite's file goes: --write, else its expect_file, else expect/<suite>.toml beside the matrix.

    Calibrate replaces the file it merged (the suite's own expect_file; git shows the change). Any
    other file that is there already is refused without --force: it would be replaced unread.
    """
    if write is not None and len(suites) > 1:
        raise CalibrateError(f"--write names one file, but the cells chosen run {len(suites)} suites "
                             f"({', '.join(sorted(suites))}): choose one suite's cells, or leave --write out")
    out = {}
    for sid, suite in suites.items():
        own = expect_path(workspace.base, suite)
        path = write.resolve() if write is not None else own or (workspace.base / "expect" / f"{sid}.toml")
        if path.is_dir():
            raise CalibrateError(f"{path} is a directory: --write takes the .toml file to write")
        if path.exists() and path != own and not force:
            where = f"its expect_file is {own}" if own else "it has no expect_file"
            raise CalibrateError(f"{path} exists and is not the expect file of [suite.{sid}] ({where}): calibrate "
                                 "would replace it without reading it; pass --force to replace it, or --write "
                                 "another path")
        out[sid] = path
    return out


def relative(workspace: Workspace, path: Path) -> str:
    rel = os.path.relpath(path, workspace.base)
    return path.as_posix() if rel.startswith("..") else Path(rel).as_posix()


def header(suite: Suite, runs: Sequence[CalibrationRun], rel: str) -> list[str]:
    seen = sorted({(s.cell.name, s.observation.ort, s.observation.date) for s in runs})
    return [f"Expectations of [suite.{suite.id}] that accept the outcome below, written by `nox -s calibrate`.",
            "Review every rule before committing: each one accepts a failure, a toothless test or a skip.",
            "Seen in: " + "; ".join(f"{c} (onnxruntime {o}, {d})" for c, o, d in seen),
            f'Loaded with expect_file = "{rel}" on [suite.{suite.id}]; a key set here may not be set there too.']


def still_failing(suite_id: str, runs: Sequence[CalibrationRun], expect: dict[str, DispatchExpect],
                  voice: Voice) -> None:
    """Re-judge each run under the new expectations: what they cannot accept is said, never hidden."""
    for s in runs:
        judge = outcome_judge(s.mode)
        prior = prior_census(s, runs) if s.mode == "teeth" else None
        before = expectation_reasons(judge, s.cell.suite.expect[s.mode], s.tests, s.result.counts, prior)
        after = expectation_reasons(judge, expect[s.mode], s.tests, s.result.counts, prior)
        after += [r for r in s.result.reasons if r not in before]  # the audit, the cross-checks: not calibrated
        for reason in after:
            voice.say(f"still failing after calibration: {s.result.session}: {reason}")


def write_file(workspace: Workspace, suite: Suite, path: Path, text: str) -> dict[str, DispatchExpect]:
    """The file checked by the loader (beside its target, under a temp name), then renamed into place."""
    loaded: dict[str, DispatchExpect] = {}

    def check(tmp: Path) -> None:
        try:
            loaded.update({m: dataclasses.replace(e, nodes=suite.node_policy)  # as the loader hands them on
                           for m, e in suite_expect(workspace.matrix_file, suite.id, tmp).items()})
        except MatrixError as exc:
            raise CalibrateError(f"the file calibrate wrote does not load, so nothing was written:\n{exc}") from None

    write_atomic(path, text, check)
    return loaded


def pollution_said(seen: Sequence[CalibrationRun], voice: Voice) -> None:
    """Each polluter of the runs calibrated from: with isolation report or off, the tiers written may be
    the order's, not the release's; with restore they are not, and the polluter is still worth fixing."""
    for s in seen:
        for line in pollution_lines(s.result.pollution):
            voice.say(f"pollution: {s.result.session} (isolation {s.result.isolation}): {term(line)}")


def summary(t: ModeTable) -> str:
    parts = [f"{c.key} {c.value}" for c in t.counts]
    if t.skips:
        parts.append(f"{len(t.skips)} allowed skip(s)")
    parts += [f"{len(rules)} {key}" for key, rules in t.rules.items()]
    parts += [f"{len(t.tiers)} tiers"] if t.tiers else []
    parts += [f"{len(t.cuda_runs)} cuda_runs"] if t.cuda_runs else []
    parts += [f"{len(t.cuda_ops)} cuda_ops"] if t.cuda_ops else []
    if t.flaky:
        parts.append(f"{len(t.flaky)} known_flaky")
    return f"{t.mode}: {', '.join(parts) or 'nothing'}"
