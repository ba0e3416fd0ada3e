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

from ..plan.bisection import BisectGroup, StepRun, groups, replayed
from ..plan.builds import Build
from ..util import codec
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

    def as_stored(self) -> _BisectJSON:
        saved = self.saved_seconds
        return _BisectJSON(
            self.version, self.cell, self.mode, self.source, self.followed, self.builds, self.steps,
            [_GroupJSON(list(g.tests), self.builds[g.last_good].version, self.builds[g.first_bad].version,
                        [self.builds[i].version for i in g.untested], g.located) for g in self.groups],
            self.left, self.problem, self.interrupted, self.located, round(self.step_seconds, 3), self.whole_suite_s,
            None if saved is None else round(saved, 3))

    def save(self, where: Path) -> Path:
        path = where / FILE
        write_json(path, codec.encode(self.as_stored()))
        return path


@dataclass(frozen=True)
class _GroupJSON:
    """A group as people read it in the file: builds by version. Read back, groups are found again from the steps."""

    tests: list[str]
    last_good: str
    first_bad: str
    untested: list[str]
    located: bool


@dataclass(frozen=True)
class _BisectJSON:
    """bisect.json: the record, with what it adds up to (located, the seconds) written out for people and tools."""

    bisect_version: int
    cell: str
    mode: str
    source: str
    followed: dict[str, str]
    builds: list[Build]
    steps: list[StepRun]
    groups: list[_GroupJSON] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)
    problem: str | None = None
    interrupted: bool = False
    located: bool = False
    step_seconds: float = 0.0
    whole_suite_s: float | None = None
    saved_seconds: float | None = None


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
        read = codec.decode(_BisectJSON, data)
        strays = [s.index for s in read.steps if not 0 <= s.index < len(read.builds) or s.build != read.builds[s.index]]
        if strays:
            raise ValueError(f"step {strays[0]!r} names no build of this bisect")
        record = Bisection(read.cell, read.mode, read.source, read.followed, read.builds, read.steps,
                           problem=read.problem, interrupted=read.interrupted, whole_suite_s=read.whole_suite_s)
        if read.groups or read.left:  # a walk that ended: its groups, from the steps that made them
            record.groups, record.left = groups(replayed(len(read.builds), sorted(record.followed), read.steps))
    except (KeyError, ValueError) as exc:  # a CodecError names the key; a KeyError, a test the bisect did not follow
        raise RecordError(f"{path}: is not a well-formed bisect ({exc}); fix: run the bisect again without "
                          "--resume") from None
    return record
