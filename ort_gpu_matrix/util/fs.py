"""Atomic writes and private directories: nothing half-written, nothing predictable."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


UMASK = _read_umask()  # read once, at import, before any thread could create a file meanwhile


def _replace_atomic(path: Path, fill: Callable[[IO[bytes]], None], check: Callable[[Path], None] | None = None) -> None:
    """Fill a temp file beside the target, then rename over it: readers see old or new, never half.

    `check` sees the filled temp file before the rename; whatever it raises leaves the target as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # no suffix: a *.py glob never sees it
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        if check is not None:
            check(Path(tmp))
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp made it 0600; a plain open() would have respected the umask
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: Path, text: str, check: Callable[[Path], None] | None = None) -> None:
    def fill(f: IO[bytes]) -> None:
        f.write(text.encode())

    _replace_atomic(path, fill, check)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def copy_atomic(src: Path, dst: Path) -> None:
    def fill(f: IO[bytes]) -> None:
        with open(src, "rb") as source:
            shutil.copyfileobj(source, f)

    _replace_atomic(dst, fill)


def private_dir(prefix: str) -> Path:
    """A fresh 0700 directory from mkdtemp: unpredictable name, owner-only."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o700)
    return path


CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This directory holds ort-gpu-matrix's venvs and results: see https://bford.info/cachedir/\n"


def mark_cache_dir(path: Path) -> None:
    """Tag a dir as a cache, for backup tools (CACHEDIR.TAG) and for git (a .gitignore of `*`)."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# made by ort-gpu-matrix\n*\n")):
        if not (path / name).exists():
            write_atomic(path / name, text)


def unwritable(path: Path) -> str | None:
    """Why files cannot be written under `path` (made if need be), or None; checked before a sweep runs anything.

    A real write is tried in the dir, or in its nearest existing parent when it does not exist yet:
    permission bits say nothing for root, and nothing about a read-only mount.
    """
    probe = path
    while not probe.exists():
        if probe.is_symlink():
            return f"{probe} is a broken symbolic link"
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a directory" + ("" if probe == path else f", so {path} cannot be created")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ort-matrix-write-check.", dir=probe)
    except OSError as exc:
        return f"{probe} is not writable ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(tmp)
    return None
