"""Where the package's own files are: the built-in suites and the noxfile the console script runs.

A wheel installs the tree's `suites/` and `sessions/` inside the package (`ort_gpu_matrix/suites`,
`ort_gpu_matrix/sessions`, setuptools package-dir), so a matrix in an empty directory can run the
built-in suite. In a source checkout they sit beside the package instead. Both layouts are found
from this file's own place, never through an import, so a checkout never picks up another
checkout's installed copy.
"""
from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parents[1]  # the package dir (this module lives in util/)

# A ${VAR} every matrix may use without exporting it: `root = "${ORT_GPU_MATRIX_SUITES}/dispatch"`.
SUITES_VAR = "ORT_GPU_MATRIX_SUITES"


def _inside_or_beside(name: str) -> Path:
    inside = _HERE / name
    return inside if inside.is_dir() else _HERE.parent / name


def suites_dir() -> Path:
    """The built-in suites: inside the installed package, or beside it in a checkout."""
    return _inside_or_beside("suites")


def noxfile() -> Path:
    """The noxfile `ort-gpu-matrix` runs against $MATRIX_TOML: the packaged one, or in a checkout the
    checkout's own noxfile.py (which registers the checkout's sessions/ under the same name)."""
    inside = _HERE / "sessions" / "noxfile.py"
    return inside if inside.is_file() else _HERE.parent / "noxfile.py"


def builtin_vars() -> dict[str, str]:
    """The ${VAR}s the package defines itself; the environment cannot override them."""
    return {SUITES_VAR: str(suites_dir())}
