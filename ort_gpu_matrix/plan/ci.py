"""The matrix as CI jobs: GitHub Actions' `strategy.matrix`, one entry per cell.

GitHub Actions is the distributed engine: each cell becomes a job on a runner that has its
libraries (the libs set's `runner` labels, else `matrix.runner`, else ubuntu-latest), and a
report job merges the uploaded results (`nox -s report`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config.model import Matrix
from .cells import Cell

DEFAULT_RUNNER = ("ubuntu-latest",)


def runs_on(matrix: Matrix, cell: Cell) -> str | list[str]:
    labels = cell.libs.runner or matrix.settings.runner or DEFAULT_RUNNER
    return labels[0] if len(labels) == 1 else list(labels)


def github_matrix(matrix: Matrix, chosen: Sequence[tuple[Cell, tuple[str, ...]]]) -> dict[str, list[dict[str, Any]]]:
    """`{"include": [...]}`: a cell session when all its modes are chosen, else one entry per mode session."""
    include = []
    for cell, modes in chosen:
        sessions = [cell.name] if tuple(modes) == tuple(cell.modes) else [cell.mode_session(m) for m in modes]
        for session in sessions:
            include.append({"session": session, "python": cell.python, "runs-on": runs_on(matrix, cell),
                            "tags": list(dict.fromkeys([cell.python, cell.ort.id, cell.torch.id, cell.libs.id,
                                                        *modes]))})
    return {"include": include}
