"""Outcomes per test, and the one JSON report the engine judges.

pytest's own exit code says nothing about skips, and its junit file nothing
about kernels, so the probe keeps its own record: one entry per test with its
outcome, its first failure line, the tiers its runs printed, and the EPs that served its
CUDA-asking sessions (epcensus.py).
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

from .envreads import ENV_READS_PROP
from .schema import CollectionEntry, ProbeReport, SubtestEntry, TestEntry

# what travels on a test's reports as user_properties (so xdist brings it to the controller): on its teardown
# report its tiers, injections, tiers printed while only CPU sessions ran and EP uses; on a subtest's report
# the subtest's id, tiers and EP uses, made where it ran
SDPA_PROP = "ort_matrix.sdpa"
INJECT_PROP = "ort_matrix.injections"
UNATTRIBUTED_PROP = "ort_matrix.unattributed"
EP_PROP = "ort_matrix.ep"
SUBTEST_PROP = "ort_matrix.subtest"


def message_of(report: Any) -> str:
    """The line a person reads first: a skip reason, or the crash message of a failure."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return re.sub(r"^Skipped: ", "", str(longrepr[2]))
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return str(crash.message)
    text = str(longrepr or "").strip().splitlines()
    return text[-1] if text else ""


def crashed(nodeid: str) -> str:
    """The message of a test whose process died under it (pytest-xdist reports it with when='???')."""
    return f"worker crashed running {nodeid}"


def _subtest(entry: TestEntry, report: Any, prop: dict[str, Any]) -> None:
    """One subtest's report, kept under its test with the id, tiers and EP uses the process that ran it gave."""
    wasxfail = hasattr(report, "wasxfail")
    if report.failed:
        outcome, message = "failed", message_of(report)
    elif report.skipped:
        outcome, message = ("xfailed", str(report.wasxfail)) if wasxfail else ("skipped", message_of(report))
    else:
        outcome, message = "passed", ""
    sub: SubtestEntry = {"outcome": outcome, "message": message, "sdpa": list(prop.get("sdpa") or []),
                         "duration_s": round(getattr(report, "duration", 0.0), 4)}
    if prop.get("ep"):
        sub["ep"] = list(prop["ep"])
    if prop.get("scoped") is False:
        sub["unscoped"] = True
    entry.setdefault("subtests", {})[str(prop.get("id"))] = sub


def failed_by_subtests(n: int) -> str:
    """A test's message when its failing subtests are what failed it (pytest's words)."""
    return f"contains {n} failed subtest{'s' if n != 1 else ''}"


def settle(entry: TestEntry, pytest_said: str | None) -> None:
    """Once a test's last report is in: a test with a failing subtest is failed, and where pytest called it
    something else (a unittest test under pytest 9 reads passed) what pytest said is kept beside it, since
    junit counts it pytest's way. `pytest_said` is the call report's outcome as pytest left it."""
    failing = [s for s in (entry.get("subtests") or {}).values() if s["outcome"] == "failed"]
    own = entry.get("outcome")
    if failing and (own in ("passed", "xpassed", "skipped") or entry.get("message") == failed_by_subtests(len(failing))):
        entry["outcome"], entry["message"], entry["by_subtests"] = "failed", failed_by_subtests(len(failing)), True
    said = {"passed": "passed", "failed": "failed", "skipped": "skipped"}.get(pytest_said or "")
    if said and entry.get("outcome") in ("passed", "failed") and said != entry.get("outcome"):
        entry["pytest_outcome"] = said


def record(tests: dict[str, TestEntry], report: Any) -> None:
    """Fold one phase report (setup, call or teardown) into its test's entry; a subtest's into its own."""
    entry = tests.setdefault(report.nodeid, {"outcome": None, "message": "", "sdpa": [], "duration_s": 0.0})
    prop = next((value for name, value in report.user_properties if name == SUBTEST_PROP), None)
    if isinstance(prop, dict):
        _subtest(entry, report, prop)
        return
    if report.when in ("setup", "call"):  # the process that ran it: an xdist worker's id, or this one
        entry["process"] = str(getattr(getattr(getattr(report, "node", None), "gateway", None), "id", None)
                               or "controller")
    entry["duration_s"] = round(entry["duration_s"] + getattr(report, "duration", 0.0), 4)
    wasxfail = hasattr(report, "wasxfail")
    if getattr(report, "outcome", None) == "rerun":  # pytest-rerunfailures: a failed attempt, tried again
        entry["reruns"] = entry.get("reruns", 0) + 1
        failing = [f"{sid}: {s['message']}" for sid, s in (entry.pop("subtests", None) or {}).items()
                   if s["outcome"] == "failed"]  # that attempt's subtests go with it: the next attempt reports its own
        entry["rerun_messages"] = [*entry.get("rerun_messages", []), *(failing or [message_of(report)])][-3:]
        return
    if report.when not in ("setup", "call", "teardown"):
        if report.failed:  # xdist's crashed-worker report: the test has no outcome of its own
            entry["outcome"] = "error"
            entry["message"] = f"{crashed(report.nodeid)} ({message_of(report)})"
    elif report.when in ("setup", "call") and report.skipped:
        entry["outcome"] = "xfailed" if wasxfail else "skipped"
        entry["message"] = str(report.wasxfail) if wasxfail else message_of(report)
    elif report.when in ("setup", "call") and report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["message"] = message_of(report)
    elif report.when == "call":
        entry["outcome"] = "xpassed" if wasxfail else "passed"
    elif report.when == "teardown":
        if report.failed:
            entry["teardown_error"] = message_of(report)
        for name, value in report.user_properties:
            if name == SDPA_PROP:
                entry["sdpa"] = list(value)
            elif name == INJECT_PROP:
                entry["injections"] = int(value)
            elif name == UNATTRIBUTED_PROP and value:
                entry["unattributed"] = list(value)
            elif name == EP_PROP and value:
                entry["ep"] = list(value)
            elif name == ENV_READS_PROP and value:
                entry["env_reads"] = sorted(set(entry.get("env_reads", [])) | set(value))


def collection_entry(report: Any) -> CollectionEntry | None:
    if report.failed:
        return {"nodeid": report.nodeid, "outcome": "error", "message": message_of(report)}
    if report.skipped:
        return {"nodeid": report.nodeid, "outcome": "skipped", "message": message_of(report)}
    return None


def write(path: str, report: ProbeReport) -> bytes:
    """Beside the target, then renamed: the engine never reads half a report. Returns the bytes written."""
    data = json.dumps(report, indent=1, default=repr).encode()
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return data
