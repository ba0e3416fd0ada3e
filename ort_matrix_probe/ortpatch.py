"""Patch onnxruntime the moment the tests import it, and never import it ourselves.

Importing onnxruntime from the probe would hide the source-dir shadow: the
tests must resolve `import onnxruntime` exactly as they would alone. So the
probe waits on the import system for the module that defines InferenceSession
and patches it as it finishes loading.
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from . import quiet
from .epcensus import RUN_METHODS, EpCensus
from .fdtap import FdTap
from .inject import ASKED_CUDA, wrap_providers
from .onimport import AfterImport

TARGET = "onnxruntime.capi.onnxruntime_inference_collection"
_MARK = "_ort_matrix_probe"


@dataclass(frozen=True)
class Patch:
    """What one pytest session wants done to ORT's classes."""

    forced: dict[str, str]
    tap: FdTap
    on_injection: Callable[[], str]  # counts an injection; returns the current test's node id
    census: EpCensus | None = None  # which EP served each CUDA-asking session (epcensus.py)
    quiet: bool = False  # every session's threads sleep while idle (quiet.py)


def _install(cls: type, name: str, wrapper: Callable[..., Any], original: Callable[..., Any]) -> None:
    functools.update_wrapper(wrapper, original)  # sets __wrapped__: a later session unwraps before re-patching
    setattr(wrapper, _MARK, True)
    setattr(cls, name, wrapper)


def _unwrapped(cls: type, name: str) -> Any:
    """The method as ORT defined it: a later session re-patches instead of stacking wrappers."""
    method = getattr(cls, name, None)
    while method is not None and getattr(method, _MARK, False):
        method = getattr(method, "__wrapped__", None)
    return method


def _asked_cuda(session: object) -> bool:
    return bool(getattr(session, ASKED_CUDA, False))


def patch_module(module: ModuleType, patch: Patch) -> Callable[[], None]:
    """Wrap ORT's methods for this session; returns what puts ORT's own methods back."""
    installed: list[tuple[type, str, Any]] = []
    session_cls = module.InferenceSession
    for name in ("__init__", "set_providers"):
        original = _unwrapped(session_cls, name)
        _install(session_cls, name, wrap_providers(original, name, patch.forced, patch.on_injection), original)
        installed.append((session_cls, name, original))
    census = patch.census
    create = _unwrapped(session_cls, "_create_inference_session")
    wrapped_create = create
    options_cls = quiet.options_class(module)
    if patch.quiet and create is not None and options_cls is not None:
        entry = _unwrapped(options_cls, "get_session_config_entry")
        wrapped_create = quiet.wrap_create(wrapped_create, options_cls, entry)
        _install(options_cls, "get_session_config_entry", quiet.hide(entry, options_cls), entry)
        installed.append((options_cls, "get_session_config_entry", entry))
    if census is not None and create is not None:
        census.bind(module)
        wrapped_create = census.wrap_create(wrapped_create)
    if wrapped_create is not create:
        _install(session_cls, "_create_inference_session", wrapped_create, create)
        installed.append((session_cls, "_create_inference_session", create))
    run_cls = getattr(module, "Session", session_cls)
    for name in RUN_METHODS:
        original = _unwrapped(run_cls, name)
        if original is None:
            continue
        # run_async returns before its kernels run: its output cannot be tapped, only its call counted
        wrapped = original if name == "run_async" else patch.tap.around(original, _asked_cuda)
        if census is not None:
            wrapped = census.wrap_run(wrapped)
        if wrapped is original:
            continue  # run_async with the census off: nothing to wrap (installing ORT's own would loop its __wrapped__)
        _install(run_cls, name, wrapped, original)
        installed.append((run_cls, name, original))

    def restore() -> None:
        for cls, name, original in installed:
            setattr(cls, name, original)

    return restore


def arm(patch: Patch) -> Callable[[], None]:
    """Patch ORT now if the tests already imported it, else when they do. Returns the disarm,
    which stops waiting and puts ORT's own methods back, so a later session in the same
    process (pytester's inline runs) patches afresh instead of stacking wrappers."""
    module = sys.modules.get(TARGET)
    if module is not None:
        return patch_module(module, patch)
    restore: list[Callable[[], None]] = []
    finder = AfterImport(TARGET, lambda m: restore.append(patch_module(m, patch)), once=False).arm()

    def disarm() -> None:
        finder.disarm()
        for undo in restore:
            undo()

    return disarm
