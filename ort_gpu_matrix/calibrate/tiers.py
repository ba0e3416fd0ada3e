"""The tier rules calibrate writes: one per test function, from what its cases dispatched in every run.

A function's parameterized cases share one rule (judge/tiers.py, function_of), so a file of 3,000 tests gets
a rule per function a reviewer can read, and the reason says what the cases ran: a memory-efficient
test that ran cuDNN flash reads as such in the expect file, to be kept with a comment or reported.

Over several runs (of several cells, or of one cell repeated) a rule lists the union of what its cases
dispatched in every run: the only rule that every one of those runs passes. The reason says when runs
of one cell differed, so a reviewer sees that a function's tier is not stable.

Old rules are never widened: a rule the runs broke is kept as written and calibrate says it still
fails, because a changed tier against a reviewed rule is the change the rule is there to catch; edit
or remove the rule when the change is intended. A function whose passed cases include one that
dispatched nothing gets no rule (any rule would fail that case), and calibrate says so.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ort_matrix_probe.schema import parent_of

from ..config.model import Observation, TierRule
from ..judge.counts import TestResult
from ..judge.covers import rule_covers
from ..judge.outcomes import JUDGED
from ..judge.subtests import as_judged
from ..judge.tiers import breaks_of, function_of, function_regex, rule_text
from ..util.voice import Voice


@dataclass(frozen=True)
class ObservedRun:
    """One mode run as the rule writers (tier, cuda_runs and cuda_ops rules) read it: where it ran, and its tests."""

    observation: Observation
    tests: Sequence[TestResult]


V = TypeVar("V")


def passed_by_function(runs: Sequence[tuple[Observation, Sequence[TestResult]]], covered: Sequence[str],
                       value: Callable[[TestResult], V]) -> tuple[dict[str, dict[str, dict[str, list[V]]]], dict[str, set[Observation]]]:
    """Each passed case no rule in `covered` matches, as function -> cell -> node id -> `value` per run, and
    where each function was observed: what every rule calibrate writes per function (tiers, cuda_runs,
    cuda_ops) is written from."""
    cases: dict[str, dict[str, dict[str, list[V]]]] = {}
    observed: dict[str, set[Observation]] = {}
    for observation, tests in runs:
        # a test failed by its subtests alone: its passing parts, as a pass (the tests are TestResults: counts.py)
        for t in as_judged(tests):
            if t.outcome not in JUDGED or parent_of(t.nodeid) is not None or any(re.search(k, t.nodeid) for k in covered):
                continue  # a subtest: its test carries its tiers and EP uses, and the rule judges the test
            fn = function_of(t.nodeid)
            cases.setdefault(fn, {}).setdefault(observation.cell, {}).setdefault(t.nodeid, []).append(value(t))
            observed.setdefault(fn, set()).add(observation)
    return cases, observed


def sorted_observed(obs: set[Observation] | list[Observation]) -> tuple[Observation, ...]:
    """A rule's `observed`, once each, in a fixed order (cell, ORT version, date): rewritten files diff cleanly."""
    return tuple(sorted(set(obs), key=lambda o: (o.cell, o.ort, o.date)))


def _reason(cases: dict[str, dict[str, list[frozenset[str]]]]) -> str:
    """`seen in gpu-a: 6 case(s), CUDNN_FLASH_ATTENTION in 6` per cell (one line when every cell saw the same)."""
    per_cell = {}
    for cell, by_case in sorted(cases.items()):
        tiers: dict[str, int] = {}
        for seen in by_case.values():
            for tier in sorted(frozenset().union(*seen)):
                tiers[tier] = tiers.get(tier, 0) + 1
        varied = sum(1 for seen in by_case.values() if len(set(seen)) > 1)
        text = f"{len(by_case)} case(s), " + ", ".join(f"{t} in {n}" for t, n in sorted(tiers.items()))
        per_cell[cell] = text + (f"; {varied} case(s) dispatched other tiers in other runs" if varied else "")
    texts = set(per_cell.values())
    if len(texts) == 1:
        return f"seen in {', '.join(per_cell)}: {texts.pop()}"
    return "seen in " + "; ".join(f"{cell}: {text}" for cell, text in per_cell.items())


def tier_rules(old: Sequence[TierRule], runs: Sequence[ObservedRun], drop_stale: Callable[[TierRule], bool],
               voice: Voice) -> list[TierRule]:
    """The old rules that still match (observed afresh), then a rule per test function nothing covers.

    `drop_stale(rule)`: whether a rule that matched no test that passed goes (calibrate decides, and
    says so, as for any rule) on `voice.say`: what calibrate reports on stdout.
    """
    calibrated = {r.observation.cell for r in runs}
    out: list[TierRule] = []
    for rule in old:
        hits = [r.observation for r in runs for t in r.tests if t.outcome in JUDGED and rule_covers(rule, t.nodeid)]
        elsewhere = [o for o in rule.observed if o.cell not in calibrated]
        if not hits and not elsewhere and drop_stale(rule):
            continue
        broken = {b.nodeid for r in runs for b in breaks_of(rule, r.tests)}  # a test broken in two runs counts once
        if broken:
            voice.say(f"kept as written: tier rule {rule_text(rule)}: broken by {len(broken)} test(s) in the runs calibrated; calibrate never "
                "widens a rule (edit or remove it if the change is intended)")
        out.append(dataclasses.replace(rule, observed=sorted_observed(elsewhere + hits)) if hits or elsewhere else rule)
    groups, observed = passed_by_function([(r.observation, r.tests) for r in runs], [k.test for k in out],
                                          lambda t: frozenset(t.sdpa))  # function -> cell -> node id -> runs
    for fn, cases in sorted(groups.items()):
        silent = sorted({n for by_case in cases.values() for n, seen in by_case.items() if frozenset() in seen})
        tiers = sorted(frozenset().union(*(s for by_case in cases.values() for seen in by_case.values() for s in seen)))
        if not tiers:
            continue  # nothing dispatched at all: a CPU test, or one whose kernel ORT does not report
        if silent:
            voice.say(f"not written: tier rule for {fn}: {len(silent)} of its passed case(s) dispatched nothing "
                f"(e.g. {silent[0]}), so any rule would fail them")
            continue
        out.append(TierRule(function_regex(fn), tuple(tiers), _reason(cases), sorted_observed(observed[fn])))
    return out
