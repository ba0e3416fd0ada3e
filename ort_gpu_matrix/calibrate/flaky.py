"""Calibrate's N runs of a mode, told apart: the tests that did the same every time, and the flakes.

A test whose outcome or tiers differed between the runs of one cell's mode is flaky. It gets a
known_flaky rule listing every outcome and tier it showed, with each run as evidence (`runs`), and
never a known_failures rule: a failure seen once is not a known failure (the issue behind this was
four one-off failures written as known, then reported as 18 stale rules by the next sweep). Every
other rule calibrate writes is made from the stable tests only.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..config.expectfile import literal_regex, short
from ..config.model import FlakyRule, Observation
from ..judge.counts import TestResult
from ..judge.covers import rule_covers
from ..judge.outcomes import FAILING, first_line
from .seen import CalibrationRun


def state(t: TestResult) -> str:
    return " ".join([t.outcome, *sorted(set(t.sdpa))])


def flaky(runs: Sequence[CalibrationRun], cell_of: Callable[[Any], str]) -> dict[str, list[tuple[CalibrationRun, TestResult]]]:
    """Node id -> each run that ran it, for the tests whose state differed between runs of one cell."""
    per: dict[tuple[str, str], list[tuple[CalibrationRun, TestResult]]] = {}
    for r in runs:
        for t in r.tests:
            per.setdefault((cell_of(r), t.nodeid), []).append((r, t))
    out: dict[str, list[tuple[CalibrationRun, TestResult]]] = {}
    for (_, nodeid), seen in sorted(per.items()):
        if len({state(t) for _, t in seen}) > 1:
            out.setdefault(nodeid, []).extend(seen)
    return out


def _reason(seen: Sequence[tuple[CalibrationRun, TestResult]]) -> str:
    failing = next((t for _, t in seen if t.outcome in FAILING and t.message.strip()), None)
    states = ", ".join(dict.fromkeys(state(t) for _, t in seen))
    head = f"differed between runs ({states})"
    return short(f"{head}: {first_line(failing.message)}" if failing else head)


def _observed(seen: Sequence[tuple[CalibrationRun, TestResult]]) -> tuple[Observation, ...]:
    return tuple(sorted({r.observation for r, _ in seen}, key=lambda o: (o.cell, o.ort, o.date)))


def _runs(seen: Sequence[tuple[CalibrationRun, TestResult]], cell_of: Callable[[Any], str]) -> tuple[str, ...]:
    return tuple(short(f"{cell_of(r)} run {r.round + 1}: {state(t)}", 120) for r, t in seen)


def rules(old: Sequence[FlakyRule], seen_flaky: dict[str, list[tuple[CalibrationRun, TestResult]]], runs: Sequence[CalibrationRun],
          cell_of: Callable[[Any], str], stale: Callable[[FlakyRule], bool]) -> list[FlakyRule]:
    """The old file's known_flaky rules whose tests ran (their sets grown by what the runs where a test of theirs
    flaked showed; a test stable outside its rule's set is left for the verdict to name), minus the
    stale ones (`stale(rule)` decides and says so), then one rule for each flaky test no kept rule matches."""
    ran = [(r, t) for r in runs for t in r.tests]
    out = []
    for rule in old:
        hits = [(r, t) for r, t in ran if rule_covers(rule, t.nodeid)]
        if not hits and stale(rule):
            continue
        grown = [(r, t) for r, t in hits if t.nodeid in seen_flaky]  # a stable run outside the set is no flake
        outcomes = tuple(sorted({*rule.outcomes, *(t.outcome for _, t in grown)}))
        tiers = tuple(sorted({*rule.tiers, *(x for _, t in grown for x in t.sdpa)}))
        evidence = _runs(hits, cell_of) if any(t.nodeid in seen_flaky for _, t in hits) else rule.runs
        out.append(FlakyRule(rule.test, outcomes, tiers, rule.reason, evidence, _observed(hits) or rule.observed,
                             rule.subtests))
    for nodeid, seen in seen_flaky.items():
        if any(rule_covers(r, nodeid) for r in out):
            continue
        out.append(FlakyRule(literal_regex(nodeid), tuple(sorted({t.outcome for _, t in seen})),
                             tuple(sorted({x for _, t in seen for x in t.sdpa})), _reason(seen),
                             _runs(seen, cell_of), _observed(seen)))
    return out
