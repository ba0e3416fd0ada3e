"""The loader a libs set asks for, done inside the test process (stdlib only).

- `torch_first`: import torch before anything else, as a user who imports torch first gets;
- `ort_preload_dlls:<dir>`: call onnxruntime.preload_dlls(directory=<dir>) the moment the tests'
  own `import onnxruntime` finishes. The probe never imports onnxruntime itself: the source-dir
  shadow guard depends on the tests resolving it exactly as they would alone.
What happened is recorded for the report.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from .audit import mapped_files

LOADER_ENV = "ORT_MATRIX_LOADER"
PRELOAD = "ort_preload_dlls:"


class _PreloadOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, directory: str, record: dict[str, Any]) -> None:
        self.directory, self.record = directory, record

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if name != "onnxruntime":
            return None
        sys.meta_path.remove(self)  # once: later imports are the cached module
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        exec_module = loader.exec_module

        def exec_and_preload(module: ModuleType) -> None:
            exec_module(module)
            try:
                module.preload_dlls(cuda=True, cudnn=True, msvc=False, directory=self.directory)
                self.record["called"] = True
                # what it really did: the set's files now mapped (a CPU build's preload_dlls maps nothing)
                self.record["mapped"] = [p for p in mapped_files() if p.startswith(self.directory + "/")]
            except Exception as exc:  # recorded; the verdict weighs what got mapped
                self.record["error"] = f"{type(exc).__name__}: {exc}"

        loader.exec_module = exec_and_preload
        return spec


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
        finder = _PreloadOnImport(directory, record)
        sys.meta_path.insert(0, finder)

        def disarm() -> None:
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)

        return record, disarm
    return {"loader": spec, "error": "unknown loader"}, lambda: None
