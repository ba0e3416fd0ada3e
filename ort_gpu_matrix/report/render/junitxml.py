"""The sweep as one JUnit XML file for CI's test tabs: a testsuite per cell and mode, failing where the gate does.

GitHub's test-report actions, Azure Pipelines' PublishTestResults, GitLab and Jenkins show tests from JUnit XML.
pytest writes one file per mode run, but it knows nothing of verdicts, expectations or baselines, so its red is
not the gate's. This file is made from the report model alone (model.py: the results, the comparison, the gate),
so a sweep and `nox -s report` over many runners' artifacts write the same file for the same results:

- one testcase per test and per subtest of each mode run. One fails only where its mode's verdict blames it (an
  outcome no expectation accepted, or a test named in one of the verdict's reasons: a fallback, a forbidden
  kernel) and the gate counts that mode; under `--gate regressions` a mode failing as it failed in the baseline
  is skipped, "already failing";
- a known failure, a known flake, a declared toothless test or an allowed skip is skipped with its rule's reason,
  read from the matrix's expectations (a result keeps the kind, not the rule); teeth's bite is a pass;
- what a failing verdict holds against no test of its own (the counts, a witness, the audit) is the failure of one
  more testcase, `(verdict)`; a cell that could not run, a baseline mode that did not and an interrupted sweep
  each get one too. So the file has a failure or an error exactly when the gate is red;
- a regression against the baseline fails its test's testcase (a test gone since then gets one), or `(verdict)`
  where it names no test (a count, a library); improvements, tiers, the EPs that served a test and its fallbacks
  are properties of its testcase, the cell's libraries, versions and host of its testsuite.

Names are the session and the node id, sorted, so CI follows a test from run to run. Every string may come from
the code under test: escape.xml makes what XML cannot hold inert, and ElementTree escapes the markup.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ...compare.changes import Change, ChangeKind, show
from ...config.model import DispatchExpect, FlakyRule, PassExpect, Rule, TeethExpect
from ...judge.covers import rule_covers
from ...judge.eps import KIND_TEXT
from ...judge.expected import ALLOWED_SKIP, BITTEN, DECLARED_TOOTHLESS, KNOWN_FAILURE, KNOWN_FLAKY, SUBTESTS_EXPECTED
from ...judge.outcomes import FAILING, test_of
from ...store.baseline import library_summary
from ...store.results import Result
from ...util.escape import xml as inert
from ..model import Report
from ..states import EXPECTED, UNEXPECTED, state
from .summary import clip, tiers_text

Expectations = Mapping[str, Mapping[str, DispatchExpect]]  # cell -> mode -> what its suite expects there

VERDICT = "(verdict)"  # the testcase of what a mode's verdict or its changes hold against no test of its own
RUN = "(run)"  # the testcase of a cell or a mode that did not run
SWEEP = "(sweep)"  # the testsuite of the sweep's own failures: nothing ran, interrupted
PER_TEST = (ChangeKind.TEST, ChangeKind.TIER, ChangeKind.EP, ChangeKind.TEETH, ChangeKind.FLAKY)  # `test`: a node id
CARRIED = (ChangeKind.VERDICT, ChangeKind.COUNT)  # the sum of its tests' changes, where a test of the mode fails
PASSED, FAILURE, ERROR, SKIPPED = "passed", "failure", "error", "skipped"
ID_CHARS = "_.-[/:"  # besides letters and digits: a match preceded or followed by one (`::`, not `:`) is a longer id
BODY = 4000  # characters of one line of a failure's body


@dataclass(frozen=True)
class JunitCase:
    classname: str
    name: str
    result: str = PASSED  # FAILURE, ERROR or SKIPPED otherwise
    message: str = ""
    body: str = ""
    kind: str = ""  # the failure's type: unexpected, regression, verdict, could not run, did not run
    properties: tuple[tuple[str, str], ...] = ()


@dataclass
class JunitSuite:
    name: str
    cases: list[JunitCase] = field(default_factory=list)
    properties: list[tuple[str, str]] = field(default_factory=list)
    time: float = 0.0
    timestamp: str = ""
    hostname: str = ""
    out: str = ""  # system-out: the verdict, its reasons and warnings, whole


@dataclass(frozen=True)
class _Mode:
    """What one mode's testcases are decided with: is its failure the gate's, and what changed per test."""

    counted: bool  # the gate counts this mode's failure (under --gate regressions: not already failing)
    baseline: str
    expect: DispatchExpect | None
    blamed: frozenset[str]
    regressions: Mapping[str, list[Change]]
    improvements: Mapping[str, list[Change]]
    unplaced: list[Change]  # regressions of the mode that name no test
    carried: frozenset[str] = frozenset()  # tests whose outcomes the run carried from normal (drive/carry.py)


def names(reason: str, test: str) -> bool:
    """`reason` names `test` itself: not as the start of a longer id (a parameter, a subtest's description)."""
    start = reason.find(test)
    while start >= 0:
        end = start + len(test)
        before, after = reason[start - 1:start] if start else "", reason[end:end + 2]
        if not _id_char(before) and not (_id_char(after[:1]) and after[:1] != ":") and after not in (" [", " (", "::"):
            return True
        start = reason.find(test, start + 1)
    return False


def _id_char(c: str) -> bool:
    return bool(c) and (c.isalnum() or c in ID_CHARS)


def blamed(r: Result) -> set[str]:
    """The tests a failing verdict holds against: an outcome no expectation accepted, or named in a reason."""
    if r.passed:
        return set()
    return {t for t in r.outcomes if state(r, t)[0] == UNEXPECTED or any(names(x, t) for x in r.reasons)}


def _by_test(changes: Iterable[Change], r: Result) -> dict[str, list[Change]]:
    out: dict[str, list[Change]] = {}
    for c in changes:
        if c.cell == r.cell.name and c.mode == r.mode and c.kind in PER_TEST and c.test is not None:
            out.setdefault(c.test, []).append(c)
    return out


def _mode(report: Report, r: Result, rules: Expectations) -> _Mode:
    cmp = report.comparison
    regressions = cmp.regressions if cmp else []
    counting = report.failed if report.gate == "all" else report.new_failures
    unplaced = [c for c in regressions if c.cell == r.cell.name and c.mode == r.mode
                and not (c.kind in PER_TEST and c.test is not None)]
    return _Mode(any(x is r for x in counting), report.baseline_name or "", rules.get(r.cell.name, {}).get(r.mode),
                 frozenset(blamed(r)), _by_test(regressions, r), _by_test(cmp.improvements if cmp else [], r), unplaced,
                 frozenset(r.selection.carried) if r.selection else frozenset())


def _change(c: Change) -> str:
    return f"{c.kind}: {c.op + ': ' if c.op else ''}{show(c.before)} -> {show(c.after)}"


def accepted(expect: DispatchExpect | None, kind: str, test: str) -> str:
    """Why an expectation accepted a test, in its rule's words (the rule as the matrix has it now)."""
    if expect is None:
        return f"{kind} (this matrix no longer has the expectations it was judged by)"
    toothless = expect.known_toothless if isinstance(expect, TeethExpect) else ()
    by_kind: dict[str, tuple[str, Sequence[Rule | FlakyRule]]] = {
        KNOWN_FAILURE: ("known_failures", expect.known_failures), KNOWN_FLAKY: ("known_flaky", expect.known_flaky),
        DECLARED_TOOTHLESS: ("known_toothless", toothless)}
    rules = by_kind.get(kind)
    if rules is not None:
        key, listed = rules
        rule = next((x for x in listed if rule_covers(x, test)), None)
        return f"{kind}: {rule.reason} ({key} {rule.test!r})" if rule is not None else \
            f"{kind} (no {key} rule of this matrix matches it now)"
    if kind == ALLOWED_SKIP and isinstance(expect, PassExpect):
        return f"{kind}: its reason matched allowed_skips ({' | '.join(expect.allowed_skips)})"
    if kind == SUBTESTS_EXPECTED:
        return f"{kind}: it failed through its failing subtests alone, and each of them was expected"
    return kind


def _unexpected(r: Result, test: str, outcome: str) -> str:
    """Why a test no reason names is unexpected (its reason's listing was cut short, or it is a tier break)."""
    broke = next((b for b in r.tier_breaks if b.nodeid == test), None)
    if broke is not None:
        return f"broke tier rule {broke.rule!r} (only {', '.join(broke.only)}): dispatched {', '.join(broke.dispatched)}"
    cov = r.teeth_coverage
    if cov is not None and test in cov.undeclared_toothless:
        return f"toothless: dispatched {cov.tier} in require_cudnn but did not fail with the canary's message"
    return f"{outcome}, and no expectation accepts it"


def _test_properties(r: Result, test: str, m: _Mode, kind: str | None) -> tuple[tuple[str, str], ...]:
    props = [("outcome", r.outcomes.get(test, "gone"))]
    tiers = r.dispatch.tests.get(test)
    if tiers:
        props.append(("tiers", ", ".join(dict.fromkeys(tiers))))
    ep = r.ep.tests.get(test)
    if ep is not None:
        props.append(("ep", ", ".join(ep.served) or f"no run served ({ep.sessions} CUDA-asking session(s))"))
    props += [("fallback", f"asked for {', '.join(f.asked)}, served by {', '.join(f.served) or 'nothing'} "
                           f"({KIND_TEXT.get(f.kind, f.kind)}): {f.reason or 'no reason given'}"
               + (f" (allowed by allowed_fallbacks {f.allowed_by!r})" if f.allowed_by else ""))
              for f in r.ep.fallbacks if f.nodeid == test]
    if kind is not None:
        props.append(("expected", kind))
    if r.reruns.get(test):
        props.append(("reruns", str(r.reruns[test])))
    if r.selection is not None and r.selection.carried_from and test_of(test) in m.carried:
        props.append(("carried_from", r.selection.carried_from))  # not run in this mode: normal's outcome
    props += [("regression", _change(c)) for c in m.regressions.get(test, [])]
    props += [("improvement", _change(c)) for c in m.improvements.get(test, [])]
    return tuple(props)


def _test_case(r: Result, test: str, m: _Mode) -> JunitCase:
    outcome = r.outcomes.get(test, "gone")
    where, kind = state(r, test) if test in r.outcomes else (UNEXPECTED, None)
    props = _test_properties(r, test, m, kind)
    said = [x for x in r.reasons if names(x, test)]
    failed = ERROR if outcome == "error" else FAILURE
    regs = [f"regression against baseline {m.baseline}: {_change(c)}" for c in m.regressions.get(test, [])]
    if regs:
        return JunitCase(r.session, test, failed, regs[0], "\n".join(regs + said), "regression", props)
    if test in m.blamed:
        said = said or [_unexpected(r, test, outcome)]
        if m.counted:
            return JunitCase(r.session, test, failed, said[0], "\n".join(said), "unexpected", props)
        return JunitCase(r.session, test, SKIPPED, f"already failing in baseline {m.baseline} (--gate regressions): "
                         f"{said[0]}", properties=props)
    if kind == BITTEN:  # teeth's purpose: the canary's exact failure
        return JunitCase(r.session, test, properties=props)
    if where == EXPECTED and kind is not None:
        return JunitCase(r.session, test, SKIPPED, accepted(m.expect, kind, test), properties=props)
    if outcome in ("skipped", "xfailed"):
        why = "teeth does not judge skips" if r.mode == "teeth" and outcome == "skipped" else "not judged a failure"
        return JunitCase(r.session, test, SKIPPED, f"{outcome} ({why})", properties=props)
    if outcome in FAILING:  # a passing verdict accepted it: a result stored before it said which expectation did
        return JunitCase(r.session, test, SKIPPED, f"{outcome}, accepted by the mode's passing verdict",
                         properties=props)
    return JunitCase(r.session, test, properties=props)


def _verdict_case(r: Result, m: _Mode, cases: list[JunitCase]) -> JunitCase | None:
    """`(verdict)`: the verdict's reasons that name no test it blames, and the changes that name no test. Skipped
    where the mode was already failing (--gate regressions) and nothing else changed."""
    failing = [c.name for c in cases if c.result in (FAILURE, ERROR)]
    carriers = [*failing, *m.blamed]
    loose = [x for x in r.reasons if not any(names(x, t) for t in carriers)]
    if not r.passed and not carriers and not loose:
        loose = [f"the verdict is {r.verdict.value}"]
    changes = [f"regression against baseline {m.baseline}: {_change(c)}" for c in m.unplaced
               if not (failing and c.kind in CARRIED)]
    if not m.counted and not changes:
        return JunitCase(r.session, VERDICT, SKIPPED, f"already failing in baseline {m.baseline} (--gate regressions):"
                         f" {loose[0]}") if loose else None
    lines = (loose if m.counted else []) + changes
    if not lines:
        return None
    crashed = r.stopped is not None or r.pytest_exit_code is None or r.pytest_exit_code < 0 or r.pytest_exit_code in (2, 3)
    kind = "verdict" if m.counted and loose else "regression"
    return JunitCase(r.session, VERDICT, ERROR if crashed and kind == "verdict" else FAILURE, lines[0],
                     "\n".join(lines), kind)


def _suite_properties(report: Report, r: Result) -> list[tuple[str, str]]:
    p, lib = r.provenance, library_summary(r)
    props = [("cell", r.cell.name), ("mode", r.mode), ("verdict", r.verdict.value), ("host", r.host or "?"),
             ("python", p.python or r.cell.python), ("ort", r.cell.ort), ("ort_version", p.wheel_version or "unknown"),
             ("torch", r.cell.torch), ("torch_version", p.torch["version"] if p.torch else "none"),
             ("libs", r.cell.libs), ("suite", r.cell.suite), ("tiers", tiers_text(r)), ("run_id", r.run_id),
             ("gate", report.gate)]
    if report.baseline_name:
        props.append(("baseline", report.baseline_name))
    if r.gpu:
        props.append(("gpu", ", ".join(f"{k} {v}" for k, v in sorted(r.gpu.items()) if v)))
    props += [(f"pinned_{k}", v) for k, v in sorted(lib["pinned"].items())]
    props += [(key, "; ".join(lib[key])) for key in ("cudnn_by_name", "cudart_by_name", "cudnn_copies") if lib[key]]
    sel = r.selection
    if sel is not None and not sel.full:  # what the mode did not run: carried from normal, or left out by teeth
        props += [("selection", sel.why), *([("carried", f"{len(sel.carried)} from {sel.carried_from}")]
                                           if sel.carried else []),
                  *([("left_out", str(len(sel.left_out)))] if sel.left_out else [])]
    return props


def mode_suite(report: Report, r: Result, rules: Expectations) -> JunitSuite:
    m = _mode(report, r, rules)
    gone = [t for t in m.regressions if t not in r.outcomes]
    cases = [_test_case(r, t, m) for t in sorted([*r.outcomes, *gone])]
    verdict = _verdict_case(r, m, cases)
    out = [f"verdict {r.verdict.value.upper()}", *(f"reason: {x}" for x in r.reasons),
           *(f"warning: {w}" for w in r.warnings)]
    return JunitSuite(r.session, cases + ([verdict] if verdict else []), _suite_properties(report, r), r.duration_s,
                      r.started, r.host, "\n".join(out))


def gate_suites(report: Report) -> list[JunitSuite]:
    """What fails the gate beyond the modes that ran: cells that could not run, baseline modes that did not, and
    the sweep's own end; cells this host cannot run, skipped."""
    out = [JunitSuite(cell, [JunitCase(cell, RUN, ERROR, f"could not run: {why}", why, "could not run")],
                      [("cell", cell)]) for cell, why in sorted(report.errors.items())]
    out += [JunitSuite(cell, [JunitCase(cell, RUN, SKIPPED, f"not run: this host cannot run it: {why}")],
                       [("cell", cell)]) for cell, why in sorted(report.skipped.items())]
    for c in report.comparison.missing if report.comparison else []:
        session = f"{c.cell}-{c.mode}"
        said = f"in baseline {report.baseline_name} ({show(c.before)}), {show(c.after)}"
        case = JunitCase(session, RUN, SKIPPED, f"{said} (allowed by --allow-missing)") if report.allow_missing else \
            JunitCase(session, RUN, FAILURE, said, said, "did not run")
        out.append(JunitSuite(session, [case], [("cell", c.cell), ("mode", c.mode or "")]))
    own = [JunitCase(SWEEP, "(nothing ran)", FAILURE, "nothing ran", kind="nothing ran")] if not report.results else []
    if report.interrupted:
        said = f"the sweep was interrupted ({report.interrupted}): what had not finished did not run"
        own.append(JunitCase(SWEEP, "(interrupted)", ERROR, said, said, "interrupted"))
    return out + ([JunitSuite(SWEEP, own)] if own else [])


def suites(report: Report, rules: Expectations) -> list[JunitSuite]:
    """Every testsuite of the file, sorted by name: the modes that ran, then what did not."""
    ran = [mode_suite(report, r, rules) for r in sorted(report.results, key=lambda r: r.session)]
    return ran + gate_suites(report)


def _tally(cases: list[JunitCase]) -> dict[str, str]:
    return {"tests": str(len(cases)), **{f"{k}s" if k != SKIPPED else k: str(sum(c.result == k for c in cases))
                                         for k in (FAILURE, ERROR, SKIPPED)}}


def _properties(parent: ET.Element, props: Iterable[tuple[str, str]]) -> None:
    listed = list(props)
    if listed:
        holder = ET.SubElement(parent, "properties")
        for name, value in listed:
            ET.SubElement(holder, "property", name=inert(name), value=inert(clip(value, BODY)))


def _case(parent: ET.Element, c: JunitCase) -> None:
    el = ET.SubElement(parent, "testcase", classname=inert(c.classname), name=inert(c.name), time="0")
    _properties(el, c.properties)
    if c.result == PASSED:
        return
    outcome = ET.SubElement(el, c.result, message=inert(clip(c.message)))
    if c.result != SKIPPED:
        outcome.set("type", c.kind or c.result)
        outcome.text = inert("\n".join(clip(line, BODY) for line in c.body.split("\n")), lines=True)


def render(report: Report, rules: Expectations) -> str:
    """The whole file, as text: `<testsuites>` holding every testsuite."""
    found = suites(report, rules)
    every = [c for s in found for c in s.cases]
    root = ET.Element("testsuites", {"name": "ort-gpu-matrix", **_tally(every),
                                     "time": f"{sum(s.time for s in found):.3f}"})
    for s in found:
        el = ET.SubElement(root, "testsuite", {"name": inert(s.name), **_tally(s.cases), "time": f"{s.time:.3f}"})
        for attr, value in (("timestamp", s.timestamp), ("hostname", s.hostname)):
            if value:
                el.set(attr, inert(value))
        _properties(el, s.properties)
        for c in s.cases:
            _case(el, c)
        if s.out:
            ET.SubElement(el, "system-out").text = inert("\n".join(clip(x, BODY) for x in s.out.split("\n")), lines=True)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
