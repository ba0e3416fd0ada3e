"""Errors a user can act on: each names the file, the key, what is wrong and the fix.

Every error a person can fix (a matrix key, a command-line value, a file to read or write, a venv that will
not build) is a UserError, whatever layer raises it: a session catches the one base once
(sessions/errors.py) and turns it into nox's failed status with the message, as nox maps a session's
errors to its status in one place. What is not a UserError is a signal between the engine's own parts
(execute/mode_run.py's EarlyAbandoned, drive/overlap.py's RunsMissing, execute/junit.py's JunitError,
drive/handoff.py's HandoffError, util/codec.py's CodecError), caught where it is raised for, or a bug that should show its traceback.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the matrix or the host, phrased for the person who fixes it."""

    file: str
    key: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: {self.problem}\n    fix: {self.fix}"


class UserError(Exception):
    """Something the person running the matrix can fix; the message says what and how, in one place."""


class MatrixError(UserError):
    """Raised with every problem found, so one run shows them all."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        head = f"ort-gpu-matrix: {len(self.problems)} problem(s) found, nothing was built or run"
        return "\n".join([head, *(str(p) for p in self.problems)])


def anywhere(p: Problem) -> bool:
    """A problem of the matrix itself, the same on every host (a suite's files, a local ORT wheel): no host can
    run the cell, so the doctor and a sweep fail on it instead of listing the cell as "not runnable here"."""
    if "which is not set" in p.problem:  # a ${VAR} another host (or shell) may well set
        return False
    return p.key.startswith("suite.") or (p.key.startswith("ort.") and p.key.endswith(".wheel"))
