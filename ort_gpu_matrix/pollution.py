"""Pollution as the engine keeps it: typed, from the probe's report, and the lines every form shows.

The probe (ort_matrix_probe/isolation.py) names each test or scope that left the watched process
state changed. Here that becomes a typed part of the Result, one warning per polluter on the
result, and one line per polluter for the reports and calibrate: `test_gqa.py::test_x left
ORT_DISABLE_FLASH_ATTENTION (unset) -> '1' (undone; 23 later test(s) of gw0 ran without it)`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ort_matrix_probe.schema import ProbeReport

LISTED = 8  # changes named in one line before "and N more"
UNKNOWN = "unknown"  # results and baselines from before isolation existed


@dataclass(frozen=True)
class StateChange:
    what: str  # env, cwd, ort_logger
    name: str
    before: str | None = None  # None: unset, or never set (ORT's default)
    after: str | None = None

    def text(self) -> str:
        label = {"env": self.name, "cwd": "the cwd", "ort_logger": f"ORT's default logger {self.name}"}.get(
            self.what, f"{self.what} {self.name}")
        return f"{label} {_value(self.before)} -> {_value(self.after)}"


@dataclass(frozen=True)
class Pollution:
    test: str  # the test's node id, or the class/module/session whose setup made the change
    scope: str  # function, class, module, package, session
    process: str
    changes: list[StateChange] = field(default_factory=list)
    undone: bool = False
    later_tests: int = 0

    def line(self) -> str:
        """One line: who, what changed, and what became of it."""
        who = self.test if self.scope == "function" else f"{self.test} (its {self.scope} setup)"
        shown = "; ".join(c.text() for c in self.changes[:LISTED])
        more = f"; and {len(self.changes) - LISTED} more" if len(self.changes) > LISTED else ""
        fate = (f"undone; {self.later_tests} later test(s) of {self.process} ran without it" if self.undone else
                f"not undone; {self.later_tests} later test(s) of {self.process} ran under it")
        return f"{who} left {shown}{more} ({fate})"


def _value(value: str | None) -> str:
    return "(unset)" if value is None else repr(value)


def of(report: ProbeReport | None) -> tuple[str, list[Pollution]]:
    """The isolation the run had and the polluters it named; (unknown, []) without a report."""
    if not report:
        return UNKNOWN, []
    found = []
    for e in report.get("pollution", []):
        changes = [StateChange(str(c.get("what", "")), str(c.get("name", "")), c.get("before"), c.get("after"))
                   for c in e.get("changes", [])]
        found.append(Pollution(str(e.get("test", "")), str(e.get("scope", "function")), str(e.get("process", "")),
                               changes, bool(e.get("undone")), int(e.get("later_tests", 0))))
    return str(report.get("isolation", UNKNOWN)), found


def warnings(report: ProbeReport | None) -> list[str]:
    """One warning per polluter, for the result's warnings."""
    return [f"pollution: {p.line()}" for p in of(report)[1]]
