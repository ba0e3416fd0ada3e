"""The result of one mode session, written atomically as <results>/<session>.json."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .cells import Cell
from .fsutil import write_json
from .hostcheck import Resolved
from .runner import RunOutcome
from .venvs import Venv
from .verdicts import Verdict


def build(session: str, mode: str, cell: Cell, r: Resolved, venv: Venv, outcome: RunOutcome, verdict: Verdict,
          kept: dict[str, str | None]) -> dict[str, Any]:
    provenance = dict((outcome.report or {}).get("provenance") or {})
    provenance["ort_wheel_sha256"] = r.ort_sha256
    return {
        "session": session,
        "mode": mode,
        "cell": {"name": cell.name, **cell.ids, "suite": cell.suite.id},
        "verdict": verdict.verdict,
        "reasons": verdict.reasons,
        "warnings": verdict.warnings,
        "counts": verdict.counts,
        "pytest_exit_code": outcome.exit_code,
        "started": datetime.fromtimestamp(outcome.started, timezone.utc).isoformat(timespec="seconds"),
        "duration_s": outcome.duration_s,
        "env": outcome.env,
        "command": outcome.command,
        "workdir": str(outcome.workdir),
        "log": kept.get("log"),
        "junit": kept.get("junit"),
        "report": kept.get("report"),
        "provenance": provenance,
        "dispatch": verdict.dispatch,
        "libraries": verdict.libraries,
        "teeth_coverage": verdict.teeth_coverage,
        "venv": {"path": str(venv.path), "fingerprint": venv.fingerprint},
    }


def write(results_dir: Path, result: dict[str, Any]) -> Path:
    path = results_dir / f"{result['session']}.json"
    write_json(path, result)
    return path


def read_prior(results_dir: Path, session: str, fingerprint: dict) -> dict | None:
    """A result of the same pairing, if it was made with the venv as it is now."""
    path = results_dir / f"{session}.json"
    try:
        result = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return result if result.get("venv", {}).get("fingerprint") == fingerprint else None
