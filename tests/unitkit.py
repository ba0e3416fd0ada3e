"""Hand-built Results for the in-process unit tests (issue 26): a Result as the harness stores it, with only
the fields a test sets differing, so calibrate, baseline, expected and unconfirmed run without a nox run."""
from __future__ import annotations

from typing import Any

from ort_gpu_matrix.judge.counts import Counts, Dispatch
from ort_gpu_matrix.judge.libraries import Libraries
from ort_gpu_matrix.judge.verdicts import Status
from ort_gpu_matrix.store.results import CellInfo, Provenance, Result, VenvInfo


def cell(name: str = "c1", libs: str = "none", suite: str = "canary") -> CellInfo:
    return CellInfo(name, "3.11", "1.32.0", "none", libs, suite)


def result(mode: str = "normal", outcomes: dict[str, str] | None = None, *, name: str = "c1",
           verdict: Status = Status.PASS, **kw: Any) -> Result:
    outcomes = dict(outcomes or {})
    fields: dict[str, Any] = dict(
        session=f"{name}-{mode}", mode=mode, cell=cell(name), verdict=verdict, reasons=[], warnings=[],
        counts=Counts(collected=len(outcomes), passed=sum(o == "passed" for o in outcomes.values())),
        pytest_exit_code=0, started="2026-12-01T00:00:00+00:00", duration_s=1.0, env={}, command=[], workdir="/w",
        log=None, junit=None, report=None, provenance=Provenance(), dispatch=Dispatch(), libraries=Libraries(),
        teeth_coverage=None, venv=VenvInfo("/v", {}), outcomes=outcomes)
    return Result(**{**fields, **kw})
