"""ort-gpu-matrix: one nox session per pairing of matrix.toml, one per pairing and mode.

    nox -l                  list them
    nox -s <cell>           one pairing in all its modes, then a table
    nox -t teeth            the teeth mode of every pairing
    nox                     every pairing this host can run

MATRIX_TOML picks another matrix file; MATRIX_RESULTS another results dir. Installed, the same sessions
run as `ort-gpu-matrix` against the matrix.toml where it is run; any noxfile registers them with
`from ort_gpu_matrix.sessions import register; register(nox, "matrix.toml")`.
"""
import importlib.util
import sys
from pathlib import Path

import nox

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # this checkout's engine, whatever is installed
# ... and this checkout's sessions/, under the name a wheel installs them as (package-dir in pyproject.toml)
_spec = importlib.util.spec_from_file_location("ort_gpu_matrix.sessions", HERE / "sessions" / "__init__.py",
                                               submodule_search_locations=[str(HERE / "sessions")])
assert _spec is not None and _spec.loader is not None
sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sys.modules[_spec.name])

from ort_gpu_matrix.sessions import register  # noqa: E402

nox.options.error_on_external_run = True
register(nox, "matrix.toml")
