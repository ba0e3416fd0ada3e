"""Judge a run by what it counted and what it observed, never by its exit code alone.

pytest exits 0 when every test skipped and a correct MATH fallback gives the
same numbers as cuDNN, so a verdict here asks: did enough pass, was every skip
and failure expected, which kernels ran, and which libraries served them.
What each mode checks on top comes from modes.py.

The witnesses' cross-checks (witnesses.py), the counts and census (counts.py), the library
audit (libraries.py) and stale rules (stale.py) are their own modules; here they make one Verdict.
"""
from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from ort_matrix_probe.schema import ProbeReport, TestEntry

from ..config.kernels import CUDNN
from ..config.model import DispatchExpect, PassExpect, Rule, TeethExpect
from ..config.modes import Mode
from ..execute.request import ModeRun
from ..host.ortsource import SourceTree, skew
from ..util.codec import stored
from . import eps, subtests, tiers
from .counts import Counts, Dispatch, TestResult, census, collected_of, count
from .covers import covers, rule_covers
from .flaky import judged
from .libraries import Libraries, library_audit
from .outcomes import FAILING, GONE, first_line, listing, teardown_of, test_of
from .pollution import warnings as pollution_warnings
from .reads import ReadCensus
from .stale import StaleRule, stale_failures, stale_in
from .witnesses import EXIT_MEANING, Evidence, cross_checks


def nothing_to_cover(tier: str) -> str:
    return f"require_cudnn dispatched no {tier} test: teeth has nothing to cover"


NOTHING_TO_COVER = nothing_to_cover(CUDNN)


class Status(enum.StrEnum):
    """A mode's verdict, as nox's sessions have a status."""

    PASS = "pass"
    FAIL = "fail"


_CHECKED = stored(only_if="checked")  # stored only where coverage was checked


@dataclass(frozen=True)
class TeethCoverage:
    """Which of require_cudnn's tests of the canary's tier the canary bit; unchecked without a fresh require_cudnn run.

    `tier` is the tier forcing MATH took away (cuDNN for ORT's tests; another where the suite's gate requires it),
    and `tier_tests` how many tests dispatched it in require_cudnn. Stored unchecked, it is `checked` and the scope
    alone: the counts of a check that did not happen are not zeros to read.

    `scope` says which tests teeth ran: "all" of the suite, or "cudnn", only those that dispatched
    cuDNN in require_cudnn plus those known_toothless names (`selected` of them). Counts of a scoped
    run are not comparable with an unscoped one's, so the scope travels with the result.
    """

    checked: bool = False
    tier: str = field(default=CUDNN, metadata=_CHECKED)
    tier_tests: int = field(default=0, metadata=_CHECKED)
    bitten: int = field(default=0, metadata=_CHECKED)
    toothless: int = field(default=0, metadata=_CHECKED)
    declared_toothless: list[str] = field(default_factory=list, metadata=_CHECKED)
    undeclared_toothless: list[str] = field(default_factory=list, metadata=_CHECKED)
    bitten_tests: list[str] = field(default_factory=list, metadata=_CHECKED)
    scope: str = "all"
    # with scope "cudnn": how many node ids teeth was given
    selected: int | None = field(default=None, metadata=stored(omit_default=True))


@dataclass
class Findings:
    """What the mode-specific judging adds to a verdict."""

    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    coverage: TeethCoverage | None = None
    stale: list[StaleRule] = field(default_factory=list)  # rules that matched nothing (before the cell filter)
    tier_breaks: list[tiers.Break] = field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    status: Status
    reasons: list[str]
    warnings: list[str]
    counts: Counts
    dispatch: Dispatch
    libraries: Libraries
    teeth_coverage: TeethCoverage | None = None
    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> outcome, every test with one
    reruns: dict[str, int] = field(default_factory=dict)  # node id -> failed attempts rerun, where any
    stale_rules: list[StaleRule] = field(default_factory=list)
    tier_breaks: list[tiers.Break] = field(default_factory=list)  # each test that broke a tier rule, per rule
    known_flaky: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # node id -> the set its rule lists
    ep: eps.EpCensus = field(default_factory=eps.EpCensus)  # which EP served the CUDA-asking tests
    reads: ReadCensus = field(default_factory=ReadCensus)  # the run's own tests' reads of the watched variables


def tests_of(report: ProbeReport | None) -> list[TestResult]:
    if not report:
        return []
    out = []
    for nodeid, t in report.get("tests", {}).items():
        if t.get("outcome"):
            out.append(TestResult(nodeid, str(t["outcome"]), t.get("message", ""), tuple(t.get("sdpa", [])),
                                  int(t.get("reruns", 0)), tuple(t.get("ep", ())),
                                  by_subtests=bool(t.get("by_subtests")), pytest_outcome=t.get("pytest_outcome")))
        else:  # reported on, but without an outcome: its process died under it
            out.append(TestResult(nodeid, "error", f"worker crashed running {nodeid}", (),
                                  ep=tuple(t.get("ep", ()))))
        for sub_id, sub in (t.get("subtests") or {}).items():
            out.append(TestResult(sub_id, str(sub["outcome"]), sub.get("message", ""), tuple(sub.get("sdpa", [])),
                                  ep=tuple(sub.get("ep", ())), parent=nodeid))
        if t.get("teardown_error"):
            out.append(TestResult(teardown_of(nodeid), "error", t.get("teardown_error", ""), ()))
    for c in report.get("collection", []):
        out.append(TestResult(c["nodeid"], c["outcome"], c.get("message", ""), ()))
    return out


def _matches(rules: tuple[Rule, ...], nodeid: str) -> bool:
    return any(rule_covers(r, nodeid) for r in rules)


def _dispatch_rules(expect: DispatchExpect, tests: list[TestResult], reasons: list[str]) -> None:
    scope = [t for t in tests if expect.dispatch_tests is None or re.search(expect.dispatch_tests, t.nodeid)]
    if expect.require_kernel and not any(expect.require_kernel in t.sdpa for t in scope):
        seen = sorted({k for t in scope for k in t.sdpa}) or ["no SdpaKernel token at all"]
        reasons.append(f"no test dispatched {expect.require_kernel} (seen: {', '.join(seen)})")
    for kernel in expect.forbid_kernels:
        hits = [f"{t.nodeid} ran {kernel}" for t in scope if kernel in t.sdpa]
        if hits:
            reasons.append(f"{len(hits)} test(s) dispatched forbidden {kernel}: {listing(hits)}")


def judge_counts(expect: DispatchExpect, tests: list[TestResult], counts: Counts) -> Findings:
    """normal and require_cudnn: enough passed, and every skip and failure was expected (no census is read)."""
    assert isinstance(expect, PassExpect)
    out = Findings()
    if counts.passed == 0:
        out.reasons.append("nothing passed" + (f" ({counts.skipped} skipped)" if counts.skipped else ""))
    elif counts.passed < expect.min_passed:
        out.reasons.append(f"only {counts.passed} passed, min_passed is {expect.min_passed}")
    flaky = _flaky(expect, tests, out)
    bad_skips = [f"{t.nodeid}: {t.message}" for t in tests if t.outcome == "skipped" and t.nodeid not in flaky
                 and not any(re.search(p, t.message) for p in expect.allowed_skips)]
    if bad_skips:
        out.reasons.append(f"{len(bad_skips)} skip(s) not in allowed_skips: {listing(bad_skips)}")
    bad = [f"{t.nodeid} {t.outcome}: {first_line(t.message)}" for t in tests if t.nodeid not in flaky
           and t.outcome in FAILING and not t.by_subtests and not _matches(expect.known_failures, t.nodeid)]
    if bad:
        out.reasons.append(f"{len(bad)} unexpected failure(s): {listing(bad)}")
    out.stale += stale_failures(expect.known_failures, [t.nodeid for t in tests if t.outcome in FAILING],
                                 tests)
    skips = [t.message for t in tests if t.outcome == "skipped"]
    out.stale += [StaleRule("allowed_skips", p, "", "no test skipped with a reason it matches")
                  for p in expect.allowed_skips if not any(re.search(p, m) for m in skips)]
    tiered = tiers.judge(expect.tiers, [t for t in subtests.as_judged(tests) if t.nodeid not in flaky])
    out.reasons += tiered.reasons
    out.tier_breaks = tiered.breaks
    out.stale += [StaleRule("tiers", s.rule.test, s.rule.reason, s.what, tuple(o.cell for o in s.rule.observed),
                            listing(s.tests)) for s in tiered.stale]
    return out


def _flaky(expect: DispatchExpect, tests: list[TestResult], out: Findings) -> set[str]:
    """The tests a known_flaky rule accepts as they ran (judged by nothing else); a reason for those outside
    their rule's set; a stale rule for each rule no test matched."""
    matched = [t for t in tests if any(rule_covers(r, t.nodeid) for r in expect.known_flaky)]
    accepted, outside, _ = judged(expect.known_flaky, matched)
    if outside:
        out.reasons.append(f"{len(outside)} known-flaky test(s) did what their rule does not list: {listing(outside)}")
    for rule in expect.known_flaky:
        if not any(rule_covers(rule, t.nodeid) for t in tests):
            out.stale.append(StaleRule("known_flaky", rule.test, rule.reason, GONE,
                                       tuple(o.cell for o in rule.observed), ""))
    return accepted | {t.nodeid for t in matched}


def judge_teeth(expect: DispatchExpect, tests: list[TestResult], counts: Counts, prior: Dispatch | None) -> Findings:
    """teeth: the canary must bite, with exactly the verbatim message, and bite every test of its tier.

    `prior` is the census of this pairing's require_cudnn run from the same venv, when there is one.
    """
    assert isinstance(expect, TeethExpect)
    out = Findings()
    flaky = _flaky(expect, tests, out)
    bitten = subtests.bitten(tests, expect.canary)
    carried = subtests.carried(tests)
    other = [f"{t.nodeid} {t.outcome}: {first_line(t.message)}" for t in tests
             if t.outcome in FAILING and t.nodeid not in bitten and t.nodeid not in flaky
             and t.nodeid not in carried and not _matches(expect.known_failures, t.nodeid)]
    if not any(t.outcome in FAILING for t in tests):
        out.reasons.append("canary has no teeth: nothing failed with MATH forced")
    elif len(bitten - carried) < expect.min_failures:  # a test bitten through its subtests counts through them
        out.reasons.append(f"{len(bitten - carried)} test(s) failed with exactly {expect.canary!r}, "
                           f"min_failures is {expect.min_failures}")
    if other:
        out.reasons.append(f"{len(other)} failure(s) other than the canary's: {listing(other)}")
    leaked = tiers.teeth_warning(tests)
    if leaked:
        out.warnings.append(leaked)
    shown = [dataclasses.replace(t, outcome="bitten") if t.nodeid in bitten else t for t in tests]
    out.stale += stale_failures(expect.known_failures, [t.nodeid for t in tests if t.outcome in FAILING
                                                         and t.nodeid not in bitten], shown)
    if prior is None:
        out.warnings.append("teeth coverage not checked: no up-to-date require_cudnn result for this pairing")
        out.coverage = TeethCoverage(checked=False)
        return out
    tier = expect.tier
    tier_tests = prior.tier_tests(tier)
    if not tier_tests:  # MATH forced everywhere, or a suite that never reaches the tier: a bite proves nothing
        out.reasons.append(nothing_to_cover(tier))
    ran = {test_of(t.nodeid) for t in tests}
    unrun = [n for n in tier_tests if test_of(n) not in ran]
    if unrun:
        out.reasons.append(f"{len(unrun)} test(s) dispatched {tier} in require_cudnn but teeth did not run them: "
                           f"{listing(unrun)}; teeth runs them once a run on record shows them (run again), or with "
                           "--full")
    toothless = [n for n in tier_tests if n not in bitten and test_of(n) in ran]
    declared = [n for n in toothless if _matches(expect.known_toothless, n) or n in flaky]
    undeclared = [n for n in toothless if n not in declared]
    if undeclared:
        out.reasons.append(f"{len(undeclared)} toothless test(s): dispatched {tier} in require_cudnn but did not "
                           f"fail with the verbatim message when MATH was forced: {listing(undeclared)}")
    for rule in expect.known_toothless:
        if any(rule_covers(rule, n) for n in toothless):
            continue
        biting = [n for n in tier_tests if n in bitten and rule_covers(rule, n)]
        others = sorted(t.nodeid for t in tests if t.nodeid not in tier_tests and rule_covers(rule, t.nodeid))
        listed = biting or others
        what = "it now bites" if biting else f"no longer a {tier} test in require_cudnn" if others else GONE
        out.stale.append(StaleRule("known_toothless", rule.test, rule.reason, what, tuple(o.cell for o in rule.observed),
                                   listing(listed)))
    out.coverage = TeethCoverage(True, tier, len(tier_tests), len(tier_tests) - len(toothless) - len(unrun),
                                 len(toothless), declared, undeclared, sorted(n for n in tier_tests if n in bitten))
    return out


OutcomeJudge = Callable[[DispatchExpect, list[TestResult], Counts, Dispatch | None], Findings]


def expectation_reasons(outcomes: OutcomeJudge, expect: DispatchExpect, tests: list[TestResult], counts: Counts,
                        prior: Dispatch | None) -> list[str]:
    """What the expectations alone hold against a run's tests: the mode's own judge and the dispatch rules.
    Calibrate re-judges a run with this under the expectations it wrote, to say what they cannot accept."""
    reasons = outcomes(expect, tests, counts, prior).reasons
    _dispatch_rules(expect, tests, reasons)
    return reasons + eps.judge(expect, tests, taken=True, nodes_taken=True)[1].reasons


def skew_warning(report: ProbeReport | None, source: SourceTree | None) -> str | None:
    """The tests' release against the wheel's, when their major.minor differ: failures from features the
    wheel predates are not regressions, and the result says so."""
    seen = report.get("provenance") if report else None
    wheel = None
    if seen:
        ort = seen.get("ort")
        wheel = seen.get("ort_imported_version") or (ort["version"] if ort else None)
    text = skew(source, wheel)
    return f"version skew: {text} (major.minor differ)" if text else None


@dataclass(frozen=True)
class Standard:
    """What a run is judged against: its mode's outcome judge and expectations, the library files that must
    serve it (`preload`), the venv it ran in, and its cell, so that a calibrated rule is called stale only
    where it was seen."""

    outcomes: OutcomeJudge
    expect: DispatchExpect
    preload: tuple[str, ...] = ()
    venv: str = ""
    cell: str | None = None

    @classmethod
    def of(cls, run: ModeRun) -> Standard:
        return cls(outcome_judge(run.mode), run.cell.suite.expect[run.mode], run.resolved.pinned, str(run.venv.path),
                   run.cell.name)


def judge(ev: Evidence, standard: Standard, prior: Dispatch | None = None, source: SourceTree | None = None,
          carried: Mapping[str, TestEntry] | None = None) -> Verdict:
    """The cross-checks of every witness, the dispatch rules and the audit, plus the mode's own outcome judge.

    `prior`: teeth's require_cudnn census; `source`: the ORT checkout the suite's tests lie in, for the
    version-skew warning; `carried`: the report entries of tests this run did not run, whose outcomes another
    run gave (drive/carry.py). They are judged, counted and stored with the run's own, but only the run's own
    are cross-checked against its witnesses, which know nothing of them.
    """
    outcomes, expect, preload, venv, cell = (standard.outcomes, standard.expect, standard.preload, standard.venv,
                                             standard.cell)
    report = ev.report
    tests = tests_of(report)
    counts = count(report, tests, collected_of(report, ev.collected))
    reasons = cross_checks(ev, tests, counts)
    if ev.dropped and ev.exit_code == 5:  # every test it collected was carried or left out: nothing left to run
        reasons = [r for r in reasons if r != EXIT_MEANING[5]]
    if carried:
        tests = tests + tests_of(cast(ProbeReport, {"tests": dict(carried)}))
        counts = count(None, tests, counts.collected + len(carried))
    found = outcomes(expect, tests, counts, prior)
    version = report.get("report_version", 0) if report is not None else 0
    nodes_taken = version >= 5 and bool(report and report.get("node_census", True))
    ep, ep_found = eps.judge(expect, tests, taken=version >= 3, nodes_taken=nodes_taken)
    found.stale += [StaleRule(key, rule.test, rule.reason, what, tuple(o.cell for o in rule.observed), listing(shown))
                    for key, rule, what, shown in ep_found.stale]
    stale = stale_in(found.stale, cell, complete=not reasons)
    reasons += found.reasons
    _dispatch_rules(expect, tests, reasons)
    reasons += ep_found.reasons
    libraries, lib_reasons, lib_warnings = library_audit(report, preload, venv)
    reasons += lib_reasons
    warnings = found.warnings + ep_found.warnings + lib_warnings + [s.warning() for s in stale]
    skewed = skew_warning(report, source)
    if skewed:
        warnings.append(skewed)
    warnings += pollution_warnings(report)
    unscoped = [sid for t in (report["tests"] if report else {}).values()
                for sid, s in (t.get("subtests") or {}).items() if s.get("unscoped")]
    if unscoped:
        warnings.append(f"{len(unscoped)} subtest(s) were reported after their test ended (unittest before Python 3.11):"
                        f" their tiers and EP uses are counted for their test only: {listing(unscoped)}")
    unattributed = list(report.get("unattributed_sdpa", [])) if report else []
    if unattributed:
        warnings.append(f"{len(unattributed)} SdpaKernel token(s) printed while no session that asked for the CUDA EP "
                        f"was running were not counted ({', '.join(sorted(set(unattributed)))})")
    return Verdict(Status.FAIL if reasons else Status.PASS, reasons, warnings, counts, census(tests), libraries,
                   found.coverage, {t.nodeid: t.outcome for t in tests}, {t.nodeid: t.reruns for t in tests if t.reruns},
                   stale, found.tier_breaks, judged(expect.known_flaky, tests)[2], ep, ReadCensus.of(report))


def with_reasons(verdict: Verdict, reasons: list[str]) -> Verdict:
    """The verdict with more reasons of its own (what a carry could not give): each one fails it."""
    if not reasons:
        return verdict
    return dataclasses.replace(verdict, status=Status.FAIL, reasons=[*verdict.reasons, *reasons])


def not_stale_for(verdict: Verdict, left_out: Sequence[str]) -> Verdict:
    """The verdict of a run that left tests out (a teeth's cut, knowncut.py): a rule that covers one of them matched
    nothing because that test did not run, which says nothing of the rule, so it is not called stale."""
    if not left_out:
        return verdict
    kept = [s for s in verdict.stale_rules if not any(covers(s.pattern, n) for n in left_out)]
    gone = {s.warning() for s in verdict.stale_rules if s not in kept}
    return dataclasses.replace(verdict, stale_rules=kept, warnings=[w for w in verdict.warnings if w not in gone])


def scoped(verdict: Verdict, scope: str, selected: int | None) -> Verdict:
    """The verdict of a teeth run with the scope it ran under recorded (the judging itself is the same)."""
    coverage = dataclasses.replace(verdict.teeth_coverage or TeethCoverage(), scope=scope, selected=selected)
    return dataclasses.replace(verdict, teeth_coverage=coverage)


def refused(reason: str, scope: str) -> Verdict:
    """A teeth run that was not started, because what it needs is missing: a FAIL that says why."""
    return Verdict(Status.FAIL, [reason], [], Counts(), Dispatch(), Libraries(), TeethCoverage(scope=scope))


def outcome_judge(mode: str) -> OutcomeJudge:
    """How a mode's outcomes are judged: teeth by its canary and require_cudnn's census, the others by their
    counts alone (they are handed the census as every mode's judge is, and read none of it)."""
    if Mode(mode) is Mode.TEETH:
        return judge_teeth
    return lambda expect, tests, counts, _census: judge_counts(expect, tests, counts)
