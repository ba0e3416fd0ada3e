"""Who hears what a run says: one small value carries every output channel, from the session down.

A run speaks on four channels that go to different places: `log`, the harness's own lines (nox's log, or
<results>/sweep.log under a live display); `echo`, pytest's output, streamed or kept only in each run's log;
`say`, a command's own outcome (calibrate's findings, a bisect's steps); `warn`, what a person should act
on. A run watched live also has `events`: who is told as each of its mode runs starts and ends. Passing
loose callables down every level made signatures long and let a default of `print` send a line to the
terminal where the caller meant it to go elsewhere; a Voice is made once, where a session decides where its
lines go, and handed down whole. A function reads only the channels it uses.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

Line = Callable[[str], None]


class ModeEvents(Protocol):
    """Who is told as each mode run of this process starts and ends (report/progress.py's SweepProgress).

    `result` is the run's stored Result (store/results.py), a later layer than this one can name."""

    def mode_started(self, session: str) -> None: ...
    def mode_ended(self, result: Any) -> None: ...


def unheard(line: str) -> None:
    """A channel no one hears: pytest's output of a watched run, already in that run's pytest.log."""


@dataclass(frozen=True)
class Voice:
    """The channels of one run, each a callable that takes one line."""

    log: Line
    echo: Line
    say: Line
    warn: Line
    events: ModeEvents | None = None

    @classmethod
    def plain(cls, *, log: Line | None = None, echo: Line | None = None, say: Line | None = None,
              warn: Line | None = None, events: ModeEvents | None = None) -> Voice:
        """Every channel printed as it comes, unless given here: what a script or a test without nox hears."""
        def given(line: Line | None) -> Line:
            return print if line is None else line

        return cls(log=given(log), echo=given(echo), say=given(say), warn=given(warn), events=events)
