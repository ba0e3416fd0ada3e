"""ort-gpu-matrix: one session per cell of your matrix.toml, and one per cell and mode.

    ort-gpu-matrix                   the doctor, then every cell this host can run
    ort-gpu-matrix -s <cell>         one cell in all its modes, then a table
    ort-gpu-matrix -t teeth          the teeth mode of every cell
    ort-gpu-matrix -s sweep -- ...   every cell, one report, regressions against a baseline
    ort-gpu-matrix init              a starter matrix.toml for this host
"""
# The noxfile the `ort-gpu-matrix` console script runs, installed as ort_gpu_matrix/sessions/noxfile.py.
# nox runs a noxfile from its own directory, so the console script hands over the user's matrix as an
# absolute path in MATRIX_TOML: paths inside it stay relative to it, and .matrix/ sits beside it.
import importlib
import os
import sys

import nox


def register(nox_module: object) -> None:
    """The installed package's sessions, imported by name: nox loads this file outside any package."""
    matrix = os.environ.get("MATRIX_TOML")
    if not matrix:
        print("ort-gpu-matrix: MATRIX_TOML is not set\n    fix: run `ort-gpu-matrix` (it sets it), "
              "or MATRIX_TOML=/path/to/matrix.toml nox -f <this file>", file=sys.stderr)
        raise SystemExit(2)
    importlib.import_module("ort_gpu_matrix.sessions").register(nox_module, matrix, noxfile=__file__)


nox.options.error_on_external_run = True
register(nox)
