"""Which outcomes were expected: the one place that decides it, when a run is judged (report/states.py shows it).

A known failure, a known-flaky test within its rule's set, a declared toothless test, an allowed
skip and the canary's bite in teeth are accepted by the suite's expectations; a reader must see them apart from the failures nobody
expected, or a red run that is red on purpose hides the one test that is new. The kind is decided
once, when the run is judged (the skip's reason and the failure's message are at hand then), and is
stored in the result (`Result.expected`), so a report built from result files later says the same.

To add a kind, add its name beside the others and one check in `why_expected`; the report forms
need nothing new. A test a known_flaky rule matches is judged by that rule alone (flaky.py, as the
verdict does): a failure or skip within its set is expected, anything outside it is not.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from ..config.model import DispatchExpect, PassExpect, TeethExpect
from .counts import TestResult
from .covers import rule_covers
from .flaky import as_set, rule_for, within
from .outcomes import FAILING, bites
from .verdicts import TeethCoverage

KNOWN_FAILURE = "known failure"
KNOWN_FLAKY = "known flaky"
DECLARED_TOOTHLESS = "declared toothless"
ALLOWED_SKIP = "allowed skip"
BITTEN = "bitten"  # teeth: the canary's exact message, the outcome teeth exists for
SUBTESTS_EXPECTED = "subtests expected"  # failed by its failing subtests alone, and each of them was expected
KINDS = (KNOWN_FAILURE, KNOWN_FLAKY, DECLARED_TOOTHLESS, ALLOWED_SKIP, BITTEN, SUBTESTS_EXPECTED)

def why_expected(expect: DispatchExpect, test: TestResult, coverage: TeethCoverage | None,
                 subtests: Iterable[str | None] = ()) -> str | None:
    """The kind of expectation that accepted this test's outcome in this mode, or None. `subtests`: the kinds
    that accepted the failing subtests of a test failed by them alone (it is expected when each of them is)."""
    if isinstance(expect, TeethExpect) and bites(test.outcome, test.message, expect.canary):
        return BITTEN  # the verdict counts a bite whatever else matches the test
    if test.by_subtests:
        kinds = set(subtests)
        return SUBTESTS_EXPECTED if kinds and None not in kinds else None
    flaky = rule_for(expect.known_flaky, test.nodeid)
    if flaky is not None and test.outcome in (*FAILING, "skipped"):
        return KNOWN_FLAKY if within(as_set(flaky), test.outcome, test.sdpa) else None
    if test.outcome in FAILING:
        if any(rule_covers(r, test.nodeid) for r in expect.known_failures):
            return KNOWN_FAILURE
        return None
    if test.outcome == "skipped" and isinstance(expect, PassExpect):
        return ALLOWED_SKIP if any(re.search(p, test.message) for p in expect.allowed_skips) else None
    if coverage is not None and test.nodeid in coverage.declared_toothless:
        return DECLARED_TOOTHLESS
    return None


def expected_of(expect: DispatchExpect, tests: Iterable[TestResult], coverage: TeethCoverage | None) -> dict[str, str]:
    """Node id -> kind, for every test and subtest whose outcome an expectation accepted."""
    ran = list(tests)
    out = {t.nodeid: kind for t in ran if not t.by_subtests
           and (kind := why_expected(expect, t, coverage)) is not None}
    failing: dict[str, list[str | None]] = {}
    for t in ran:
        if t.parent is not None and t.outcome in FAILING:
            failing.setdefault(t.parent, []).append(out.get(t.nodeid))
    out.update({t.nodeid: kind for t in ran if t.by_subtests
                and (kind := why_expected(expect, t, coverage, failing.get(t.nodeid, []))) is not None})
    return out
