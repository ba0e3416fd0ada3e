"""Turn the matrix into nox sessions: one per cell, one per cell and mode.

The noxfile only calls register(); everything else lives in this package, so
the same code runs from nox and from the tests.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from . import table
from .cells import Cell, cells_of
from .errors import MatrixError
from .hostcheck import available
from .matrix import Matrix, load_matrix
from .venvs import BuildError
from .harness import run_cell


def _body(matrix: Matrix, cell: Cell, modes: tuple[str, ...], print_table: bool) -> Callable[[Any], None]:
    def session_body(session: Any) -> None:
        try:
            written = run_cell(matrix, cell, modes, session.posargs, log=session.log, echo=print)
        except (MatrixError, BuildError) as exc:
            session.error(str(exc))
        failed = [r["session"] for r in written if r["verdict"] != "pass"]
        if print_table:
            print(table.render(cell.name, written))
        if failed:
            session.error(f"verdict FAIL: {', '.join(failed)} (reasons above, results in {matrix.results_dir})")
    return session_body


def _describe(cell: Cell, what: str, here: bool) -> str:
    where = "" if here else " [not runnable on this host]"
    torch = cell.torch.requirement or cell.torch.environment or "no torch"
    return (f"{what}: python {cell.python}, ORT {cell.ort.requirement or cell.ort.wheel}, torch {torch}, "
            f"libs {cell.libs.id}, suite {cell.suite.id}{where}")


def register(nox: Any) -> Matrix:
    """Register every session of the matrix; print a clear error and exit 2 on a bad matrix."""
    try:
        matrix = load_matrix()
        cells = cells_of(matrix)
    except MatrixError as exc:
        print(exc.render(), file=sys.stderr)
        raise SystemExit(2) from None
    for cell in cells:
        here = available(matrix, cell)
        tags = list(dict.fromkeys([cell.python, cell.ort.id, cell.torch.id, cell.libs.id]))
        for mode in cell.modes:
            fn = _body(matrix, cell, (mode,), print_table=False)
            fn.__doc__ = _describe(cell, f"{mode} mode", here)
            nox.session(fn, name=cell.mode_session(mode), venv_backend="none", tags=[mode, *tags], default=False)
        fn = _body(matrix, cell, cell.modes, print_table=True)
        fn.__doc__ = _describe(cell, f"all modes ({', '.join(cell.modes)})", here)
        nox.session(fn, name=cell.name, venv_backend="none", tags=["cells"], default=here)
    return matrix
