"""Environment overrides, read in this one place and handed on as values.

They let a host run a shipped matrix unedited: an offline GPU box points
MATRIX_WHEELHOUSE at its wheels, CI points MATRIX_RESULTS at an artifact dir,
the tests share built venvs through MATRIX_VENVS.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Overrides:
    matrix_toml: Path | None
    results: Path | None
    venvs: Path | None
    wheelhouse: tuple[str, ...]
    offline: bool
    keep_workdir: bool

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> Overrides:
        def path(name: str) -> Path | None:
            value = environ.get(name)
            return Path(value).resolve() if value else None

        return cls(
            matrix_toml=path("MATRIX_TOML"),
            results=path("MATRIX_RESULTS"),
            venvs=path("MATRIX_VENVS"),
            wheelhouse=tuple(p for p in environ.get("MATRIX_WHEELHOUSE", "").split(os.pathsep) if p),
            offline=environ.get("MATRIX_OFFLINE") == "1",
            keep_workdir=bool(environ.get("MATRIX_KEEP_WORKDIR")),
        )


@dataclass(frozen=True)
class Workspace:
    """Where a matrix keeps what it builds and what it finds, and the file it was declared in.

    This is all a cell's run needs of the matrix beyond the cell itself: below the planning layer
    nothing takes the Matrix, so a function's parameters say what it reads (issue 33).
    """

    results_dir: Path
    venvs_dir: Path
    keep_workdir: bool
    cache_dir: Path | None  # the default .matrix/ beside the matrix file, when either dir is in it
    matrix_file: Path  # problems name it; relative paths in it resolve against its dir

    @property
    def base(self) -> Path:
        return self.matrix_file.parent

    @classmethod
    def for_matrix(cls, matrix_file: Path, overrides: Overrides) -> Workspace:
        cache = matrix_file.parent / ".matrix"
        in_cache = overrides.results is None or overrides.venvs is None
        return cls(results_dir=overrides.results or cache / "results",
                   venvs_dir=overrides.venvs or cache / "venvs",
                   keep_workdir=overrides.keep_workdir,
                   cache_dir=cache if in_cache else None, matrix_file=matrix_file)
