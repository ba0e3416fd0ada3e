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

    def label(self) -> str:
        return {"env": self.name, "cwd": "the cwd", "ort_logger": f"ORT's default logger {self.name}"}.get(
            self.what, f"{self.what} {self.name}")

    def text(self) -> str:
        return f"{self.label()} {_value(self.before)} -> {_value(self.after)}"


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


GROUP_AT = 4  # polluters of one file that leave the same variables set become one line from this many on


def lines(polluters: list[Pollution]) -> list[str]:
    """The lines a report shows for one run's polluters: one per polluter, except that GROUP_AT or more tests
    of one file that each left the same variables (undone alike) share one line.

    Why: ORT's CUDA tests set ORT_DISABLE_FLASH_ATTENTION in every test, so a run of 125 tests names 125
    polluters that differ only in their node id; one line per file says the same, and the result keeps each.
    """
    groups: dict[tuple[str, str, tuple[tuple[str, str], ...], bool], list[Pollution]] = {}
    for p in polluters:
        file = p.test.split("::", 1)[0] if p.scope == "function" else p.test
        key = (file, p.scope, tuple(sorted((c.what, c.name) for c in p.changes)), p.undone)
        groups.setdefault(key, []).append(p)
    out = []
    for (file, _, names, undone), members in groups.items():
        if len(members) < GROUP_AT:
            out += [m.line() for m in members]
            continue
        what = []
        for what_, name in names:
            pairs = sorted({(_value(c.before), _value(c.after)) for m in members for c in m.changes
                            if (c.what, c.name) == (what_, name)})
            label = StateChange(what_, name).label()
            what.append(f"{label} {' | '.join(f'{b} -> {a}' for b, a in pairs[:LISTED])}"
                        + (f" | and {len(pairs) - LISTED} more" if len(pairs) > LISTED else ""))
        later = max(m.later_tests for m in members)
        fate = (f"undone each time; up to {later} later test(s) of a process ran without it" if undone else
                f"not undone; up to {later} later test(s) of a process ran under it")
        out.append(f"{file}: {len(members)} tests each left {'; '.join(what)} ({fate}; first: {members[0].test})")
    return out


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
    """One warning per polluter (or per file of many: lines), for the result's warnings; the result's
    `pollution` keeps every polluter."""
    return [f"pollution: {line}" for line in lines(of(report)[1])]
