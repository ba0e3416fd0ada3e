"""How a report shows each test of a stored run: expected, unexpected, ok or unknown, and the tally.

Read from a stored result, so it is the report's: the judge (judge/expected.py) decides at run time which
outcomes an expectation accepted and the result keeps that decision; this reads it back.

A pass that broke a tier rule (judge/tiers.py, `Result.tier_breaks`) is shown unexpected, not "ok": the
verdict fails on it, so a grid that showed it as a plain pass would hide the one cell that is red.
"""
from __future__ import annotations

from ..judge.expected import KINDS
from ..judge.outcomes import FAILING, JUDGED
from ..store.results import Result

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


def state(result: Result, test: str) -> tuple[str, str | None]:
    """How a report shows one test of one run: (OK | EXPECTED | UNEXPECTED | NEUTRAL | UNKNOWN, the kind if
    expected). UNKNOWN: a failure or skip in a result stored before `expected` was recorded."""
    outcome = result.outcomes.get(test)
    if outcome in JUDGED and any(b.nodeid == test for b in result.tier_breaks):
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


def counts_text(result: Result) -> str:
    """`14/0/0` (passed/failed+errors/skipped tests), then the subtests apart as pytest counts them:
    `2/2/0, subtests 9/2/1`."""
    c = result.counts
    text = f"{c.passed}/{c.failed + c.errors}/{c.skipped}"
    if c.subtests:
        text += f", subtests {c.subtests_passed}/{c.subtests_failed}/{c.subtests_skipped + c.subtests_xfailed}"
    return text
