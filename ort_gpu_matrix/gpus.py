"""Which GPUs a sweep may use, and what the one a run was given is.

`--gpus 0,1` names slots, `--gpus all` asks `nvidia-smi -L`. A run records the GPU it was given:
CUDA_VISIBLE_DEVICES as set for it, and that GPU's UUID and name when nvidia-smi is there.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache

_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)")


class GpuError(Exception):
    """A --gpus value that cannot be used; the message says why."""


@cache
def inventory() -> dict[str, tuple[str, str]]:
    """index -> (uuid, name), from `nvidia-smi -L`; empty without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found = {}
    for line in out.splitlines():
        m = _LINE.match(line.strip())
        if m:
            found[m.group(1)] = (m.group(3), m.group(2))
    return found


def slots(spec: str | None) -> list[str]:
    """The GPU indices to run cells on, one cell per index at a time; [] means one after another."""
    if spec is None:
        return []
    if spec == "all":
        return sorted(inventory(), key=int)
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts) or len(set(parts)) != len(parts):
        raise GpuError(f"--gpus {spec!r}: give GPU indices such as 0,1 (each once), or all")
    return parts


def this_run() -> dict[str, str | None] | None:
    """The GPU this process was given (CUDA_VISIBLE_DEVICES), with its UUID and name; None when none was set."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    uuid, name = inventory().get(visible.split(",")[0], (None, None))
    return {"cuda_visible_devices": visible, "index": visible.split(",")[0], "uuid": uuid, "name": name}
