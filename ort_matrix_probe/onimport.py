"""Run a function on a module the moment the normal import system has executed it (stdlib only).

The probe does not import onnxruntime itself for its own needs (only the ort_preload_dlls loader does,
after checking it resolves to the wheel), yet it must act as soon as the tests import it: to patch its
session class (ortpatch.py). This finder waits on sys.meta_path for the module's name, lets the real
finders locate it, and wraps the loader's exec_module so `then(module)` runs right after.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, then: Callable[[ModuleType], None], once: bool) -> None:
        self.name, self.then, self.once = name, then, once

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # the real finders locate it, not this one
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if not self.once:
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        exec_module = loader.exec_module

        def exec_then(module: ModuleType) -> None:
            exec_module(module)
            self.then(module)

        loader.exec_module = exec_then
        return spec

    def arm(self) -> AfterImport:
        sys.meta_path.insert(0, self)
        return self

    def disarm(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
