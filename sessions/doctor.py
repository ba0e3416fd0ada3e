"""`nox -s doctor` (what this host has for the matrix), and what plain `nox` runs when no cell can run here."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ort_gpu_matrix.config.overrides import Overrides

from .errors import user_errors


def register(nox: Any, default_matrix: Path) -> None:
    """`doctor`, the first default session."""
    overrides = Overrides.from_environ()
    matrix_file = overrides.matrix_toml or default_matrix

    @user_errors()
    def doctor(session: Any) -> None:
        """What this host has for the matrix: pairings, libraries, GPUs, torch, venvs, interpreters."""
        from ort_gpu_matrix.app import doctor as engine
        from ort_gpu_matrix.config.loader import load_matrix

        report = engine.run(load_matrix(matrix_file, overrides))
        print("\n".join(report.lines))
        if report.fatal:
            session.error("the matrix cannot run on any host:\n  " + "\n  ".join(report.fatal))
        session.log(f"doctor: {len(report.runnable)} cell(s) can run here"
                    + (f": {', '.join(report.runnable)}" if report.runnable else ""))

    nox.session(doctor, name="doctor", venv_backend="none", default=True)


def register_fallback(nox: Any, default_matrix: Path, runnable: int) -> None:
    """`nothing-to-run`, a default session only when no cell can run on this host."""
    matrix_file = Overrides.from_environ().matrix_toml or default_matrix

    def nothing_to_run(session: Any) -> None:
        """No cell of the matrix can run on this host: plain `nox` fails instead of succeeding with nothing."""
        session.error(f"no cell of {matrix_file} can run on this host; `nox -s doctor` says why, "
                      "`nox -l` lists every cell with its reason, `nox -s <cell>` runs one anyway")

    if not runnable:
        nox.session(nothing_to_run, name="nothing-to-run", venv_backend="none", default=True)
