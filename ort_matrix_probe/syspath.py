"""Where `import onnxruntime` will resolve for the tests, found without importing it (stdlib only).

A loader that imports onnxruntime before the tests do (ort_preload_dlls) must import the same
module the tests would have imported on their own, or it would hide a source dir that shadows the
wheel. The tests see a sys.path that pytest has not built yet when the loader acts: in its default
`prepend` import mode it puts the root of every conftest's and test module's package in front of
sys.path as it imports them, `append` puts them at the end, and the ini `pythonpath` goes in front.
So the loader asks here with that future sys.path, and at the session's end (`resolve` with
today's sys.path) the answer is checked again.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def package_root(path: str) -> str:
    """The dir pytest puts on sys.path for a .py file: above its topmost package, as pytest finds it."""
    here = os.path.dirname(os.path.abspath(path))
    root = here
    while os.path.isfile(os.path.join(root, "__init__.py")) and os.path.basename(root).isidentifier():
        root = os.path.dirname(root)
    return root


def _conftests(target: str, stop: str | None) -> list[str]:
    """conftest.py files pytest loads for `target`: in its dir and each parent, down from `stop`."""
    here = target if os.path.isdir(target) else os.path.dirname(target)
    found = []
    while True:
        candidate = os.path.join(here, "conftest.py")
        if os.path.isfile(candidate):
            found.append(candidate)
        if stop is not None and os.path.abspath(here) == os.path.abspath(stop):
            break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return found


def _test_files(target: str) -> list[str]:
    if os.path.isfile(target):
        return [target]
    out = []
    for dirpath, dirnames, filenames in os.walk(target):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        out += [os.path.join(dirpath, f) for f in filenames if f.endswith(".py")]
    return out


@dataclass(frozen=True)
class Prediction:
    """sys.path as the tests will see it: `front` + today's sys.path + `back`."""

    front: tuple[str, ...] = ()
    back: tuple[str, ...] = ()

    def path(self) -> list[str]:
        return [*self.front, *sys.path, *self.back]


def predict(targets: Iterable[str], import_mode: str, ini_pythonpath: Sequence[str], confcutdir: str | None) -> Prediction:
    """The dirs pytest will add to sys.path for these command-line targets (files or dirs, `::` ids allowed)."""
    roots: list[str] = []
    for target in targets:
        path = os.path.abspath(target.split("::", 1)[0])
        if not os.path.exists(path):
            continue
        for f in [*_conftests(path, confcutdir), *_test_files(path)]:
            roots.append(package_root(f))
    roots = list(dict.fromkeys(roots))
    front = tuple(ini_pythonpath)
    if import_mode == "prepend":
        return Prediction(tuple(roots) + front)
    if import_mode == "append":
        return Prediction(front, tuple(roots))
    return Prediction(front)  # importlib: pytest leaves sys.path alone


def resolve(name: str, path: list[str] | None = None, skip: Sequence[object] = ()) -> str | None:
    """The file `import name` would load with sys.path = `path` (default: today's), ignoring sys.modules.

    Asks every finder on sys.meta_path in turn, as the import system does (an editable install's
    finder included), but not the ones in `skip` (the probe's own import hooks)."""
    saved = sys.path[:]
    if path is not None:
        sys.path[:] = path
    try:
        for finder in list(sys.meta_path):
            if finder in skip or not hasattr(finder, "find_spec"):
                continue
            try:
                spec = finder.find_spec(name, None)
            except (ImportError, ValueError):
                continue
            if spec is None:
                continue
            origin = spec.origin if spec.origin not in (None, "namespace") else \
                next(iter(spec.submodule_search_locations or ()), None)
            return os.path.realpath(origin) if origin else None
        return None
    finally:
        sys.path[:] = saved


def inside(path: str, directory: str) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(directory) + os.sep)
