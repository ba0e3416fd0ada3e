"""Errors a user can act on: each names the file, the key, what is wrong and the fix."""
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


class MatrixError(Exception):
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
