"""Where a run's witnesses disagree: none of them, least of all pytest's exit code, is trusted alone.

pytest exits 0 when every test skipped, a report can be edited by the tests it describes, and junit
counts on its own; a run passes only when the exit code, the probe's report, its digest and junit
tell the same story, and each reason here names both sides.
"""
from __future__ import annotations

from dataclasses import dataclass

from ort_matrix_probe.schema import ProbeReport

from ..execute.junit import JunitCounts
from .counts import Counts, TestResult
from .outcomes import listing
from .subtests import junit_counts, summary_counts

SUMMARY_KEYS = {"passed", "failed", "skipped", "error", "xfailed", "xpassed", "subtests passed"}
EXIT_MEANING = {
    2: "pytest was interrupted (exit 2): a collection error or Ctrl-C stopped the run",
    3: "pytest hit an internal error (exit 3)",
    4: "pytest was called wrongly (exit 4, usage error): check suite.pytest_args and the posargs",
    5: "nothing was collected (pytest exit 5): the suite's files hold no tests pytest can find",
    6: "pytest failed the run for too many warnings (exit 6, pytest >= 9.1)",
}


@dataclass(frozen=True)
class Evidence:
    """Every independent witness of one run. A run passes only if they agree."""

    exit_code: int | None  # None: the harness stopped the run
    report: ProbeReport | None
    report_sha256: str | None  # of the report file as read
    report_problem: str | None  # the report file exists but is not a report this engine reads
    digest: str | None  # the sha256 the probe sent through its pipe
    junit: JunitCounts | None
    junit_problem: str | None
    collected: int | None  # from the probe's progress file, for runs that wrote no report
    stopped: str | None = None
    running: tuple[str, ...] = ()
    meant_env: dict[str, str] | None = None  # what the harness and the suite set for the test process
    summary: dict[str, int] | None = None  # pytest's own summary line, counted (execute/summary.py)
    dropped: int = 0  # node ids the engine told the probe not to run (carried, or left out by teeth)


def env_reasons(meant: dict[str, str] | None, report: ProbeReport) -> list[str]:
    """A variable the harness or the suite set that the test process did not have as set: its run is not the
    run the config describes (a suite's CUDA_VISIBLE_DEVICES = "" that never arrived ran on the GPU)."""
    envs = report.get("envs") or ({"the test process": report["env"]} if isinstance(report.get("env"), dict) else {})
    if not meant or not envs:
        return []
    wrong = [f"{name}={value!r} ({process} had {'it unset' if seen[name] is None else repr(seen[name])})"
             for process, seen in sorted(envs.items()) if isinstance(seen, dict)
             for name, value in sorted(meant.items()) if name in seen and seen[name] != value]
    return [f"the environment set for the test process did not reach it: {listing(wrong)}"] if wrong else []


def summary_reasons(summary: dict[str, int], tests: list[TestResult], quiet: bool) -> list[str]:
    """Where pytest's summary line and the probe disagree, in the summary's own categories. A test whose worker
    crashed is one pytest's line may count either way, so a run with one is not checked here (it fails anyway)."""
    if any(t.message.startswith("worker crashed") for t in tests):
        return []
    mine = summary_counts(tests, quiet)
    sides = [(name, mine.get(name, 0), summary.get(name, 0)) for name in sorted({*mine, *summary} & SUMMARY_KEYS)
             if mine.get(name, 0) != summary.get(name, 0)]
    if not sides:
        return []
    listed = "; ".join(f"{name}: the probe {a}, pytest {b}" for name, a, b in sides)
    return [f"the probe's report and pytest's summary line disagree ({listed})"]


def _pytest_exit(code: int, reasons: list[str]) -> None:
    if code in EXIT_MEANING:
        reasons.append(EXIT_MEANING[code])
    elif code not in (0, 1):
        reasons.append(f"pytest ended with unexpected exit code {code}")


def cross_checks(ev: Evidence, tests: list[TestResult], counts: Counts) -> list[str]:
    """Where the witnesses disagree. Each reason names both sides."""
    reasons = []
    report = ev.report
    if ev.stopped:
        running = f"; running: {listing(list(ev.running))}" if ev.running else ""
        reasons.append(f"{ev.stopped}{running}")
    elif ev.exit_code is not None:
        _pytest_exit(ev.exit_code, reasons)
    if ev.report_problem:
        reasons.append(ev.report_problem)
        return reasons
    if report is None:
        reasons.append("the ort-matrix probe wrote no report: pytest never reached the end of its session (see the log)")
        return reasons
    if ev.digest is None:
        reasons.append("the probe sent no digest of its report, so the report cannot be trusted")
    elif ev.digest != ev.report_sha256:
        reasons.append("the probe's report was changed after the probe wrote it (its sha256 is not the one the "
                       "probe sent): the tests' own code edited it")
    said = report.get("exitstatus")
    late_warnings_limit = ev.exit_code == 6 and said == 0  # pytest >= 9.1 applies --max-warnings after the session
    if ev.exit_code is not None and said != ev.exit_code and not late_warnings_limit:
        reasons.append(f"the probe's report says pytest exited {report.get('exitstatus')}, "
                       f"but the process exited {ev.exit_code}")
    failing = counts.failed + counts.errors + counts.subtests_failed  # a test may skip after a failing subtest
    if ev.exit_code == 1 and failing == 0:
        reasons.append("pytest exited 1 but no failure was recorded")
    elif ev.exit_code == 0 and failing:
        reasons.append(f"pytest exited 0 but {failing} failure(s) or error(s) were recorded")
    reasons += env_reasons(ev.meant_env, report)
    if ev.summary is not None and ev.exit_code in (0, 1) and not ev.stopped:
        reasons += summary_reasons(ev.summary, tests, report.get("subtests_verbosity") == 0)
    with_outcome = len([t for t in report.get("tests", {}).values() if t.get("outcome")])
    if counts.collected > with_outcome:
        reasons.append(f"{counts.collected} collected, {with_outcome} with an outcome")
    if ev.junit_problem:
        reasons.append(ev.junit_problem)
    elif ev.junit is not None:
        failures, errors, skipped = junit_counts(tests)  # subtests included, each test as pytest called it
        sides = [(name, mine, theirs) for name, mine, theirs in (
            ("failed", failures, ev.junit.failures), ("errors", errors, ev.junit.errors),
            ("skipped or xfailed", skipped, ev.junit.skipped)) if mine != theirs]
        if sides:
            listed = "; ".join(f"{name}: the probe {mine}, junit {theirs}" for name, mine, theirs in sides)
            reasons.append(f"the probe's report and pytest's junit file disagree ({listed})")
    return reasons
