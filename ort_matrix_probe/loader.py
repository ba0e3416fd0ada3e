"""The loader a libs set asks for, done inside the test process before anything else (stdlib only).

- `torch_first`: import torch before anything else, as a user who imports torch first gets;
- `ort_preload_dlls:<dir>`: what ORT documents for living beside torch: `import onnxruntime` and
  `onnxruntime.preload_dlls(directory=<dir>)` before any conftest, test module or torch is
  imported, so the set's cuDNN is the first one mapped and wins every later by-name load (ORT's
  own tests import torch before onnxruntime: a call at their import comes too late).

Importing onnxruntime this early must not hide a source dir that shadows the wheel, so the
onnxruntime to import is first resolved, without importing it, on the sys.path the tests will
have (syspath.py); if that is not the venv's wheel, nothing is imported and the run fails. At the
session's end `recheck` resolves it again on the sys.path the tests really had.
What happened is recorded for the report.
"""
from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from .audit import mapped_files
from .syspath import Prediction, inside, resolve

LOADER_ENV = "ORT_MATRIX_LOADER"
PRELOAD = "ort_preload_dlls:"


def _venv() -> str:
    return os.path.realpath(sys.prefix)


def _preload(directory: str, future: Prediction) -> dict[str, Any]:
    record: dict[str, Any] = {"loader": "ort_preload_dlls", "directory": directory, "called": False,
                              "onnxruntime_already_imported": "onnxruntime" in sys.modules}
    origin = resolve("onnxruntime", future.path())
    record["resolved"] = origin
    if origin is None:
        record["error"] = "onnxruntime cannot be imported in the test process: preload_dlls was not called"
        return record
    if not inside(origin, _venv()):
        record["error"] = (f"the tests would import onnxruntime from {origin}, not from the pairing's venv "
                           f"{_venv()} (a source dir shadows the wheel): preload_dlls was not called")
        return record
    record["torch_already_imported"] = "torch" in sys.modules  # only a -p plugin could have: the loader's promise
    try:
        module = importlib.import_module("onnxruntime")
        imported = os.path.realpath(getattr(module, "__file__", "") or "")
        if imported != origin:
            record["error"] = f"onnxruntime was imported from {imported}, not the {origin} it resolved to"
            return record
        module.preload_dlls(cuda=True, cudnn=True, msvc=False, directory=directory)
        record["called"] = True
        # what it really did: the set's files now mapped (a CPU build's preload_dlls maps nothing)
        record["mapped"] = [p for p in mapped_files() if p.startswith(directory + "/")]
    except Exception as exc:  # recorded; the verdict weighs what got mapped
        record["error"] = f"{type(exc).__name__}: {exc}"
    return record


def recheck(record: dict[str, Any] | None) -> None:
    """At the session's end: where `import onnxruntime` resolves now, on the sys.path the tests had.

    The loader imported the wheel before pytest built that sys.path; a conftest or test that put a
    source dir in front of it would have been given the wheel, and the shadow would be hidden."""
    if record is not None and record.get("loader") == "ort_preload_dlls" and record.get("called"):
        record["resolved_at_end"] = resolve("onnxruntime")


def apply(spec: str | None, future: Prediction | None = None) -> tuple[dict[str, Any] | None, Callable[[], None]]:
    """Do what `spec` asks now; returns the record for the report and what undoes it (nothing, today).

    `future`: the sys.path pytest will give the tests, for the ort_preload_dlls resolution."""
    if not spec:
        return None, lambda: None
    if spec == "torch_first":
        record: dict[str, Any] = {"loader": "torch_first", "onnxruntime_already_imported": "onnxruntime" in sys.modules}
        try:
            # by name, at run time: the probe depends on nothing but the stdlib and pytest; loading the
            # test venv's torch (its CUDA and cuDNN first) is what this loader is for
            importlib.import_module("torch")
            record["torch_imported"] = True
        except Exception as exc:
            record["torch_imported"] = False
            record["error"] = f"{type(exc).__name__}: {exc}"
        return record, lambda: None
    if spec.startswith(PRELOAD):
        return _preload(spec[len(PRELOAD):], future or Prediction()), lambda: None
    return {"loader": spec, "error": "unknown loader"}, lambda: None
