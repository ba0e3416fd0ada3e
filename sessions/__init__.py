"""nox session definitions only: each module turns engine calls into sessions.

    doctor.py   `doctor` (what this host has for the matrix), and `nothing-to-run` when no cell can run here
    cells.py    one session per cell (all its modes, then a table) and one per cell and mode
    sweep.py    `sweep` (every cell, one report, regressions against a baseline) and `report`
    matrix.py   `matrix -- --github`: the cells as GitHub Actions strategy.matrix JSON
    calibrate.py  `calibrate`: the expectations that accept today's outcome, written for review
    bisection.py  `bisect`: which ORT build made a change the sweep confirmed
    noxfile.py  the noxfile the `ort-gpu-matrix` console script runs: these sessions against $MATRIX_TOML
    errors.py   every session body wrapped once: an engine UserError ends the session with its message

A wheel installs this directory as `ort_gpu_matrix.sessions`, so any noxfile registers the sessions with

    import nox
    from ort_gpu_matrix.sessions import register
    register(nox, "matrix.toml")

The engine (ort_gpu_matrix) never imports nox; these modules are the only ones that touch it.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from . import bisection, calibrate, cells, doctor, matrix, sweep


def register(nox: Any, default_matrix: str | Path = "matrix.toml", *, noxfile: str | Path | None = None) -> None:
    """Register every session against `default_matrix` (MATRIX_TOML, when set, wins).

    A relative `default_matrix` is relative to the noxfile's directory, as nox runs a noxfile from
    there. `noxfile` is the file that calls this (by default the caller's own `__file__`): a sweep
    with --gpus starts its child processes with it.
    """
    if noxfile is None:
        # the caller's module: nox loads a noxfile with its __file__ set
        caller = sys._getframe(1).f_globals.get("__file__")
        noxfile = Path(caller) if caller else Path.cwd() / "noxfile.py"
    noxfile = Path(noxfile).resolve()
    matrix_file = Path(default_matrix)
    if not matrix_file.is_absolute():
        matrix_file = noxfile.parent / matrix_file
    # doctor first: plain `nox` runs the default sessions in the order they were registered
    doctor.register(nox, matrix_file)
    runnable = cells.register(nox, matrix_file, noxfile)
    doctor.register_fallback(nox, matrix_file, runnable)
    sweep.register(nox, matrix_file, noxfile)
    matrix.register(nox, matrix_file)
    calibrate.register(nox, matrix_file)
    bisection.register(nox, matrix_file)
