"""Which GPUs a sweep may use, and what the one a run was given is.

`--gpus 0,1` names GPUs, `--gpus all` asks `nvidia-smi -L`; `--slots-per-gpu N` runs N mode runs on
each at once. Where nvidia-smi answers, an index it does not list is an error, since a run given a
GPU that does not exist would fail in its first CUDA call, or worse, see none and skip. Where it is
missing, indices are taken as given, with a warning: they are then only slots (the CPU tests use
them so), and `all` means no slots: the cells run one after another in the sweep's own process.

Unasked (`unasked`), a sweep on a host whose nvidia-smi lists GPUs takes `--gpus all`: run one after another
in the sweep's own process, its mode runs would cost each cell about twice what `nox -s <cell>` costs there,
since a cell session overlaps its modes on its GPU (measured on the device, docs/evidence/below-floor-h200.md).
`--gpus none` asks for the serial sweep; CUDA_VISIBLE_DEVICES set by the caller keeps it too, since `all` counts
every GPU nvidia-smi lists, not the ones the caller left visible.

A run records the GPU it was given: CUDA_VISIBLE_DEVICES as set for it, and that GPU's UUID and
name when nvidia-smi is there. What a slot gives its run (`slot_env`) is one function, so that a
sweep's confirmation rerun, which runs in the parent after the slots, gets exactly what the run it
confirms got.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from functools import cache

from ..util.errors import UserError
from ..util.voice import Voice

_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)")


class GpuError(UserError):
    """A --gpus value that cannot be used; the message says why."""


@cache
def nvidia_smi_gpus() -> dict[str, tuple[str, str]] | str:
    """index -> (uuid, name), from `nvidia-smi -L`; or why the GPUs cannot be listed."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "nvidia-smi is not on PATH"
    try:
        proc = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi -L failed ({exc})"
    if proc.returncode != 0:
        return f"nvidia-smi -L exited {proc.returncode}"
    found = {}
    for line in proc.stdout.splitlines():
        m = _LINE.match(line.strip())
        if m:
            found[m.group(1)] = (m.group(3), m.group(2))
    return found


def unasked(env: Mapping[str, str]) -> tuple[str | None, str]:
    """The --gpus a sweep takes when none is given, and why, for its log (None: one after another, in-process;
    no why where no GPU is listed, since nothing changed there)."""
    found = nvidia_smi_gpus()
    if isinstance(found, str) or not found:
        return None, ""
    if "CUDA_VISIBLE_DEVICES" in env:
        return None, (f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r} is set, and --gpus all would count every "
                      "GPU nvidia-smi lists: the mode runs go one after another in this process (--gpus 0,1 names "
                      "GPUs by nvidia-smi's index)")
    return "all", (f"nvidia-smi lists {len(found)} GPU(s): --gpus all unasked, so each GPU overlaps the mode runs "
                   "it has room for (--gpus none: one after another in this process)")


def inventory() -> dict[str, tuple[str, str]]:
    """index -> (uuid, name); empty when nvidia-smi cannot tell."""
    found = nvidia_smi_gpus()
    return found if isinstance(found, dict) else {}


def slots(spec: str | None, per_gpu: int, voice: Voice) -> list[str]:
    """The GPU of each slot, N slots per GPU, spread over the GPUs first; [] means in-process, one after another."""
    if per_gpu < 1:
        raise GpuError(f"--slots-per-gpu {per_gpu}: give 1 or more mode runs per GPU")
    if spec is None or spec == "none":
        if per_gpu != 1:
            raise GpuError(f"--slots-per-gpu {per_gpu} needs GPUs to overlap on, and "
                           + ("--gpus none runs" if spec else "without --gpus this sweep runs")
                           + " the mode runs one after another: give --gpus 0,1 or all, or leave --slots-per-gpu out")
        return []
    found = nvidia_smi_gpus()
    if spec == "all":
        if isinstance(found, str):
            voice.warn(f"--gpus all: {found}, so no GPU can be listed: running the cells one after another in this process")
            return []
        if not found:
            voice.warn("--gpus all: nvidia-smi -L lists no GPU: running the cells one after another in this process")
            return []
        gpus = sorted(found, key=int)
    else:
        gpus = [p.strip() for p in spec.split(",") if p.strip()]
        if not gpus or not all(p.isdigit() for p in gpus) or len(set(gpus)) != len(gpus):
            raise GpuError(f"--gpus {spec!r}: give GPU indices such as 0,1 (each once), all, or none")
        if isinstance(found, str):
            voice.warn(f"--gpus {spec}: {found}, so the indices cannot be checked: taken as given, as slots")
        else:
            missing = [g for g in gpus if g not in found]
            if missing:
                there = ", ".join(f"{i} ({found[i][1]})" for i in sorted(found, key=int)) or "none"
                raise GpuError(f"--gpus {spec}: no GPU {', '.join(missing)} on this host; nvidia-smi -L lists: {there}")
    return [g for _ in range(per_gpu) for g in gpus]


def slot_env(gpu: str | None) -> dict[str, str]:
    """What a slot sets over the sweep's environment for its run: its GPU ("" or None: CUDA_VISIBLE_DEVICES
    as it is), and NVLink multicast off (NCCL_NVLS_ENABLE=0)."""
    return {**({"CUDA_VISIBLE_DEVICES": gpu} if gpu else {}), "NCCL_NVLS_ENABLE": "0"}


def this_run(environ: Mapping[str, str] | None = None) -> dict[str, str | None] | None:
    """The GPU a run was given (CUDA_VISIBLE_DEVICES of `environ`, this process's by default), with its UUID and
    name; None when none was set."""
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    uuid, name = inventory().get(visible.split(",")[0], (None, None))
    return {"cuda_visible_devices": visible, "index": visible.split(",")[0], "uuid": uuid, "name": name}
