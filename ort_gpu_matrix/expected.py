"""Which outcomes were expected: the one place that says so, for the result and every report form.

A known failure, a known-flaky test within its rule's set, a declared toothless test, an allowed
skip and the canary's bite in teeth are accepted by the suite's expectations; a reader must see them apart from the failures nobody
expected, or a red run that is red on purpose hides the one test that is new. The kind is decided
once, when the run is judged (the skip's reason and the failure's message are at hand then), and is
stored in the result (`Result.expected`), so a report built from result files later says the same.

To add a kind, add its name beside the others and one check in `why_expected`; the renderers need
nothing new. A test a known_flaky rule matches is judged by that rule alone (flakes.py, as the
verdict does): a failure or skip within its set is expected, anything outside it is not.

A pass that broke a tier rule (tierrules.py, `Result.tier_breaks`) is unexpected, not "ok": the
verdict fails on it, so a grid that showed it as a plain pass would hide the one cell that is red.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from .config.model import DispatchExpect, PassExpect, TeethExpect
from .flakes import as_set, rule_for, within
from .results import Result
from .tierrules import JUDGED
from .verdicts import TeethCoverage, TestResult, first_line

KNOWN_FAILURE = "known failure"
KNOWN_FLAKY = "known flaky"
DECLARED_TOOTHLESS = "declared toothless"
ALLOWED_SKIP = "allowed skip"
BITTEN = "bitten"  # teeth: the canary's exact message, the outcome teeth exists for
KINDS = (KNOWN_FAILURE, KNOWN_FLAKY, DECLARED_TOOTHLESS, ALLOWED_SKIP, BITTEN)
FAILING = ("failed", "error")

# a grid cell's state, as every report form names it
OK, EXPECTED, UNEXPECTED, NEUTRAL, UNKNOWN = "ok", "expected", "unexpected", "neutral", "unknown"
LEGEND = {
    EXPECTED: "expected: accepted by the suite's expectations (a known failure, a known-flaky test within its "
              "rule, a declared toothless test, an allowed skip, or the canary's bite in teeth); it does not fail "
              "the mode",
    UNEXPECTED: "unexpected: a failure, skip or toothless test no expectation accepts, or a pass that broke a "
                "tier rule; it fails the mode",
    UNKNOWN: "not told apart: a result stored before results recorded what was expected",
}


def why_expected(expect: DispatchExpect, test: TestResult, coverage: TeethCoverage | None) -> str | None:
    """The kind of expectation that accepted this test's outcome in this mode, or None."""
    if isinstance(expect, TeethExpect) and test.outcome == "failed" and first_line(test.message) == expect.message:
        return BITTEN  # the verdict counts a bite whatever else matches the test
    flaky = rule_for(expect.known_flaky, test.nodeid)
    if flaky is not None and test.outcome in (*FAILING, "skipped"):
        return KNOWN_FLAKY if within(as_set(flaky), test.outcome, test.sdpa) else None
    if test.outcome in FAILING:
        if any(re.search(r.test, test.nodeid) for r in expect.known_failures):
            return KNOWN_FAILURE
        return None
    if test.outcome == "skipped" and isinstance(expect, PassExpect):
        return ALLOWED_SKIP if any(re.search(p, test.message) for p in expect.allowed_skips) else None
    if coverage is not None and test.nodeid in coverage.declared_toothless:
        return DECLARED_TOOTHLESS
    return None


def expected_of(expect: DispatchExpect, tests: Iterable[TestResult], coverage: TeethCoverage | None) -> dict[str, str]:
    """Node id -> kind, for every test whose outcome an expectation accepted."""
    return {t.nodeid: kind for t in tests if (kind := why_expected(expect, t, coverage)) is not None}


def state(result: Result, test: str) -> tuple[str, str | None]:
    """How a report shows one test of one run: (OK | EXPECTED | UNEXPECTED | NEUTRAL | UNKNOWN, the kind if
    expected). UNKNOWN: a failure or skip in a result stored before `expected` was recorded."""
    outcome = result.outcomes.get(test)
    if outcome in JUDGED and any(b.get("nodeid") == test for b in result.tier_breaks):
        return UNEXPECTED, None  # a pass the tier rules fail (recorded before `expected` was, too)
    if result.expected is None:
        return ((OK, None) if outcome in ("passed", "xfailed") else
                (UNKNOWN, None) if outcome in (*FAILING, "skipped") else (NEUTRAL, None))
    kind = result.expected.get(test)
    if kind is not None:
        return EXPECTED, kind
    cov = result.teeth_coverage
    if cov is not None and test in cov.undeclared_toothless:
        return UNEXPECTED, None
    if outcome in FAILING:
        return UNEXPECTED, None
    if outcome == "skipped":
        return (UNEXPECTED, None) if result.mode != "teeth" else (NEUTRAL, None)  # teeth does not judge skips
    return (OK, None) if outcome in ("passed", "xfailed") else (NEUTRAL, None)


def tally(result: Result) -> tuple[dict[str, int], int]:
    """The expected outcomes of a run by kind, and how many tests were unexpected."""
    kinds: dict[str, int] = {}
    unexpected = 0
    if result.expected is None:
        return kinds, unexpected
    for test in result.outcomes:
        where, kind = state(result, test)
        if where == EXPECTED and kind is not None:
            kinds[kind] = kinds.get(kind, 0) + 1
        elif where == UNEXPECTED:
            unexpected += 1
    return kinds, unexpected


def tally_text(result: Result) -> str:
    """`expected: 2 known failure, 9 allowed skip; unexpected: 1`, or "" when nothing failed or skipped."""
    kinds, unexpected = tally(result)
    parts = []
    if unexpected:
        parts.append(f"unexpected {unexpected}")
    if kinds:
        parts.append("expected " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: KINDS.index(kv[0]))))
    return "; ".join(parts)
