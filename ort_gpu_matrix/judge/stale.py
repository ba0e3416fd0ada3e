"""Expectations that matched nothing in a run, named: a rule that accepts nothing hides the next change.

A known failure that now passes, a toothless test that now bites, a skip that no longer happens: the
verdict warns of each, calibrate drops it, and compare calls it an improvement. Here is what a stale
rule says, and in which cells one counts, and what a result keeps of one (StaleRecord).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config.model import Rule
from .counts import TestResult
from .covers import rule_covers
from .outcomes import GONE, listing


@dataclass(frozen=True)
class StaleRule:
    """An expectation that matched nothing in a run: a known failure that now passes, a toothless test that
    now bites, an allowed skip that no longer happens. Kept rules that accept nothing hide the next change."""

    key: str  # known_failures, known_toothless, allowed_skips
    pattern: str  # the rule's test regex, or the skip pattern
    reason: str  # the rule's reason ("" for a skip pattern)
    what: str  # the kind of staleness ("no longer fails"): many stale rules of one kind are one change
    observed: tuple[str, ...] = ()  # the cells the rule was calibrated in (empty: written by hand)
    tests: str = ""  # the tests that show it, listed

    @property
    def why(self) -> str:
        """What the run showed instead."""
        return f"{self.what}: {self.tests}" if self.tests else self.what

    def record(self, mode: str) -> StaleRecord:
        return StaleRecord(mode, self.key, self.pattern, self.reason, self.why, self.what)

    def warning(self) -> str:
        return f"stale rule: {self.key} {self.pattern!r} matched nothing in this run ({self.why}); " \
               "`nox -s calibrate` drops it"


@dataclass(frozen=True)
class StaleRecord:
    """A stale rule as a result keeps it (`Result.stale_rules`): enough to name it and its kind of staleness
    later, in a comparison or a report, without the expectations it was judged against."""

    mode: str
    key: str
    pattern: str
    reason: str
    why: str  # what the run showed instead, with its tests
    what: str = ""  # the kind of staleness; "" in results stored before it was kept, which have only `why`

    @property
    def kind(self) -> str:
        """The kind of staleness, as a comparison groups it (`why` where a result predates `what`)."""
        return self.what or self.why


def stale_failures(rules: tuple[Rule, ...], failing: list[str], tests: list[TestResult]) -> list[StaleRule]:
    """The known_failures rules that matched none of the `failing` tests, each with what its tests did instead."""
    out = []
    for rule in rules:
        if any(rule_covers(rule, n) for n in failing):
            continue
        ran = [f"{t.nodeid} ({t.outcome})" for t in tests if rule_covers(rule, t.nodeid)]
        what = "no longer fails" if ran else GONE
        out.append(StaleRule("known_failures", rule.test, rule.reason, what, tuple(o.cell for o in rule.observed),
                             listing(ran)))
    return out


def stale_in(found: list[StaleRule], cell: str | None, complete: bool) -> list[StaleRule]:
    """The stale rules that count for `cell`: none from a run that did not complete (its tests never had
    the chance to match), and a calibrated rule only in the cells it was seen in (a rule one cell of a
    suite needs is no rot in another)."""
    if not complete:
        return []
    return [s for s in found if not s.observed or cell is None or cell in s.observed]
