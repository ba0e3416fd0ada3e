"""Which collected items a run keeps: the engine's word on it, applied in every process that collects.

Two files may come from the engine, each a JSON list of node ids: ORT_MATRIX_KEEP, the only ones to run (a
scoped teeth), and ORT_MATRIX_DROP, those not to run because their outcome is carried from another run
(a require_cudnn that runs only what it can change; the engine's drive/carry.py). Every other item runs,
so a test the engine has never seen (new since its census) always runs. Applied at the end of collection
in each process alike, so xdist's workers agree on one collection; nothing is parsed from the command line.
"""
from __future__ import annotations

import json
import os
from typing import Any

import pytest

from . import keepwait
from .schema import DROP_ENV, KEEP_ENV


def _ids(path: str, what: str) -> set[str]:
    try:
        with open(path) as f:
            ids = json.load(f)
    except (OSError, ValueError, TypeError) as exc:
        raise pytest.UsageError(f"ort_matrix_probe: cannot read the node ids to {what} from {path}: {exc}") from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise pytest.UsageError(f"ort_matrix_probe: {path} is not a JSON list of node ids to {what}")
    return set(ids)


def apply(config: pytest.Config, items: list[Any], mark: Any) -> None:
    """Deselect what the engine said (pytest_deselected tells the other plugins); `mark` times the wait."""
    keep_path, drop_path = os.environ.get(KEEP_ENV), os.environ.get(DROP_ENV)
    if keep_path and os.environ.get(keepwait.WAIT_ENV):  # a teeth started early: the file comes once require_cudnn
        mark("keep_wait_start")                          # is stored
        try:
            keepwait.wait_for(keep_path, os.environ[keepwait.WAIT_ENV])
        except keepwait.KeepNotHandedOver as exc:
            raise pytest.UsageError(f"ort_matrix_probe: {exc}") from None
        mark("kept")
    keep = _ids(keep_path, "keep") if keep_path else None
    drop = _ids(drop_path, "drop") if drop_path else set()
    dropped = [item for item in items if item.nodeid in drop or (keep is not None and item.nodeid not in keep)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = {id(item) for item in dropped}
        items[:] = [item for item in items if id(item) not in gone]
