"""Where a test process's start goes: wall-clock marks per process (the controller and each xdist worker).

Stdlib only, and cheap: a handful of time.time() calls and one read of /proc/self/stat. The marks, in
seconds since the epoch, so the controller's and the workers' line up:

    process_start     the process was started (fork/exec: the kernel's start time, from /proc)
    probe_imported    the probe's plugin module was imported: the interpreter and pytest's own imports are done
    configured        pytest_configure: plugins loaded, options parsed
    collection_start  pytest_collection
    collected         pytest_collection_finish: every test module imported (torch, onnx, ORT with them)
    keep_wait_start   (a teeth started early) collection done, waiting for the node ids to keep; kept: they came
    first_test_start  the first test began; first_test_end it ended (a first CUDA session pays the context)
    last_test_end     the last test ended
    finished          pytest_sessionfinish

Beside the marks, two figures the plugin adds at the end (issue 22's bench reads them): isolation_s, the
seconds this process spent in isolation.py's watch (snapshots, comparisons, undoing), and isolation_tests,
how many tests it watched.

An xdist controller collects nothing itself; a worker's process_start against the controller's
configured is xdist's own start.
"""
from __future__ import annotations

import os
import time

IMPORTED = time.time()


def process_start() -> float | None:
    """When this process started: now, less its age (the uptime against the kernel's start ticks: 10 ms steps;
    the boot time /proc/stat gives is whole seconds). None off Linux."""
    try:
        now = time.time()
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return round(now - (uptime - ticks / os.sysconf("SC_CLK_TCK")), 3)
    except (OSError, ValueError, IndexError):
        return None


class Marks:
    """One process's marks; the first of each kept, except last_test_end."""

    def __init__(self) -> None:
        self.marks: dict[str, float | None] = {"process_start": process_start(), "probe_imported": round(IMPORTED, 3)}

    def mark(self, name: str, again: bool = False) -> None:
        if again or name not in self.marks:
            self.marks[name] = round(time.time(), 3)

    def to_dict(self) -> dict[str, float | None]:
        return dict(self.marks)
