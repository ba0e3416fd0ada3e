"""Pairings become cells: one venv, one session name, one session per mode."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..config.model import Libs, Matrix, Ort, Pairing, Settings, Suite, Torch
from ..util.errors import MatrixError, Problem


@dataclass(frozen=True)
class Cell:
    name: str
    python: str
    ort: Ort
    torch: Torch
    libs: Libs
    suite: Suite
    modes: tuple[str, ...]
    key: str  # where the pairing was declared, for error messages
    settings: Settings = field(default_factory=Settings)  # the [matrix] table: how its venv is built and named

    def mode_session(self, mode: str) -> str:
        """`<cell>-<mode>`: the session, and the result file, of one mode."""
        return f"{self.name}-{mode}"


def _names(prefix: str, pairings: tuple[Pairing, ...]) -> list[str]:
    """<prefix>-<python>-<libs>, growing -<ort>, then -<torch>, then -<suite> only where names collide."""
    parts = [[f"{prefix}-{p.python}-{p.libs}", f"-{p.ort}", f"-{p.torch}", f"-{p.suite}"] for p in pairings]
    depth = [1] * len(pairings)
    for _ in range(3):
        names = ["".join(ps[:d]) for ps, d in zip(parts, depth, strict=True)]
        counts = Counter(names)
        for i, name in enumerate(names):
            if counts[name] > 1:
                depth[i] += 1
    return ["".join(ps[:d]) for ps, d in zip(parts, depth, strict=True)]


def cells_of(matrix: Matrix) -> list[Cell]:
    names = _names(matrix.settings.prefix, matrix.pairings)
    seen: dict[str, Pairing] = {}
    problems: list[Problem] = []
    cells: list[Cell] = []
    for name, p in zip(names, matrix.pairings, strict=True):
        if name in seen:
            problems.append(Problem(str(matrix.path), p.key, f"declares the same pairing as {seen[name].key} ({name})",
                                    "remove one of the two entries"))
            continue
        seen[name] = p
        cells.append(Cell(name, p.python, matrix.ort[p.ort], matrix.torch[p.torch], matrix.libs[p.libs],
                          matrix.suites[p.suite], p.modes, p.key, matrix.settings))
    if problems:
        raise MatrixError(problems)
    return cells
