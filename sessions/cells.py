"""Cell sessions (`gpu-3.12-cu130`: every mode, then a table) and mode sessions (`gpu-3.12-cu130-teeth`).

A bad matrix prints every problem with its file, key and fix, and exits 2
before nox lists or runs anything.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.config.model import Matrix
from ort_gpu_matrix.config.overrides import Overrides
from ort_gpu_matrix.host.host import Resolved, check
from ort_gpu_matrix.host.pythons import locate
from ort_gpu_matrix.plan.cells import Cell, cells_of
from ort_gpu_matrix.util.errors import MatrixError

from .errors import user_errors

if TYPE_CHECKING:
    from ort_gpu_matrix.store.results import Result


def slots_option(posargs: list[str]) -> tuple[str | None, list[str]]:
    """`--slots-per-gpu N|auto` (or `=N`) taken out of a cell session's arguments; the rest go to pytest."""
    wanted, rest, i = None, [], 0
    while i < len(posargs):
        arg = posargs[i]
        if arg == "--slots-per-gpu":
            wanted, i = (posargs[i + 1] if i + 1 < len(posargs) else ""), i + 2
            continue
        if arg.startswith("--slots-per-gpu="):
            wanted = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return wanted, rest


def _bodies(matrix: Matrix, cell: Cell, resolved: Resolved | MatrixError, earlier: dict[str, Result],
            noxfile: Path | None) -> Callable[[tuple[str, ...], bool], Callable[[Any], None]]:
    """The session bodies of one cell: `body(modes, print_table)` runs those modes (a cell session prints its
    table, and overlaps its modes where `noxfile` can start them as children)."""
    def body(modes: tuple[str, ...], print_table: bool) -> Callable[[Any], None]:
        @user_errors()
        def session_body(session: Any) -> None:
            # imported here, not at registration: `nox -l` needs none of it
            from ort_gpu_matrix.drive.cell import run_cell
            from ort_gpu_matrix.drive.context import CellRuns
            from ort_gpu_matrix.drive.overlap import Overlap, RunsMissing
            from ort_gpu_matrix.host.room import RoomError, parse_wanted
            from ort_gpu_matrix.report.render import color, table
            from ort_gpu_matrix.util.voice import Voice

            if isinstance(resolved, MatrixError):
                session.error(str(resolved))  # raises
                return
            wanted, posargs = slots_option(list(session.posargs))
            full = "--full" in posargs  # every mode runs every test (drive/carry.py); pytest has no --full
            posargs = [a for a in posargs if a != "--full"]
            voice = Voice(log=session.log, echo=print, say=print, warn=session.warn)
            missing: str | None = None
            try:
                overlap = Overlap(noxfile, parse_wanted(wanted)) if print_table and noxfile is not None else None
                if wanted is not None and overlap is None:
                    raise RoomError(f"--slots-per-gpu goes with a cell session (nox -s {cell.name}): "
                                    "a mode session runs one mode")
                written = run_cell(CellRuns(cell, resolved, matrix.workspace, tuple(posargs), earlier, voice,
                                            full=full), modes, overlap)
            except RunsMissing as exc:  # the runs that stored a result are still shown
                written, missing = exc.written, str(exc)
            if print_table:
                print(table.render(cell.name, written, color.enabled()))
            else:
                for r in written:
                    print(f"verdict {color.verdict(r.verdict.value.upper(), color.enabled())}: {r.session}")
            if missing is not None:
                session.error(f"verdict FAIL: {missing}")
            failed = [r.session for r in written if not r.passed]
            if failed:
                session.error(f"verdict FAIL: {', '.join(failed)} (reasons above, results in {matrix.workspace.results_dir})")
        return session_body

    return body


def _describe(cell: Cell, what: str, why_not: str | None) -> str:
    where = "" if why_not is None else f" [not runnable here: {why_not}]"
    torch = cell.torch.requirement or cell.torch.environment or "no torch"
    found = locate(cell.python)  # cached: check() has just looked
    python = f"python {cell.python}" + (f" (from {found.found})" if found else "")
    return (f"{what}: {python}, ORT {cell.ort.requirement or cell.ort.wheel}, torch {torch}, "
            f"libs {cell.libs.id}, suite {cell.suite.id}{where}")


def register(nox: Any, default_matrix: Path, noxfile: Path | None = None) -> int:
    """One session per cell and per cell and mode; returns how many cells can run on this host.

    `noxfile` starts a cell session's overlapped mode runs (overlap.py); without it they run one after another."""
    overrides = Overrides.from_environ()
    try:
        matrix = load_matrix(overrides.matrix_toml or default_matrix, overrides)
        cells = cells_of(matrix)
    except MatrixError as exc:
        print(exc.render(), file=sys.stderr)
        raise SystemExit(2) from None
    earlier: dict[str, Result] = {}  # this nox process's results: teeth reads require_cudnn's from here
    runnable = 0
    for cell in cells:
        resolved = check(cell, matrix.workspace)
        here = not isinstance(resolved, MatrixError)
        runnable += here
        why_not = None if not isinstance(resolved, MatrixError) else "; ".join(p.problem for p in resolved.problems)
        tags = list(dict.fromkeys([cell.python, cell.ort.id, cell.torch.id, cell.libs.id]))
        body = _bodies(matrix, cell, resolved, earlier, noxfile)
        for mode in cell.modes:
            fn = body((mode,), False)
            fn.__doc__ = _describe(cell, f"{mode} mode", why_not)
            nox.session(fn, name=cell.mode_session(mode), venv_backend="none", tags=[mode, *tags], default=False)
        fn = body(cell.modes, True)
        fn.__doc__ = _describe(cell, f"all modes ({', '.join(cell.modes)})", why_not)
        nox.session(fn, name=cell.name, venv_backend="none", tags=["cells"], default=here)
    return runnable
