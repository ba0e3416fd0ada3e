"""nox session definitions only: each module turns engine calls into sessions.

    doctor.py  `doctor` (what this host has for the matrix), and `nothing-to-run` when no cell can run here
    cells.py   one session per cell (all its modes, then a table) and one per cell and mode
    sweep.py   `sweep` (every cell, one report, regressions against a baseline) and `report`
    matrix.py  `matrix -- --github`: the cells as GitHub Actions strategy.matrix JSON
    calibrate.py  `calibrate`: the expectations that accept today's outcome, written for review

The engine (ort_gpu_matrix) never imports nox; these modules are the only ones that touch it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from . import calibrate, cells, doctor, matrix, sweep


def register(nox: Any, default_matrix: Path) -> None:
    """Register every session; called by the noxfile with the matrix.toml beside it."""
    # doctor first: plain `nox` runs the default sessions in the order they were registered
    doctor.register(nox, default_matrix)
    runnable = cells.register(nox, default_matrix)
    doctor.register_fallback(nox, default_matrix, runnable)
    sweep.register(nox, default_matrix)
    matrix.register(nox, default_matrix)
    calibrate.register(nox, default_matrix)
