"""The loader a libs set asks for, done inside the test process (stdlib only).

- `torch_first`: import torch before anything else, as a user who imports torch first gets;
- `ort_preload_dlls:<dir>`: call onnxruntime.preload_dlls(directory=<dir>) the moment the tests'
  own `import onnxruntime` finishes. The probe never imports onnxruntime itself: the source-dir
  shadow guard depends on the tests resolving it exactly as they would alone.
What happened is recorded for the report.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .audit import mapped_files
from .onimport import AfterImport

LOADER_ENV = "ORT_MATRIX_LOADER"
PRELOAD = "ort_preload_dlls:"


def _preload_in(directory: str, record: dict[str, Any]) -> Callable[[ModuleType], None]:
    def preload(module: ModuleType) -> None:
        try:
            module.preload_dlls(cuda=True, cudnn=True, msvc=False, directory=directory)
            record["called"] = True
            # what it really did: the set's files now mapped (a CPU build's preload_dlls maps nothing)
            record["mapped"] = [p for p in mapped_files() if p.startswith(directory + "/")]
        except Exception as exc:  # recorded; the verdict weighs what got mapped
            record["error"] = f"{type(exc).__name__}: {exc}"
    return preload


def apply(spec: str | None) -> tuple[dict[str, Any] | None, Callable[[], None]]:
    """Do what `spec` asks; returns the record for the report and what undoes the import hook."""
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
        directory = spec[len(PRELOAD):]
        record = {"loader": "ort_preload_dlls", "directory": directory, "called": False,
                  "onnxruntime_already_imported": "onnxruntime" in sys.modules}
        finder = AfterImport("onnxruntime", _preload_in(directory, record), once=True).arm()
        return record, finder.disarm
    return {"loader": spec, "error": "unknown loader"}, lambda: None
