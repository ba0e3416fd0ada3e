"""known_flaky rules: a test that may take any outcome and tier its rule lists, and nothing else.

Calibrate writes one for a test whose outcome or tiers differed between runs of a mode (WPT's
`expected: [PASS, FAIL]`), never a known_failures rule: a failure that comes and goes is not a
known failure, and accepting it as one would hide the day it starts failing for good. Verdicts
accept such a test only inside its set; compare calls a change within the set no regression.
The set travels with the result (`Result.known_flaky`), so a report built later from result files
compares the way the sweep did without reading the matrix.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..config.model import FlakyRule
from .counts import TestResult
from .covers import rule_covers

FlakySet = Mapping[str, Sequence[str]]  # {"outcomes": [...], "tiers": [...]}


def rule_for(rules: Iterable[FlakyRule], nodeid: str) -> FlakyRule | None:
    return next((r for r in rules if rule_covers(r, nodeid)), None)


def within(allowed: FlakySet, outcome: str, tiers: Iterable[str]) -> bool:
    """One run of the test is inside its set: a listed outcome, and only listed tiers."""
    return outcome in allowed.get("outcomes", ()) and set(tiers) <= set(allowed.get("tiers", ()))


def as_set(rule: FlakyRule) -> dict[str, list[str]]:
    return {"outcomes": sorted(set(rule.outcomes)), "tiers": sorted(set(rule.tiers))}


def judged(rules: Sequence[FlakyRule], tests: Iterable[TestResult]) -> tuple[set[str], list[str], dict[str, dict[str, list[str]]]]:
    """(the node ids a rule accepts as they are, one line per test outside its rule's set, every matched test's set).

    A matched test outside its set is judged by nothing else: the rule says what it may do."""
    accepted: set[str] = set()
    outside: list[str] = []
    sets: dict[str, dict[str, list[str]]] = {}
    if not rules:
        return accepted, outside, sets
    for t in tests:
        rule = rule_for(rules, t.nodeid)
        if rule is None:
            continue
        allowed = as_set(rule)
        sets[t.nodeid] = allowed
        if within(allowed, t.outcome, t.sdpa):
            accepted.add(t.nodeid)
        else:
            tiers = ", ".join(sorted(set(t.sdpa))) or "no tier"
            outside.append(f"{t.nodeid} {t.outcome} ({tiers}): known_flaky lists {', '.join(allowed['outcomes'])}"
                           f" ({', '.join(allowed['tiers']) or 'no tier'})")
    return accepted, outside, sets
