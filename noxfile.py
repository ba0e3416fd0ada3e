"""ort-gpu-matrix: one nox session per pairing of matrix.toml, one per pairing and mode.

    nox -l                  list them
    nox -s <cell>           one pairing in all its modes, then a table
    nox -t teeth            the teeth mode of every pairing
    nox                     every pairing this host can run

MATRIX_TOML picks another matrix file; MATRIX_RESULTS another results dir.
The sessions are defined in sessions/, the engine lives in ort_gpu_matrix/.
"""
import sys
from pathlib import Path

import nox

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sessions  # noqa: E402

nox.options.error_on_external_run = True
sessions.register(nox, HERE / "matrix.toml")
