"""What calibrate saw: each mode run's tests, and the items today's outcome needs accepted.

An item is a failing or toothless test, or a skip reason, with the run it was seen in; every rule
calibrate writes is made from items, and names the cells they came from (`observed`). The canary's
own failures are refused here, by name: a known failure would hide the dispatch change the canary
exists to catch.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ort_matrix_probe.schema import parent_of

from ..config.expectfile import short
from ..config.kernels import CUDNN, MATH, TEETH_MESSAGE
from ..config.model import Observation, Suite, TeethExpect
from ..judge.counts import Dispatch, TestResult
from ..judge.outcomes import FAILING, bites, first_line
from ..plan.cells import Cell
from ..store.results import Result
from ..util.voice import Voice


@dataclass(frozen=True)
class CalibrationRun:
    """One mode run of one cell as calibrate reads it: the result and every test the probe recorded."""

    cell: Cell
    result: Result
    tests: list[TestResult]
    round: int = 0  # which of calibrate's --runs this run was (0-based)

    @property
    def mode(self) -> str:
        return self.result.mode

    @property
    def observation(self) -> Observation:
        ort = self.result.provenance.ort
        return Observation(self.cell.name, str(ort.get("version") or "unknown") if ort else "unknown",
                           self.result.started[:10])


@dataclass(frozen=True)
class Item:
    """Something today's outcome needs accepted: a failing or toothless test (by node id), or a skip reason."""

    text: str
    reason: str
    seen: CalibrationRun


def search(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


def canaries(suite: Suite) -> tuple[str, ...]:
    teeth = suite.expect.get("teeth")
    own = teeth.canary if isinstance(teeth, TeethExpect) else TEETH_MESSAGE
    return tuple(dict.fromkeys((own, TEETH_MESSAGE)))


def canary_tier(seen: CalibrationRun) -> str:
    """The tier the cell's teeth takes away (cuDNN unless its suite names another)."""
    expect = seen.cell.suite.expect.get("teeth")
    return expect.tier if isinstance(expect, TeethExpect) else CUDNN


def bitten_in(seen: CalibrationRun) -> set[str]:
    expect = seen.cell.suite.expect["teeth"]
    message = expect.canary if isinstance(expect, TeethExpect) else TEETH_MESSAGE
    return {t.nodeid for t in seen.tests if bites(t.outcome, t.message, message)}


def prior_census(teeth: CalibrationRun, runs: Sequence[CalibrationRun]) -> Dispatch | None:
    """require_cudnn's census, for teeth's coverage: the same cell's run, from the same venv."""
    rc = next((s for s in runs if s.cell.name == teeth.cell.name and s.mode == "require_cudnn"
               and s.round == teeth.round), None)
    if rc is None or rc.result.venv.fingerprint != teeth.result.venv.fingerprint:
        return None
    return rc.result.dispatch


def failures(seen: CalibrationRun, canaries: tuple[str, ...], voice: Voice) -> list[Item]:
    """Every failing test of a run, with its first failure line; the canary's own failures refused by name."""
    bitten = bitten_in(seen) if seen.mode == "teeth" else set()
    items = []
    for t in seen.tests:
        if t.outcome not in FAILING or t.nodeid in bitten or t.by_subtests:  # its failing subtests are items
            continue
        line = first_line(t.message)
        if any(c in line for c in canaries):
            why = ("with MATH forced, holding but not exactly the canary's message" if seen.mode == "teeth" else
                   "a test that asked for cuDNN and got another tier")
            voice.say(f"refused: {seen.result.session} {t.nodeid} {t.outcome} with the canary's message ({line!r}: {why});"
                " a known failure would hide the dispatch change the canary exists to catch")
            continue
        items.append(Item(t.nodeid, short(line) or f"{t.outcome}, with no message", seen))
    return items


def toothless(teeth: CalibrationRun, runs: Sequence[CalibrationRun], voice: Voice) -> list[Item]:
    """Every test that dispatched the canary's tier in require_cudnn and was not bitten, with that census as its
    reason."""
    tier = canary_tier(teeth)
    cov = teeth.result.teeth_coverage
    prior = prior_census(teeth, runs)
    if cov is not None and cov.checked:
        names = [*cov.declared_toothless, *cov.undeclared_toothless]
    elif prior is not None:
        names = [n for n in prior.tier_tests(tier) if n not in bitten_in(teeth)]
    else:
        voice.say(f"not calibrated: known_toothless from {teeth.result.session}: no require_cudnn run of {teeth.cell.name} "
            "from the same venv to check its coverage against (calibrate the cell in all its modes)")
        return []
    outcomes = {t.nodeid: t for t in teeth.tests}
    items = []
    for name in sorted(names):
        times = prior.tests.get(name, []).count(tier) if prior is not None else 0
        dispatched = f"dispatched {tier}" + (f" x{times}" if times else "") + " in require_cudnn"
        t = outcomes.get(name)
        if t is None:
            did = f"did not run with {MATH} forced"
        elif t.outcome in FAILING:
            did = f"{t.outcome} with {MATH} forced, but not with the canary's message: {first_line(t.message)}"
        elif t.outcome == "skipped":
            did = f"skipped with {MATH} forced: {first_line(t.message)}"
        else:
            did = f"{t.outcome} with {MATH} forced"
        items.append(Item(name, f"{dispatched}; {did}", teeth))
    return items


def observed_of(items: Sequence[Item]) -> tuple[Observation, ...]:
    return tuple(sorted({i.seen.observation for i in items}, key=lambda o: (o.cell, o.ort, o.date)))


def reason_of(items: Sequence[Item]) -> str:
    reasons = list(dict.fromkeys(i.reason for i in items))
    per_cell = dict.fromkeys(f"{i.seen.cell.name}: {i.reason}" for i in items)
    return short(reasons[0] if len(reasons) == 1 else "; ".join(per_cell))


def skip_note(items: Sequence[Item]) -> str:
    per_run: dict[tuple[str, int], int] = {}
    for i in items:
        key = (i.seen.cell.name, i.seen.round)
        per_run[key] = per_run.get(key, 0) + 1
    per: dict[str, int] = {}
    for (cell, _), n in per_run.items():  # a cell calibrated --runs N times: the most of any one run
        per[cell] = max(n, per.get(cell, 0))
    return ", ".join(f"{cell}: {n} test(s)" for cell, n in sorted(per.items()))


def uncovered(covered: Callable[[str], bool], items: Sequence[Item]) -> dict[str, list[Item]]:
    """Items `covered` does not accept, grouped by their text, in order."""
    out: dict[str, list[Item]] = {}
    for i in items:
        if not covered(i.text):
            out.setdefault(i.text, []).append(i)
    return dict(sorted(out.items()))


def folded(grouped: dict[str, list[Item]], runs: Sequence[CalibrationRun]) -> tuple[dict[str, list[Item]], dict[str, list[Item]]]:
    """(the items left one by one, and per test the items of its subtests written as one rule).

    A test's subtests fold into one rule (its id, `subtests = true`) only when, in every calibrated run of the
    mode that ran the test, every subtest of it is an item and all of them have one reason: the rule then says no
    more than the items would. Anything less stays one rule per subtest, so a subtest that passes in some cell is
    never covered by a rule written for its failing siblings in another."""
    by_test: dict[str, list[str]] = {}
    for text in grouped:
        parent = parent_of(text)
        if parent is not None:
            by_test.setdefault(parent, []).append(text)
    left, out = dict(grouped), {}
    for test, texts in by_test.items():
        found = [i for text in texts for i in grouped[text]]
        ran = [[t for t in seen.tests if t.parent == test] for seen in runs
               if any(t.nodeid == test or t.parent == test for t in seen.tests)]
        every = all(subs and all(t.outcome in FAILING and t.nodeid in texts for t in subs) for subs in ran)
        if len(texts) > 1 and every and len({i.reason for i in found}) == 1:
            out[test] = found
            for text in texts:
                del left[text]
    return left, out
