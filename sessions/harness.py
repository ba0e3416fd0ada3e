"""Run one cell's modes end to end: resolve, venv, run, judge, write. No nox in here."""
from __future__ import annotations

from typing import Any, Callable

from . import results
from .cells import Cell
from .hostcheck import resolve
from .matrix import MODES, Matrix
from .runner import keep_artifacts, run_mode
from .venvs import ensure_venv
from .verdicts import judge


def run_cell(matrix: Matrix, cell: Cell, modes: tuple[str, ...], posargs: list[str] = (),
             log: Callable[[str], None] = print, echo: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Modes run in canonical order so that teeth can read this pairing's fresh require_cudnn result."""
    resolved = resolve(matrix, cell)
    venv = ensure_venv(matrix, cell, resolved, log)
    out = []
    for mode in (m for m in MODES if m in modes):
        session = cell.mode_session(mode)
        log(f"{session}: pytest in a private dir, LD_PRELOAD={':'.join(resolved.preload) or '(none)'}")
        outcome = run_mode(cell, resolved, venv, mode, session, list(posargs), echo)
        prior = None
        if mode == "teeth":
            prior = results.read_prior(matrix.results_dir, cell.mode_session("require_cudnn"), venv.fingerprint)
        verdict = judge(mode, cell.suite.expect[mode], outcome.exit_code, outcome.report, resolved.preload,
                        str(venv.path), prior)
        kept = keep_artifacts(outcome, matrix.results_dir, session)
        result = results.build(session, mode, cell, resolved, venv, outcome, verdict, kept)
        path = results.write(matrix.results_dir, result)
        log(f"{session}: {verdict.verdict.upper()} -> {path}")
        for reason in verdict.reasons:
            log(f"  reason: {reason}")
        for warning in verdict.warnings:
            log(f"  warning: {warning}")
        out.append(result)
    return out
