"""A bisect's record: what it followed, over which builds, every step it ran, and what it located.

Written after every step (bisect.json beside the steps' results), so Ctrl-C keeps the steps done and
`--resume` goes on from them: it replays the stored verdicts instead of running those builds again. The
file is versioned as results are, and read back with every field checked, so a resume never builds on a
file it half understands.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..plan.bisection import VERDICTS, BisectGroup, StepRun, groups, replayed
from ..plan.builds import Build
from ..util.errors import UserError
from ..util.fs import write_json

BISECT_VERSION = 1
FILE = "bisect.json"


class RecordError(UserError):
    """A bisect.json that cannot be resumed from; the message names the file and the fix."""


@dataclass
class Bisection:
    """`followed`: the tests, each with the change the sweep saw (`before -> after`, or `--tests`). `steps`: in the
    order they ran, the two ends first. `groups` and `left`: filled when the walk ends; `interrupted`: it did not."""

    cell: str
    mode: str
    source: str  # "regressions", "improvements" or "--tests REGEX"
    followed: dict[str, str]
    builds: list[Build]
    steps: list[StepRun] = field(default_factory=list)
    groups: list[BisectGroup] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)  # tests halving could not place, with why
    problem: str | None = None  # why it could not start or go on (an end that is not what it must be)
    interrupted: bool = False
    whole_suite_s: float | None = None  # one whole-suite run of the mode, from the cell's last stored result
    version: int = BISECT_VERSION

    @property
    def located(self) -> bool:
        return (self.problem is None and not self.interrupted and not self.left and bool(self.groups)
                and all(g.located for g in self.groups))

    @property
    def step_seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def saved_seconds(self) -> float | None:
        """Against running the whole suite on every build: what a sweep per build would have cost, less this."""
        if self.whole_suite_s is None:
            return None
        return len(self.builds) * self.whole_suite_s - self.step_seconds

    def to_dict(self) -> dict[str, Any]:
        return {"bisect_version": self.version, "cell": self.cell, "mode": self.mode, "source": self.source,
                "followed": self.followed, "builds": [b.to_dict() for b in self.builds],
                "steps": [s.to_dict() for s in self.steps],
                "groups": [{"tests": list(g.tests), "last_good": self.builds[g.last_good].version,
                            "first_bad": self.builds[g.first_bad].version,
                            "untested": [self.builds[i].version for i in g.untested], "located": g.located}
                           for g in self.groups],
                "left": self.left, "problem": self.problem, "interrupted": self.interrupted,
                "located": self.located, "step_seconds": round(self.step_seconds, 3),
                "whole_suite_s": self.whole_suite_s,
                "saved_seconds": None if self.saved_seconds is None else round(self.saved_seconds, 3)}

    def save(self, where: Path) -> Path:
        path = where / FILE
        write_json(path, self.to_dict())
        return path


def _build(d: Any) -> Build:
    if not (isinstance(d, dict) and isinstance(d.get("version"), str)):
        raise ValueError(f"a build must be an object with a version, not {d!r}")
    return Build(d["version"], d.get("requirement"), d.get("wheel"))


def _step(d: Any, builds: list[Build]) -> StepRun:
    if not isinstance(d, dict):
        raise ValueError(f"a step must be an object, not {d!r}")
    index = d["index"]
    if not (isinstance(index, int) and 0 <= index < len(builds)) or _build(d["build"]) != builds[index]:
        raise ValueError(f"step {d.get('index')!r} names no build of this bisect")
    verdicts = d["verdicts"]
    if not (isinstance(verdicts, dict) and all(v in VERDICTS for v in verdicts.values())):
        raise ValueError(f"step {index}: verdicts must be {', '.join(VERDICTS)}")
    return StepRun(index, builds[index], tuple(d["tests"]), dict(verdicts), dict(d.get("lines") or {}),
                   d.get("skipped"), float(d.get("seconds") or 0), list(d.get("run_ids") or []))


def load(where: Path) -> Bisection:
    """The saved bisect in `where`, whole: its steps as stored, its groups found again from them (so a record
    renders again exactly as it was written), its problem and whether it was interrupted."""
    path = where / FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RecordError(f"{path}: no bisect to resume here; fix: run it without --resume first") from None
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: cannot be read ({exc}); fix: run the bisect again without --resume") from None
    if not isinstance(data, dict) or data.get("bisect_version") != BISECT_VERSION:
        raise RecordError(f"{path}: bisect_version {data.get('bisect_version') if isinstance(data, dict) else None!r} "
                          f"is not {BISECT_VERSION}; fix: run the bisect again without --resume")
    try:
        builds = [_build(b) for b in data["builds"]]
        steps = [_step(s, builds) for s in data["steps"]]
        record = Bisection(str(data["cell"]), str(data["mode"]), str(data["source"]), dict(data["followed"]),
                           builds, steps, problem=data.get("problem"), interrupted=bool(data.get("interrupted")),
                           whole_suite_s=data.get("whole_suite_s"))
        if data.get("groups") or data.get("left"):  # a walk that ended: its groups, from the steps that made them
            record.groups, record.left = groups(replayed(len(builds), sorted(record.followed), steps))
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"{path}: is not a well-formed bisect ({exc}); fix: run the bisect again without "
                          "--resume") from None
    return record
