"""Nothing outlives its run: child processes die with their parent, and a killed run's private dir is removed later.

A SIGKILL cannot be caught, so a killed harness can neither stop what it started nor remove its
private dir. Two things cover for it:
- every child it starts asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG), so a
  killed `--gpus` sweep takes its child noxes with it, and each of those its pytest;
- each private dir's name carries the pid and start time of the process that made it, so the next
  run removes the dirs whose maker is gone: only this user's, only real dirs (no symlinks), and never
  one whose maker still runs (a pid that was reused has another start time, and counts as gone).
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

from .fs import private_dir
from .voice import Voice

PREFIX = "ort-matrix-"
_PR_SET_PDEATHSIG = 1
_OWNER = re.compile(r"-p([0-9]+)\.([0-9]+)-[^-]+$")  # ...-p<pid>.<start>-<mkdtemp's random part>
_cleaned = False


def die_with_parent(parent: int | None = None) -> None:
    """In a child, before exec: SIGKILL when the parent dies. With `parent`, a parent that died before the
    request was made (the child was already reparented) kills the child at once."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22); None when it is gone,
    or dead and not yet reaped (a zombie: a killed sweep's children wait for whoever adopted them)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def new_workdir(session: str, voice: Voice) -> Path:
    """A fresh private 0700 dir for one run, named for the process that owns it; stale ones go first."""
    global _cleaned
    if not _cleaned:
        _cleaned = True
        for gone in clean_stale_workdirs():
            voice.log(f"removed {gone}: the run that made it was killed")
    return private_dir(f"{PREFIX}{session}-p{os.getpid()}.{_start_time(os.getpid()) or 0}-")


def owner(name: str) -> tuple[int, str] | None:
    """(pid, start time) from a private dir's name; None for a name this module did not make."""
    m = _OWNER.search(name)
    return (int(m.group(1)), m.group(2)) if name.startswith(PREFIX) and m else None


def clean_stale_workdirs(tmp: Path | None = None) -> list[Path]:
    """Remove this user's private run dirs whose owning process is gone; return what was removed."""
    root = tmp or Path(tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    uid = os.getuid()
    for entry in entries:
        made_by = owner(entry.name)
        if made_by is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not entry.is_dir(follow_symlinks=False) or st.st_uid != uid:
            continue
        pid, started = made_by
        if _start_time(pid) == started or not os.path.isdir("/proc/self"):
            continue  # its maker still runs (or this host cannot tell): never touch it
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed
