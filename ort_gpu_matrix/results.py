"""The result of one mode session: a typed, versioned Result, stored atomically.

Results are read back by people, by the teeth check of a later session, and by
reports and baselines kept for years, so every field is typed here and the file
carries `schema_version`. A reader refuses a version it does not know instead
of guessing at it.
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ort_matrix_probe.schema import OrtProvenance, ProbeReport, TorchProvenance

from .cells import Cell
from .fsutil import write_json
from .run import RunOutcome
from .verdicts import Counts, Dispatch, Libraries, Status, TeethCoverage, Verdict

SCHEMA_VERSION = 1
T = TypeVar("T")


class ResultError(Exception):
    """A result file that cannot be read as a Result; the message names the file."""


@dataclass(frozen=True)
class CellInfo:
    name: str
    python: str
    ort: str
    torch: str
    libs: str
    suite: str


@dataclass(frozen=True)
class Provenance:
    """What ran: the probe's view from inside the test process, plus the wheel's hash from the install."""

    python: str | None = None
    python_executable: str | None = None
    ort: OrtProvenance | None = None
    torch: TorchProvenance | None = None
    ort_wheel_sha256: str | None = None

    @classmethod
    def of(cls, report: ProbeReport | None, ort_wheel_sha256: str | None) -> Provenance:
        seen = report["provenance"] if report else None
        if not seen:
            return cls(ort_wheel_sha256=ort_wheel_sha256)
        return cls(seen["python"], seen["python_executable"], seen["ort"], seen["torch"], ort_wheel_sha256)


@dataclass(frozen=True)
class VenvInfo:
    path: str
    fingerprint: dict[str, Any]


@dataclass(frozen=True)
class Result:
    session: str
    mode: str
    cell: CellInfo
    verdict: Status
    reasons: list[str]
    warnings: list[str]
    counts: Counts
    pytest_exit_code: int
    started: str
    duration_s: float
    env: dict[str, str]
    command: list[str]
    workdir: str
    log: str | None
    junit: str | None
    report: str | None
    provenance: Provenance
    dispatch: Dispatch
    libraries: Libraries
    teeth_coverage: TeethCoverage | None
    venv: VenvInfo
    schema_version: int = SCHEMA_VERSION

    @property
    def passed(self) -> bool:
        return self.verdict is Status.PASS

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": self.schema_version,
                **{k: v for k, v in _plain(self).items() if k != "schema_version"}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ResultError(f"schema_version {version!r} is not one this ort-gpu-matrix reads ({SCHEMA_VERSION})")
        return _build(cls, data)


def _plain(value: Any) -> Any:
    """JSON-ready data: nested dataclasses by their fields (or their own to_dict), enums by value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_dict", None)
        if own is not None and not isinstance(value, Result):
            return own()
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Status):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _build(cls: type[T], data: Any) -> T:
    """A dataclass from its plain form, nested dataclasses and enums included; missing keys take defaults."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in data:
            continue
        kwargs[f.name] = _field(hints[f.name], data[f.name])
    return cls(**kwargs)


def _field(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value)
    if hint is Status:
        return Status(value)
    return value


def build(session: str, mode: str, cell: Cell, venv_path: Path, fingerprint: dict[str, Any], outcome: RunOutcome,
          verdict: Verdict, kept: dict[str, str | None]) -> Result:
    """The one place a Result is made: from the run's outcome, its verdict and the copied artifacts."""
    return Result(
        session=session,
        mode=mode,
        cell=CellInfo(cell.name, cell.python, cell.ort.id, cell.torch.id, cell.libs.id, cell.suite.id),
        verdict=verdict.status,
        reasons=verdict.reasons,
        warnings=verdict.warnings,
        counts=verdict.counts,
        pytest_exit_code=outcome.exit_code,
        started=datetime.fromtimestamp(outcome.started, UTC).isoformat(timespec="seconds"),
        duration_s=outcome.duration_s,
        env=outcome.env,
        command=outcome.command,
        workdir=str(outcome.workdir),
        log=kept.get("log"),
        junit=kept.get("junit"),
        report=kept.get("report"),
        provenance=Provenance.of(outcome.report, fingerprint.get("ort_sha256")),
        dispatch=verdict.dispatch,
        libraries=verdict.libraries,
        teeth_coverage=verdict.teeth_coverage,
        venv=VenvInfo(str(venv_path), fingerprint),
    )


def store(results_dir: Path, result: Result) -> Path:
    path = results_dir / f"{result.session}.json"
    write_json(path, result.to_dict())
    return path


def load(path: Path) -> Result:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultError(f"{path}: cannot be read as a result ({exc})") from None
    try:
        return Result.from_dict(data)
    except (ResultError, TypeError, ValueError) as exc:
        raise ResultError(f"{path}: {exc}") from None
