"""The fingerprint of the test code a run runs: a census of reads holds only for the files it was taken on.

A mode may leave a test out because an earlier run's census says the test cannot change under it
(drive/carry.py). Edit the test, a helper it imports or a conftest, and that census says nothing any
more: the whole mode runs. So every run records this digest, and a census counts only where it matches.

What is hashed: every Python file and pytest configuration file under the suite's root (its tests, their
helpers, the conftests pytest loads there), and the Python files directly in each of the test process's
PYTHONPATH dirs outside the root. Names and contents both count, so a file added, removed or renamed
changes it. A package imported from elsewhere belongs to the venv, whose own fingerprint covers it.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from ..host.host import Resolved

CONFIG_FILES = {"pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", ".pytest.ini"}
_SKIPPED_DIRS = {"__pycache__", ".git", ".pytest_cache", ".pycache", "node_modules"}


def _under(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".py") or name in CONFIG_FILES:
                yield Path(dirpath) / name


def _beside(folder: Path) -> Iterator[Path]:
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        if name.endswith(".py") and (folder / name).is_file():
            yield folder / name


def files_of(resolved: Resolved) -> list[Path]:
    """The files the digest covers, each once, in a stable order."""
    root = Path(resolved.suite_root)
    found = dict.fromkeys(_under(root))
    for entry in resolved.pythonpath:
        folder = Path(entry)
        if folder != root and root not in folder.parents:
            found.update(dict.fromkeys(_beside(folder)))
    return list(found)


def digest(resolved: Resolved) -> str:
    """sha256 over each covered file's path (relative to the root where it lies under it) and its bytes."""
    root = Path(resolved.suite_root)
    h = hashlib.sha256()
    for path in files_of(resolved):
        name = os.path.relpath(path, root) if root in path.parents else str(path)
        try:
            data = path.read_bytes()
        except OSError as exc:  # unreadable: it still differs from any readable state
            data = f"<unreadable: {exc.strerror}>".encode()
        h.update(name.encode(errors="surrogateescape") + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()
