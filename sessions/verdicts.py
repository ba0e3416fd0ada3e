"""Judge a run by what it counted and what it observed, never by its exit code alone.

pytest exits 0 when every test skipped and a correct MATH fallback gives the
same numbers as cuDNN, so a verdict here asks: did enough pass, was every skip
and failure expected, which kernels ran, and which libraries served them.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .matrix import Expect, Rule

CUDNN = "CUDNN_FLASH_ATTENTION"
EXIT_MEANING = {
    2: "pytest was interrupted (exit 2): a collection error or Ctrl-C stopped the run",
    3: "pytest hit an internal error (exit 3)",
    4: "pytest was called wrongly (exit 4, usage error): check suite.pytest_args and the posargs",
    5: "nothing was collected (pytest exit 5): the suite's files hold no tests pytest can find",
    6: "pytest failed the run for too many warnings (exit 6, pytest >= 9.1)",
}
LISTED = 8  # how many offenders a reason names before it says "and N more"


@dataclass(frozen=True)
class TestResult:
    nodeid: str
    outcome: str  # passed failed skipped error xfailed xpassed
    message: str
    sdpa: tuple[str, ...]


@dataclass
class Verdict:
    verdict: str
    reasons: list[str]
    warnings: list[str]
    counts: dict[str, int]
    dispatch: dict[str, Any]
    libraries: dict[str, Any]
    teeth_coverage: dict[str, Any] | None = None


def tests_of(report: dict | None) -> list[TestResult]:
    if not report:
        return []
    out = []
    for nodeid, t in report.get("tests", {}).items():
        if t.get("outcome"):
            out.append(TestResult(nodeid, t["outcome"], t.get("message", ""), tuple(t.get("sdpa", []))))
        if t.get("teardown_error"):
            out.append(TestResult(nodeid + "::teardown", "error", t["teardown_error"], ()))
    for c in report.get("collection", []):
        out.append(TestResult(c["nodeid"], c["outcome"], c.get("message", ""), ()))
    return out


def count(report: dict | None, tests: list[TestResult]) -> dict[str, int]:
    c = Counter(t.outcome for t in tests)
    collected = len([n for n, t in (report or {}).get("tests", {}).items() if t.get("outcome")])
    return {"collected": collected, "passed": c["passed"], "failed": c["failed"], "errors": c["error"],
            "skipped": c["skipped"], "xfailed": c["xfailed"], "xpassed": c["xpassed"]}


def _matches(rules: tuple[Rule, ...], nodeid: str) -> bool:
    return any(re.search(r.test, nodeid) for r in rules)


def _listing(items: list[str]) -> str:
    shown = "; ".join(items[:LISTED])
    return shown + (f"; and {len(items) - LISTED} more" if len(items) > LISTED else "")


def first_line(message: str) -> str:
    return message.strip().splitlines()[0].strip() if message.strip() else ""


def census(tests: list[TestResult]) -> dict[str, Any]:
    """Every SdpaKernel token of every test, in order, with totals per tier."""
    per_test = {t.nodeid: list(t.sdpa) for t in tests if t.sdpa}
    tokens = Counter(tier for tiers in per_test.values() for tier in tiers)
    tests_per_tier = Counter(tier for tiers in per_test.values() for tier in set(tiers))
    return {"tests": per_test, "totals": dict(sorted(tokens.items())), "tests_per_tier": dict(sorted(tests_per_tier.items()))}


def _dispatch_rules(expect: Expect, tests: list[TestResult], reasons: list[str]) -> None:
    scope = [t for t in tests if expect.dispatch_tests is None or re.search(expect.dispatch_tests, t.nodeid)]
    if expect.require_kernel and not any(expect.require_kernel in t.sdpa for t in scope):
        seen = sorted({k for t in scope for k in t.sdpa}) or ["no SdpaKernel token at all"]
        reasons.append(f"no test dispatched {expect.require_kernel} (seen: {', '.join(seen)})")
    for kernel in expect.forbid_kernels:
        hits = [f"{t.nodeid} ran {kernel}" for t in scope if kernel in t.sdpa]
        if hits:
            reasons.append(f"{len(hits)} test(s) dispatched forbidden {kernel}: {_listing(hits)}")


def library_audit(report: dict | None, preload: tuple[str, ...], venv: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """What served the tests: mapped files, by-name resolution, where onnxruntime came from."""
    audits = (report or {}).get("audits", [])
    reasons: list[str] = []
    warnings: list[str] = []
    pinned = {"cudnn": next((p for p in preload if "/libcudnn" in p), None),
              "cudart": next((p for p in preload if "/libcudart" in p), None)}
    venv_real = os.path.realpath(venv)
    for a in audits:
        for lib, want in pinned.items():
            got = a.get("by_name", {}).get(lib, {})
            if want and got.get("file") != want:
                reasons.append(f"by-name {got.get('soname')} resolved to {got.get('file')} "
                               f"(version {got.get('version')}), not the pinned {want}")
        ort_file = a.get("onnxruntime_file")
        if ort_file and not ort_file.startswith(venv_real + os.sep):
            reasons.append(f"onnxruntime was imported from {ort_file}, not from the pairing's venv {venv_real} "
                           "(a source dir shadows the wheel)")
        copies = a.get("cudnn_copies", [])
        if len({c["file"] for c in copies}) > 1:
            listed = ", ".join(f"{c['file']} ({c['file_version'] or 'version unknown'})" for c in copies)
            warnings.append(f"{len(copies)} copies of cuDNN mapped in one test process: {listed}")
    summary = {"pinned": pinned, "audits": audits}
    return summary, sorted(set(reasons)), sorted(set(warnings))


def _pytest_exit(code: int, reasons: list[str]) -> None:
    if code in EXIT_MEANING:
        reasons.append(EXIT_MEANING[code])
    elif code not in (0, 1):
        reasons.append(f"pytest ended with unexpected exit code {code}")


def judge_counts(expect: Expect, tests: list[TestResult], counts: dict[str, int], reasons: list[str]) -> None:
    """normal and require_cudnn: enough passed, and every skip and failure was expected."""
    if counts["passed"] == 0:
        reasons.append("nothing passed" + (f" ({counts['skipped']} skipped)" if counts["skipped"] else ""))
    elif counts["passed"] < expect.min_passed:
        reasons.append(f"only {counts['passed']} passed, min_passed is {expect.min_passed}")
    bad_skips = [f"{t.nodeid}: {t.message}" for t in tests if t.outcome == "skipped"
                 and not any(re.search(p, t.message) for p in expect.allowed_skips)]
    if bad_skips:
        reasons.append(f"{len(bad_skips)} skip(s) not in allowed_skips: {_listing(bad_skips)}")
    bad = [f"{t.nodeid} {t.outcome}: {first_line(t.message)}" for t in tests
           if t.outcome in ("failed", "error") and not _matches(expect.known_failures, t.nodeid)]
    if bad:
        reasons.append(f"{len(bad)} unexpected failure(s): {_listing(bad)}")


def judge_teeth(expect: Expect, tests: list[TestResult], prior: dict | None, reasons: list[str],
                warnings: list[str]) -> dict[str, Any]:
    """teeth: the canary must bite, with exactly the verbatim message, and bite every cuDNN test."""
    bitten = {t.nodeid for t in tests if t.outcome == "failed" and first_line(t.message) == expect.message}
    other = [f"{t.nodeid} {t.outcome}: {first_line(t.message)}" for t in tests
             if t.outcome in ("failed", "error") and t.nodeid not in bitten
             and not _matches(expect.known_failures, t.nodeid)]
    failing = [t for t in tests if t.outcome in ("failed", "error")]
    if not failing:
        reasons.append("canary has no teeth: nothing failed with MATH forced")
    elif len(bitten) < expect.min_failures:
        reasons.append(f"{len(bitten)} test(s) failed with exactly {expect.message!r}, min_failures is {expect.min_failures}")
    if other:
        reasons.append(f"{len(other)} failure(s) other than the canary's: {_listing(other)}")
    coverage: dict[str, Any] = {"checked": False}
    if prior is None:
        warnings.append("teeth coverage not checked: no up-to-date require_cudnn result for this pairing")
        return coverage
    cudnn_tests = sorted(n for n, tiers in prior.get("dispatch", {}).get("tests", {}).items() if CUDNN in tiers)
    toothless = [n for n in cudnn_tests if n not in bitten]
    declared = [n for n in toothless if _matches(expect.known_toothless, n)]
    undeclared = [n for n in toothless if n not in declared]
    if undeclared:
        reasons.append(f"{len(undeclared)} toothless test(s): dispatched {CUDNN} in require_cudnn but did not fail "
                       f"with the verbatim message when MATH was forced: {_listing(undeclared)}")
    return {"checked": True, "cudnn_tests": len(cudnn_tests), "bitten": len(cudnn_tests) - len(toothless),
            "toothless": len(toothless), "declared_toothless": declared, "undeclared_toothless": undeclared}


def judge(mode: str, expect: Expect, exit_code: int, report: dict | None, preload: tuple[str, ...],
          venv: str, prior: dict | None = None) -> Verdict:
    tests = tests_of(report)
    counts = count(report, tests)
    reasons: list[str] = []
    warnings: list[str] = []
    _pytest_exit(exit_code, reasons)
    if report is None:
        reasons.append("the ort-matrix plugin wrote no report: pytest never reached the end of its session (see the log)")
    coverage = None
    if mode == "teeth":
        coverage = judge_teeth(expect, tests, prior, reasons, warnings)
    else:
        judge_counts(expect, tests, counts, reasons)
    _dispatch_rules(expect, tests, reasons)
    libraries, lib_reasons, lib_warnings = library_audit(report, preload, venv)
    reasons += lib_reasons
    warnings += lib_warnings
    return Verdict("fail" if reasons else "pass", reasons, warnings, counts, census(tests), libraries, coverage)
