"""Tier rules: which kernel a test must run, for the many tests that never check their own tier.

ORT's CUDA attention tests pick a kernel (ORT_DISABLE_FLASH_ATTENTION, a class per kernel) and then
compare values only, and a value check holds on every tier. The census knows which tier each test
dispatched; a rule turns that into a verdict: every test that passed and whose node id the rule's
regex finds dispatched at least one tier, and only tiers the rule lists.

- Only tests that passed (or xpassed) are judged: a skip is judged by allowed_skips and a failure by
  known_failures, and neither says which kernel the test meant to pass on.
- A test several rules match must satisfy each of them, so the tiers it may dispatch are the
  intersection of their `only` lists. Each broken rule is its own reason: a broad rule and a narrow
  one never hide each other.
- Tier names are an open list: a rule may name XQA or any tier a later ORT prints.
- A rule that matches no test that passed is stale, like any other rule.

A result keeps each break as a BreakRecord: the tiers, the rule's regex and its `only`, none of the
rule's other text; the tiers are stored joined into one string, as they were first written.

Grouping by test function (function_of) is shared by calibrate, which writes one rule per function,
and by the report's tier table, which folds a function's parameterized cases into one row.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ort_matrix_probe.schema import parent_of

from ..config.expectfile import literal_regex
from ..config.kernels import MATH
from ..config.model import TierRule
from ..util.codec import stored
from .counts import TestResult
from .covers import rule_covers
from .outcomes import GONE, JUDGED, listing

# unittest `parameterized.expand` names its cases <function>_<index>[_<params>] (test_gqa_past_flash_0_b2_s1)
_EXPAND = re.compile(r"(.+?)_[0-9]+(?:_.*)?")
_CASES = r"(?:_[0-9]+(?:_.*)?)?(?:\[.*\])?$"  # what a function's node id may carry after its name


def function_of(nodeid: str) -> str:
    """The test function a node id is a case of: without pytest's `[params]`, and without the
    `_<index>[_<params>]` that unittest's parameterized.expand appends to a method name. A subtest is a case
    of its test's function."""
    head, sep, name = (parent_of(nodeid) or nodeid).rpartition("::")
    name = name.split("[", 1)[0]
    m = _EXPAND.fullmatch(name)
    return head + sep + (m.group(1) if m else name)


def function_regex(function: str) -> str:
    """A regex that matches the node ids of every case of `function` (as function_of groups them)."""
    return literal_regex(function)[:-1] + _CASES


def dispatched(tiers: Sequence[str]) -> str:
    """`EFFICIENT_ATTENTION x2, XQA x1` in the order they first ran, or `nothing`."""
    return ", ".join(f"{t} x{n}" for t, n in Counter(tiers).items()) or "nothing"


def rule_text(rule: TierRule) -> str:
    return f"{rule.test!r} (only {', '.join(rule.only)})"


@dataclass(frozen=True)
class Break:
    """One test that broke one rule: what it dispatched against what the rule allows."""

    rule: TierRule
    nodeid: str
    tiers: tuple[str, ...]

    def line(self) -> str:
        return f"{self.nodeid} dispatched {dispatched(self.tiers)}"

    def record(self, mode: str) -> BreakRecord:
        return BreakRecord(mode, self.nodeid, function_of(self.nodeid), tuple(dict.fromkeys(self.tiers)), self.rule.test,
                           tuple(self.rule.only))


_JOINED = stored(joined=", ")  # `EFFICIENT_ATTENTION, MATH`: how results have always stored a list of tiers


@dataclass(frozen=True)
class BreakRecord:
    """A break as a result keeps it (`Result.tier_breaks`): what the report's tier table and grid need."""

    mode: str
    nodeid: str
    function: str  # function_of(nodeid), as it grouped when the run was judged
    dispatched: tuple[str, ...] = field(metadata=_JOINED)  # each tier it dispatched once, in the order first seen
    rule: str  # the rule's test regex
    only: tuple[str, ...] = field(metadata=_JOINED)  # the tiers the rule allows


@dataclass(frozen=True)
class Stale:
    rule: TierRule
    what: str
    tests: list[str]


@dataclass
class TierFindings:
    """What the tier rules found in one mode run: a reason per broken rule, the breaks, the stale rules."""

    reasons: list[str] = field(default_factory=list)
    breaks: list[Break] = field(default_factory=list)
    stale: list[Stale] = field(default_factory=list)


def breaks_of(rule: TierRule, tests: Sequence[TestResult]) -> list[Break]:
    return [Break(rule, t.nodeid, tuple(t.sdpa)) for t in tests if t.outcome in JUDGED
            and rule_covers(rule, t.nodeid) and (not t.sdpa or any(x not in rule.only for x in t.sdpa))]


def judge(rules: Sequence[TierRule], tests: Sequence[TestResult]) -> TierFindings:
    """Every rule against every test that passed: one reason per broken rule, naming its tests."""
    out = TierFindings()
    for rule in rules:
        broken = breaks_of(rule, tests)
        if broken:
            out.breaks += broken
            out.reasons.append(f"tier rule {rule_text(rule)} broken by {len(broken)} test(s): "
                               + listing([b.line() for b in broken]))
        if any(t.outcome in JUDGED and rule_covers(rule, t.nodeid) for t in tests):
            continue
        others = [f"{t.nodeid} ({t.outcome})" for t in tests if rule_covers(rule, t.nodeid)]
        out.stale.append(Stale(rule, "it matched no test that passed" if others else GONE, others))
    return out


def teeth_warning(tests: Sequence[TestResult]) -> str | None:
    """Teeth forces MATH into every CUDA session, so a tier other than MATH there means the forcing did
    not reach that test's session: what teeth says about it proves nothing. Tier rules are not applied."""
    leaks = [f"{t.nodeid} dispatched {dispatched(t.sdpa)}" for t in tests if any(x != MATH for x in t.sdpa)]
    if not leaks:
        return None
    return (f"{len(leaks)} test(s) dispatched a tier other than {MATH} with {MATH} forced (the forcing did not "
            f"reach their sessions): {listing(leaks)}")
