"""The peak GPU memory of one mode run, sampled from nvidia-smi while it runs: what the next run's room is decided on.

Once a second, one `nvidia-smi --query-compute-apps` call: the memory of every process in the run's own
process group (pytest and its xdist workers), summed. Where nvidia-smi shows no process of the group
(a container often hides other pid namespaces), the GPU's used memory less what it was at the start is
taken instead: an overestimate when other runs share the GPU, which errs on the safe side. On a host
without nvidia-smi nothing is sampled and nothing is recorded. The sampler is a daemon thread that
never outlives the run and never fails it: a failed call is one missing sample.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading

INTERVAL_S = 1.0
PROCESS_GROUP = "process group"
DEVICE = "device used, less its value at the start"


def _query(exe: str, what: str) -> list[list[str]]:
    try:
        proc = subprocess.run([exe, f"--query-{what}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    return [[c.strip() for c in line.split(",")] for line in proc.stdout.splitlines() if line.strip()]


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


class PeakSampler:
    """Samples the GPU memory of process group `pgid` until stopped; `result()` is the record for the Result."""

    def __init__(self, pgid: int, gpu: str | None, interval_s: float = INTERVAL_S) -> None:
        self.exe = shutil.which("nvidia-smi")
        self.pgid, self.interval = pgid, interval_s
        self.gpu = (gpu or "0").split(",")[0].strip()
        self.group_peak: int | None = None
        self.device_peak: int | None = None
        self.device_start: int | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"gpumem-{pgid}")

    def __enter__(self) -> PeakSampler:
        if self.exe is not None:
            self.device_start = self._device_used()
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=15)

    def _device_used(self) -> int | None:
        assert self.exe is not None
        for row in _query(self.exe, "gpu=index,memory.used"):
            if len(row) == 2 and row[0] == self.gpu:
                return _int(row[1])
        return None

    def _group_used(self) -> int | None:
        assert self.exe is not None
        total, seen = 0, False
        for row in _query(self.exe, "compute-apps=pid,used_memory"):
            if len(row) != 2 or not row[0].isdigit():
                continue
            try:
                if os.getpgid(int(row[0])) != self.pgid:
                    continue
            except OSError:
                continue  # gone, or not in this pid namespace
            used = _int(row[1])
            if used is not None:
                total, seen = total + used, True
        return total if seen else None

    def sample(self) -> None:
        group, device = self._group_used(), self._device_used()
        self.samples += 1
        if group is not None:
            self.group_peak = max(self.group_peak or 0, group)
        if device is not None:
            self.device_peak = max(self.device_peak or 0, device)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def result(self) -> dict[str, object] | None:
        """{"peak_mib", "how", "samples"}, or None where nothing was sampled (no nvidia-smi, a run under a second)."""
        if self.group_peak is not None:
            return {"peak_mib": self.group_peak, "how": PROCESS_GROUP, "samples": self.samples}
        if self.device_peak is not None:
            return {"peak_mib": max(0, self.device_peak - (self.device_start or 0)), "how": DEVICE,
                    "samples": self.samples}
        return None
