"""Patch onnxruntime the moment the tests import it, and never import it ourselves.

Importing onnxruntime from the probe would hide the source-dir shadow: the
tests must resolve `import onnxruntime` exactly as they would alone. So the
probe waits on the import system for the module that defines InferenceSession
and patches it as it finishes loading.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Sequence

from .fdtap import Fd1Tap
from .inject import wrap_providers

TARGET = "onnxruntime.capi.onnxruntime_inference_collection"
_MARK = "_ort_matrix_probe"


@dataclass(frozen=True)
class Patch:
    """What one pytest session wants done to ORT's classes."""

    forced: dict[str, str]
    tap: Fd1Tap
    on_injection: Callable[[], None]


def _install(cls: type, name: str, wrapper: Callable[..., Any], original: Callable[..., Any]) -> None:
    setattr(wrapper, _MARK, True)
    setattr(wrapper, "__wrapped__", original)
    setattr(cls, name, wrapper)


def _unwrapped(cls: type, name: str) -> Any:
    """The method as ORT defined it: a later session re-patches instead of stacking wrappers."""
    method = getattr(cls, name, None)
    while method is not None and getattr(method, _MARK, False):
        method = method.__wrapped__
    return method


def patch_module(module: ModuleType, patch: Patch) -> None:
    session_cls = module.InferenceSession
    for name in ("__init__", "set_providers"):
        original = _unwrapped(session_cls, name)
        if patch.forced:
            _install(session_cls, name, wrap_providers(original, name, patch.forced, patch.on_injection), original)
        elif original is not None:
            setattr(session_cls, name, original)
    run_cls = getattr(module, "Session", session_cls)
    for name in ("run", "run_with_iobinding"):
        original = _unwrapped(run_cls, name)
        if original is not None:
            _install(run_cls, name, patch.tap.around(original), original)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, patch: Patch) -> None:
        self.patch = patch

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        exec_module = loader.exec_module
        patch = self.patch

        def exec_and_patch(module: ModuleType) -> None:
            exec_module(module)
            patch_module(module, patch)

        loader.exec_module = exec_and_patch
        return spec


def arm(patch: Patch) -> Callable[[], None]:
    """Patch ORT now if the tests already imported it, else when they do. Returns the disarm."""
    module = sys.modules.get(TARGET)
    if module is not None:
        patch_module(module, patch)
        return lambda: None
    finder = _PatchOnImport(patch)
    sys.meta_path.insert(0, finder)

    def disarm() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)

    return disarm
