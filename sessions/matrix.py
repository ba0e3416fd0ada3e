"""`nox -s matrix -- --github [--select SESSION_OR_TAG ...]`: the matrix as GitHub Actions' strategy.matrix JSON."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.config.overrides import Overrides
from ort_gpu_matrix.plan.cells import cells_of

from .errors import user_errors


def register(nox: Any, default_matrix: Path) -> None:
    overrides = Overrides.from_environ()

    @user_errors()
    def matrix(session: Any) -> None:
        """Print the cells as GitHub Actions strategy.matrix JSON (-- --github [--select ...])."""
        from ort_gpu_matrix.plan.ci import github_matrix
        from ort_gpu_matrix.plan.select import select

        parser = argparse.ArgumentParser(prog="nox -s matrix --", exit_on_error=False)
        parser.add_argument("--github", action="store_true", required=True)
        parser.add_argument("--select", nargs="+", default=[], metavar="SESSION_OR_TAG")
        try:
            args = parser.parse_args(session.posargs)
        except (argparse.ArgumentError, SystemExit) as exc:
            session.error(f"matrix: {exc}; usage: {parser.format_usage().strip()}")
            return
        m = load_matrix(overrides.matrix_toml or default_matrix, overrides)
        chosen = select(cells_of(m), args.select)
        print(json.dumps(github_matrix(m, chosen)))

    nox.session(matrix, name="matrix", venv_backend="none", default=False)
