"""One cell's modes end to end: venv, run, judge, store. No nox in here.

Modes run in canonical order, and each stored Result is kept in `earlier` for
the rest of the nox process, so teeth checks its coverage against the
require_cudnn census made moments before in the same venv, passed forward in
memory rather than read back from a results dir that another run may have
written.
"""
from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence

from . import results
from .cells import Cell
from .config.model import Matrix
from .fsutil import mark_cache_dir
from .host import Resolved
from .modes import MODES, spec
from .results import Result
from .run import keep_artifacts, run_mode
from .venvs import ensure_venv
from .verdicts import Dispatch, judge


def _prior(earlier: MutableMapping[str, Result], cell: Cell, mode: str, fingerprint: dict[str, object]) -> Dispatch | None:
    source = spec(mode).coverage_from
    if source is None:
        return None
    prior = earlier.get(cell.mode_session(source.value))
    return prior.dispatch if prior is not None and prior.venv.fingerprint == fingerprint else None


def run_cell(matrix: Matrix, cell: Cell, resolved: Resolved, modes: Sequence[str], posargs: Sequence[str],
             earlier: MutableMapping[str, Result], log: Callable[[str], None] = print,
             echo: Callable[[str], None] = print) -> list[Result]:
    ws = matrix.workspace
    if ws.cache_dir is not None:
        mark_cache_dir(ws.cache_dir)
    venv = ensure_venv(matrix, cell, resolved, log)
    out = []
    for mode in (m for m in MODES if m in modes):
        session = cell.mode_session(mode)
        log(f"{session}: pytest in a private dir, LD_PRELOAD={':'.join(resolved.preload) or '(none)'}")
        outcome = run_mode(cell, resolved, venv, mode, session, list(posargs), echo)
        verdict = judge(spec(mode).judge, cell.suite.expect[mode], outcome.exit_code, outcome.report,
                        resolved.preload, str(venv.path), _prior(earlier, cell, mode, venv.fingerprint))
        kept = keep_artifacts(outcome, ws.results_dir, session, ws.keep_workdir)
        result = results.build(session, mode, cell, venv.path, venv.fingerprint, outcome, verdict, kept)
        path = results.store(ws.results_dir, result)
        earlier[session] = result
        log(f"{session}: {result.verdict.value.upper()} -> {path}")
        for reason in result.reasons:
            log(f"  reason: {reason}")
        for warning in result.warnings:
            log(f"  warning: {warning}")
        out.append(result)
    return out
