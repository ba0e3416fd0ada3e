"""The result of one mode session: a typed, versioned Result, stored as one bundle per run.

Results are read back by people, by reports, and by the baselines made from them
that are kept for years, so every field is typed here and the file carries `schema_version`. A reader
refuses a version it does not know instead of guessing at it.

Each run stores its result, log, junit file and probe report together, as one
directory `runs/<session>/<run id>/` that appears whole or not at all, and then
`<session>.json` (the current result) is replaced by a copy of it. The current
result is removed when a run starts, so a run that is interrupted, or that
cannot write (a full disk), never leaves an older result looking current.
"""
from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ort_matrix_probe.schema import OrtProvenance, ProbeReport, TorchProvenance

from ..config.kernels import CUDNN
from ..execute.mode_run import RunOutcome
from ..execute.request import ModeRun
from ..host import gpus
from ..host.ortsource import SourceTree
from ..judge import pollution
from ..judge.counts import Counts, Dispatch
from ..judge.eps import EpCensus
from ..judge.libraries import Libraries
from ..judge.pollution import UNKNOWN, Pollution
from ..judge.reads import ReadCensus
from ..judge.stale import StaleRecord
from ..judge.tiers import BreakRecord
from ..judge.verdicts import Status, TeethCoverage, Verdict
from ..util import codec
from ..util.codec import stored
from ..util.errors import UserError
from ..util.fs import UMASK, copy_atomic, write_json
from .confirmation import Confirmation

SCHEMA_VERSION = 7  # 2: isolation and pollution, known_flaky and confirmation; 3: the EP census (ep); 4: teeth
# coverage names the tier forcing MATH took away (tier, tier_tests), and libraries.processes which process ran each test;
# 5: subtests (their ids in outcomes and dispatch, counts.subtests_*), and env as the test process had it (null: unset);
# 6: the node census (ep.nodes_taken, and each test's nodes and nodes_unseen under ep.tests);
# 7: what a run ran and carried, of which test files (selection), and its tests' reads of the watched variables (reads)
# a version 1 result reads with isolation "unknown", no pollution, no known_flaky, no confirmation; a version 1 or 2
# result reads with no EP census (ep.taken false: nothing is known of which EP served its tests); a version 1 to 3
# result's teeth coverage counted cuDNN tests (cudnn_tests): it reads as tier CUDNN_FLASH_ATTENTION with those
# tests as its tier_tests (_upgraded)
READS = (1, 2, 3, 4, 5, 6, 7)  # a version 1 to 4 result has no subtests and its env is what the harness meant to set;
# a version 1 to 5 result has no node census (ep.nodes_taken false: nothing is known of where its nodes ran);
# a version 1 to 6 result ran every test (selection null), and has no census of reads: no later run carries from it


class ResultError(UserError):
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
    """What ran: the probe's view from inside the test process, plus the wheel's hash from the install.

    `ort_imported_version` (onnxruntime.__version__ in the test process) and `source` (the ORT tree the
    tests came from) were added later as optional fields: results stored before them read as None."""

    python: str | None = None
    python_executable: str | None = None
    ort: OrtProvenance | None = None
    torch: TorchProvenance | None = None
    ort_wheel_sha256: str | None = None
    ort_imported_version: str | None = None
    source: SourceTree | None = None

    @classmethod
    def of(cls, report: ProbeReport | None, ort_wheel_sha256: str | None, source: SourceTree | None = None) -> Provenance:
        seen = report["provenance"] if report else None
        if not seen:
            return cls(ort_wheel_sha256=ort_wheel_sha256, source=source)
        return cls(seen["python"], seen["python_executable"], seen["ort"], seen["torch"], ort_wheel_sha256,
                   seen.get("ort_imported_version"), source)

    @property
    def wheel_version(self) -> str | None:
        """The version the wheel reported in the test process, else the one its dist-info names."""
        return self.ort_imported_version or (self.ort["version"] if self.ort else None)


@dataclass(frozen=True)
class Selection:
    """Which of its tests a mode run ran, and why not the rest: what keeps a run cut below the floor honest.

    `full`: every test ran, and `why` says why (asked, or nothing to cut by). `tests_digest`: of the test files it
    ran (execute/testfiles.py), for a later run to tell whether this one's census holds for it. Otherwise `chosen_by` names the run
    whose census chose ("<session> <run id>"), `carried` the tests whose outcomes came from `carried_from` (that
    run's session and run id) instead of running here, and `left_out` those neither run nor carried (teeth: not
    one of its tier's tests in any run the cell knows of). The carried outcomes are in the result's outcomes,
    counts and verdict, as that run gave them; `why` says what decided."""

    full: bool = True
    why: str = ""
    chosen_by: str | None = field(default=None, metadata=stored(omit_default=True))
    carried_from: str | None = field(default=None, metadata=stored(omit_default=True))
    carried: list[str] = field(default_factory=list, metadata=stored(omit_default=True))
    left_out: list[str] = field(default_factory=list, metadata=stored(omit_default=True))
    tests_digest: str | None = field(default=None, metadata=stored(omit_default=True))


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
    pytest_exit_code: int | None  # None: the harness stopped the run before pytest ended
    started: str
    duration_s: float
    env: dict[str, str | None]  # what the harness and the suite set, as the test process had it (None: unset)
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
    outcomes: dict[str, str] = dataclasses.field(default_factory=dict)  # node id -> outcome
    reruns: dict[str, int] = dataclasses.field(default_factory=dict)  # node id -> failed attempts rerun
    host: str = ""
    gpu: dict[str, str | None] | None = None  # CUDA_VISIBLE_DEVICES as given, and that GPU's index, UUID and name
    run_id: str = ""
    bundle: str | None = None  # runs/<session>/<run id>: this run's result, log, junit and report together
    stopped: str | None = None  # "interrupted (SIGINT)", "timed out after N s": the harness stopped the run
    gpu_memory: dict[str, Any] | None = None  # peak_mib, how, samples: nvidia-smi sampled through the run (gpumem.py)
    stale_rules: list[StaleRecord] = dataclasses.field(default_factory=list)  # expectations that matched nothing
    isolation: str = UNKNOWN  # restore, report or off, as the probe ran (pollution.py); unknown before version 2
    pollution: list[Pollution] = dataclasses.field(default_factory=list)  # what tests left changed, who, and its fate
    tier_breaks: list[BreakRecord] = dataclasses.field(default_factory=list)  # each test that broke a tier rule
    known_flaky: dict[str, dict[str, list[str]]] = dataclasses.field(default_factory=dict)  # node id -> its rule's set
    confirmation: Confirmation | None = None  # its regressions rerun (drive/confirm.py); verdict and counts follow them
    # node id -> the kind of expectation that accepted its outcome (expected.py); None: stored before this was kept
    expected: dict[str, str] | None = None
    # a confirmation rerun's own bundle: the run id of the run it reran (never a session's current result); the
    # scheduler's last duration and peak skip it, since a rerun of a few tests says nothing of a whole run
    rerun_of: str | None = None
    ep: EpCensus = dataclasses.field(default_factory=EpCensus)  # which EP served each CUDA-asking test (judge/eps.py)
    selection: Selection | None = None  # what ran and what was carried (drive/carry.py); None: before version 7
    reads: ReadCensus = dataclasses.field(default_factory=ReadCensus)  # its own tests' reads of the watched variables
    schema_version: int = SCHEMA_VERSION

    @property
    def passed(self) -> bool:
        return self.verdict is Status.PASS

    def to_dict(self) -> dict[str, Any]:
        stored = codec.as_dict(self)
        return {"schema_version": stored.pop("schema_version"), **stored}  # the version first, for a person reading

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        version = data.get("schema_version")
        if version not in READS:
            raise ResultError(f"schema_version {version!r} is not one this ort-gpu-matrix reads "
                              f"({', '.join(map(str, READS))})")
        try:
            read = codec.decode(cls, _upgraded(data, version))
        except codec.CodecError as exc:
            raise ResultError(f"is not a well-formed result: {exc}") from None
        return dataclasses.replace(read, schema_version=SCHEMA_VERSION)  # read, it is today's shape


def _upgraded(data: dict[str, Any], version: int) -> dict[str, Any]:
    """An older result in today's field names, where one was renamed (nothing else is guessed)."""
    cov = data.get("teeth_coverage")
    if version < 4 and isinstance(cov, dict) and "cudnn_tests" in cov:
        rest = {k: v for k, v in cov.items() if k != "cudnn_tests"}
        data = {**data, "teeth_coverage": {**rest, "tier": CUDNN, "tier_tests": cov["cudnn_tests"]}}
    return data


def new_run_id(started: float) -> str:
    """Sortable by start time, unique across hosts: 20261130T061203Z-3fa2c1d8."""
    stamp = datetime.fromtimestamp(started, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(4)}"


def seen_env(outcome: RunOutcome) -> dict[str, str | None]:
    """The variables the harness and the suite set, as the probe read them in the test process; what the
    harness meant to set where no report says (a run that died before its report)."""
    seen = outcome.report.get("env") if outcome.report else None
    return dict(seen) if isinstance(seen, dict) else dict(outcome.env)


def gpu_env(given: dict[str, str], seen: dict[str, str | None]) -> dict[str, str]:
    """The environment that decided the run's GPU: a slot's (`given`), then CUDA_VISIBLE_DEVICES as it arrived."""
    env = {**os.environ, **given}
    if "CUDA_VISIBLE_DEVICES" in seen:
        value = seen["CUDA_VISIBLE_DEVICES"]
        if value is None:
            env.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            env["CUDA_VISIBLE_DEVICES"] = value
    return env


def build(run: ModeRun, outcome: RunOutcome, verdict: Verdict, run_id: str, source: SourceTree | None = None) -> Result:
    """The one place a Result is made: from the run's outcome and its verdict."""
    isolation, polluters = pollution.of(outcome.report)
    cell, mode, fingerprint = run.cell, run.mode, run.venv.fingerprint
    env = seen_env(outcome)  # read once: the record and the GPU it decided
    return Result(
        session=run.session,
        mode=mode,
        cell=CellInfo(cell.name, cell.python, cell.ort.id, cell.torch.id, cell.libs.id, cell.suite.id),
        verdict=verdict.status,
        reasons=verdict.reasons,
        warnings=verdict.warnings,
        counts=verdict.counts,
        pytest_exit_code=outcome.exit_code,
        started=datetime.fromtimestamp(outcome.started, UTC).isoformat(timespec="seconds"),
        duration_s=outcome.duration_s,
        env=env,
        command=outcome.command,
        workdir=str(outcome.workdir),
        log=None,
        junit=None,
        report=None,
        provenance=Provenance.of(outcome.report, fingerprint.get("ort_sha256"), source),
        dispatch=verdict.dispatch,
        libraries=verdict.libraries,
        teeth_coverage=verdict.teeth_coverage,
        venv=VenvInfo(str(run.venv.path), fingerprint),
        outcomes=verdict.outcomes,
        reruns=verdict.reruns,
        host=socket.gethostname(),
        gpu=gpus.this_run(gpu_env(outcome.given, env)),
        run_id=run_id,
        stopped=outcome.stopped,
        gpu_memory=outcome.gpu_memory,
        stale_rules=[s.record(mode) for s in verdict.stale_rules],
        isolation=isolation,
        pollution=polluters,
        tier_breaks=[b.record(mode) for b in verdict.tier_breaks],
        known_flaky=verdict.known_flaky,
        ep=verdict.ep,
        reads=verdict.reads,
    )


class StoreError(UserError):
    """The result could not be written; the message names the path and the cause."""


BUNDLE_FILES = {"log": "pytest.log", "junit": "junit.xml", "report": "report.json"}


def current_path(results_dir: Path, session: str) -> Path:
    return results_dir / f"{session}.json"


def retire_current(results_dir: Path, session: str) -> None:
    """A run is starting: the session's current result is no longer current (unlinking needs no space)."""
    try:
        current_path(results_dir, session).unlink()
    except FileNotFoundError:
        pass


def store(results_dir: Path, result: Result, artifacts: dict[str, Path], current: bool = True) -> Result:
    """Write the run's bundle whole, then make it the session's current result. Returns it as stored.

    `current=False`: a confirmation rerun (drive/confirm.py), kept as a bundle of its own under runs/ and
    never the session's current result."""
    runs = results_dir / "runs" / result.session
    final = runs / result.run_id
    try:
        runs.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{result.run_id}.", dir=runs))
    except OSError as exc:
        raise StoreError(f"cannot store the result of {result.session} under {runs}: {exc.strerror or exc}") from None
    try:
        kept = {}
        for key, name in BUNDLE_FILES.items():
            src = artifacts.get(key)
            if src is not None and src.is_file():
                copy_atomic(src, tmp / name)
                kept[key] = str(final / name)
        stored = dataclasses.replace(result, bundle=str(final), log=kept.get("log"), junit=kept.get("junit"),
                                     report=kept.get("report"))
        write_json(tmp / "result.json", stored.to_dict())
        os.chmod(tmp, 0o777 & ~UMASK)
        os.rename(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StoreError(f"cannot store the result of {result.session} in {runs}: {exc.strerror or exc}; "
                         "nothing of this run was kept") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not current:
        return stored
    path = current_path(results_dir, result.session)
    try:
        write_json(path, stored.to_dict())
    except OSError as exc:
        raise StoreError(f"the run's bundle is complete in {final}, but {path} could not be written: "
                         f"{exc.strerror or exc}") from None
    return stored


def store_amended(results_dir: Path, result: Result) -> bool:
    """A stored result, amended after its run (its confirmation), written over its bundle's copy and over the
    current one while that is still this run's (the caller holds the session's lock). False: a newer run of the
    session became current meanwhile, and stays so (the bundle still gets the amended copy)."""
    try:
        if result.bundle is not None and Path(result.bundle).is_dir():
            write_json(Path(result.bundle) / "result.json", result.to_dict())
        current = current_path(results_dir, result.session)
        try:  # its run id alone, raw: a current result of another version (or damaged) is still another run's
            now = json.loads(current.read_text()).get("run_id")
        except (OSError, ValueError, AttributeError):
            now = result.run_id  # no current result, or not JSON: this one becomes it
        if now != result.run_id:
            return False
        write_json(current, result.to_dict())
        return True
    except OSError as exc:
        raise StoreError(f"cannot store the confirmed result of {result.session}: {exc.strerror or exc}") from None


def load(path: Path) -> Result:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultError(f"{path}: cannot be read as a result ({exc})") from None
    if not isinstance(data, dict):
        raise ResultError(f"{path}: is not a result (a JSON object with schema_version)")
    try:
        return Result.from_dict(data)
    except (ResultError, TypeError, ValueError) as exc:
        raise ResultError(f"{path}: {exc}") from None
