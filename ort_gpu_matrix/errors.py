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
