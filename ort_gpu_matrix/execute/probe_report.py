"""The probe's report, read and checked before anything judges it: the file is written inside the test process.

A test can write anything anywhere, the report's path included, so the engine reads it as untrusted
input: its shape, its version and every entry the verdict will read are checked here, and a report
that fails is a problem of the run (never a crash of the engine, never a green).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ort_matrix_probe.epcensus import KINDS
from ort_matrix_probe.isolation import MODES as ISOLATIONS
from ort_matrix_probe.schema import READS_REPORTS, ProbeReport

# The report's top-level keys and their JSON types: anything else is not a report this engine reads.
_REPORT_SHAPE: dict[str, type | tuple[type, ...]] = {
    "report_version": int, "exitstatus": int, "duration_s": (int, float), "collected": dict, "tests": dict,
    "collection": list, "audits": list, "outside_tests_sdpa": list, "unattributed_sdpa": list, "provenance": dict,
    "isolation": str, "pollution": list}


def report_problem(report: object) -> str | None:
    """Why `report` cannot be judged, or None: the file is written inside the test process, so it is checked."""
    if not isinstance(report, dict):
        return "the probe's report is not a JSON object"
    for key, kind in _REPORT_SHAPE.items():
        if not isinstance(report.get(key), kind):
            return f"the probe's report is malformed: {key!r} is missing or has the wrong type"
    if report["report_version"] not in READS_REPORTS:
        return (f"the probe's report has report_version {report['report_version']}, this engine reads "
                f"{', '.join(map(str, READS_REPORTS))}")
    for nodeid, entry in report["tests"].items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sdpa"), list)
                and isinstance(entry.get("message"), str) and entry.get("outcome") in _OUTCOMES):
            return f"the probe's report is malformed: the entry of {nodeid!r}"
        if not isinstance(entry.get("ep", []), list) or not all(_ep_use(u) for u in entry.get("ep", [])):
            return f"the probe's report is malformed: the EP census of {nodeid!r}"
    for key, needed in (("audits", ("by_name", "cudnn_copies")), ("collection", ("nodeid", "outcome", "message"))):
        if not all(isinstance(e, dict) and all(k in e for k in needed) for e in report[key]):
            return f"the probe's report is malformed: an entry of {key!r}"
    if report["isolation"] not in ISOLATIONS:
        return f"the probe's report is malformed: 'isolation' is {report['isolation']!r}, not one of {ISOLATIONS}"
    if not all(_pollution_entry(e) for e in report["pollution"]):
        return "the probe's report is malformed: an entry of 'pollution'"
    return None


def _pollution_entry(e: object) -> bool:
    """One polluter as the probe writes it (isolation.py); anything else in the file came from elsewhere."""
    def text_or_none(v: object) -> bool:
        return v is None or isinstance(v, str)

    return (isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("test", "scope", "process"))
            and isinstance(e.get("undone"), bool) and isinstance(e.get("later_tests"), int)
            and not isinstance(e.get("later_tests"), bool) and isinstance(e.get("changes"), list)
            and all(isinstance(c, dict) and isinstance(c.get("what"), str) and isinstance(c.get("name"), str)
                    and text_or_none(c.get("before")) and text_or_none(c.get("after")) for c in e["changes"]))


def _ep_use(u: object) -> bool:
    """One CUDA-asking session as the probe's census writes it (epcensus.py)."""
    def names(v: object) -> bool:
        return isinstance(v, list) and all(isinstance(x, str) for x in v)

    return (isinstance(u, dict) and isinstance(u.get("session"), int) and names(u.get("asked"))
            and names(u.get("served")) and isinstance(u.get("runs"), dict)
            and all(isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 0
                    for k, n in u["runs"].items())
            and u.get("fallback", KINDS[0]) in KINDS
            and all(isinstance(u.get(k, ""), str) for k in ("reason", "error")))


_OUTCOMES = (None, "passed", "failed", "skipped", "error", "xfailed", "xpassed")


def read_report(path: Path) -> tuple[ProbeReport | None, str | None, str | None]:
    """The report, the sha256 of its bytes, and why it cannot be judged (if it cannot)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None, None, None
    try:
        report = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, hashlib.sha256(data).hexdigest(), "the probe's report is not valid JSON"
    problem = report_problem(report)
    return (None if problem else report), hashlib.sha256(data).hexdigest(), problem
