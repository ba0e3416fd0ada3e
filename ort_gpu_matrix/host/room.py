"""How many mode runs share one GPU at once, and with how many pytest workers each: decided from the host.

One GPU mostly idles through a mode run: most of a run is its processes starting (interpreter, torch,
ORT, collection) and Python between kernels. So a cell's independent runs (normal and require_cudnn)
may share it, and teeth, which needs require_cudnn's census, follows, or starts with them where it is
scoped and waits for that census (earlyteeth.py). What limits the sharing:

- the GPU's free memory (nvidia-smi) against each run's last recorded peak (`gpumem.py`); a run with no
  recorded peak is counted as a quarter of the GPU. Where nvidia-smi cannot say (a CPU host), nothing
  is shared unless asked for (`--slots-per-gpu N`): there is then no GPU to keep busy, only cores;
- the cores (MATRIX_CORES, else the affinity): the runs' pytest workers together never exceed them. Where
  the runs would not fit, each gets `-n` cut to its share (three runs of `-n 8` on 16 cores: `-n 5` each),
  as long as that keeps at least half its workers (a run of half the workers takes at most twice as long, and overlapping two
  runs saves at most that); else the runs go one after another with their own `-n`;
- a cap: the suite's `slots_per_gpu`, the command line's `--slots-per-gpu N` (1 keeps the serial order).

The decision and its reasons go to the log, one line, so a slow or serial cell says why.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from ..util.errors import UserError

# runs per GPU chosen unasked: measured, more runs with -n cut to their share of the cores beat fewer with the
# whole -n, up to four (docs/evidence/one-gpu-cells-h200.md: the CPU, not the GPU, is what they share). A cell has
# three only with a scoped teeth started with its pair (earlyteeth.py); a sweep has more. More than four is asked
# for (--slots-per-gpu N), not guessed.
AUTO_MOST = 4
MARGIN_MIB = 2048  # kept free beyond the runs' peaks: the CUDA context and allocator slack of a new process
UNKNOWN_SHARE = 4  # a run with no recorded peak counts as 1/UNKNOWN_SHARE of the GPU's memory


class RoomError(UserError):
    """A --slots-per-gpu value that cannot be used; the message says which and what to give."""


def parse_wanted(text: str | None) -> int | None:
    """`--slots-per-gpu`: None or "auto" lets the host decide; N >= 1 asks for N."""
    if text is None or text == "auto":
        return None
    if text.isdigit() and int(text) < 1:
        raise RoomError(f"--slots-per-gpu {text}: give 1 or more mode runs per GPU")
    if not text.isdigit():
        raise RoomError(f"--slots-per-gpu {text!r}: give auto, or 1 or more mode runs per GPU (1 keeps the serial order)")
    return int(text)


def workers_of(args: Sequence[str], cores: int) -> int:
    """The processes that run tests under these pytest arguments: xdist's -n (the last one wins), else 1."""
    found: str | None = None
    for i, arg in enumerate(args):
        if arg in ("-n", "--numprocesses") and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith("--numprocesses="):
            found = arg.split("=", 1)[1]
        elif arg.startswith("-n") and len(arg) > 2 and not arg.startswith("--"):
            found = arg[2:].lstrip("=")
    if found is None:
        return 1
    if found in ("auto", "logical"):
        return cores
    return max(1, int(found)) if found.isdigit() else 1


CORES_ENV = "MATRIX_CORES"  # the cores to plan with, where a CPU quota gives fewer than the affinity shows


def cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count), or MATRIX_CORES where set:
    a container's CPU quota can give fewer cores than its affinity lists. The room trusts the value it is
    given, more than the affinity included (a host whose runs wait more than they compute)."""
    given = os.environ.get(CORES_ENV)
    if given:
        if not (given.isascii() and given.isdigit()) or int(given) < 1:
            raise RoomError(f"{CORES_ENV}={given!r}: give a whole number of cores, 1 or more, or unset it")
        return int(given)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gpu_memory(index: str | None) -> tuple[int, int] | str:
    """(free MiB, total MiB) of GPU `index` (None: CUDA's default, the first one), or why it cannot be told."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "nvidia-smi is not on PATH"
    try:
        proc = subprocess.run([exe, "--query-gpu=index,memory.free,memory.total", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed ({exc})"
    rows = [[c.strip() for c in line.split(",")] for line in proc.stdout.splitlines() if line.strip()]
    rows = [r for r in rows if len(r) == 3 and all(c.isdigit() for c in r)]
    if proc.returncode != 0 or not rows:
        return f"nvidia-smi reports no GPU memory (exit {proc.returncode})"
    wanted = (index or rows[0][0]).split(",")[0].strip()
    row = next((r for r in rows if r[0] == wanted), None)
    if row is None:
        return f"nvidia-smi lists no GPU {wanted}"
    return int(row[1]), int(row[2])


@dataclass(frozen=True)
class Room:
    slots: int  # mode runs at once on the GPU
    workers: int | None  # the -n each run is given; None: its own, unchanged
    why: str  # one line for the log

    def pytest_args(self, own_workers: int) -> list[str]:
        """What a run whose suite asks for `own_workers` gets appended: -n cut to its share, or nothing."""
        return ["-n", str(self.workers)] if self.workers is not None and own_workers > self.workers else []


@dataclass(frozen=True)
class Ask:
    """What some mode runs ask of the GPUs they may share: the one shape every room decision takes.

    `runs_at_once`: the most that could run together (2 for a cell of three modes); `workers`: the -n
    of each (the widest asked); `peaks`: the last recorded peak GPU memory (MiB) of each run that may
    share a GPU, None where none was recorded; `wanted`: --slots-per-gpu (None: auto); `cap`: the
    suites' slots_per_gpu (the lowest); `gpus`: how many GPUs share the cores; `auto_most`: the most
    runs chosen unasked (3 for a cell whose scoped teeth can start with the pair).
    """

    runs_at_once: int
    workers: int
    peaks: Sequence[int | None] = ()
    wanted: int | None = None
    cap: int | None = None
    gpus: int = 1
    auto_most: int = AUTO_MOST


def decide(ask: Ask, cores_: int, memory: tuple[int, int] | str) -> Room:
    """The room on each of `ask.gpus` GPUs (they share `cores_`), given the tightest GPU's (free, total) MiB
    or why it cannot be read."""
    wanted, cap, runs_at_once, workers = ask.wanted, ask.cap, ask.runs_at_once, ask.workers
    peaks, gpus, auto_most = ask.peaks, ask.gpus, ask.auto_most
    why: list[str] = []
    most = max(1, runs_at_once)
    if wanted is not None:
        slots = min(wanted, most) if wanted > 1 else 1
        why.append(f"--slots-per-gpu {wanted}" + (f" (only {most} can run at once)" if wanted > most else ""))
    elif isinstance(memory, str):
        slots = 1
        why.append(f"no GPU memory to read ({memory}): one run at a time; --slots-per-gpu 2 overlaps them anyway")
    else:
        free, total = memory
        need = sorted((p if p is not None else total // UNKNOWN_SHARE for p in peaks), reverse=True) or [0]
        slots, used = 0, MARGIN_MIB
        for n in need[:min(most, auto_most)]:
            if used + n > free and slots >= 1:
                break
            used, slots = used + n, slots + 1
        slots = max(1, slots)
        unknown = sum(p is None for p in peaks)
        known = [p for p in peaks if p is not None]
        seen = (f"last peaks {', '.join(f'{p} MiB' for p in sorted(known, reverse=True)[:4])}" if known else "no peak recorded")
        if unknown and known:
            seen += f", {unknown} run(s) without one counted as {total // UNKNOWN_SHARE} MiB"
        elif unknown:
            seen += f" (each run counted as {total // UNKNOWN_SHARE} MiB, a quarter of the GPU)"
        why.append(f"GPU {free} of {total} MiB free, {seen}: {slots} fit" + (f" (at most {auto_most} unasked)"
                                                                             if most > auto_most else ""))
    if cap is not None and slots > cap:
        slots = cap
        why.append(f"the suite caps it at slots_per_gpu = {cap}")
    scaled: int | None = None
    if slots * gpus * workers > cores_:
        half = max(1, -(-workers // 2))
        # the most runs, from what memory allows down to two, whose share of the cores keeps half their workers
        cut = next((s for s in range(slots, 1, -1) if cores_ // (s * gpus) >= half), None)
        if slots > 1 and cut is not None:
            share = cores_ // (cut * gpus)
            scaled = share
            fewer = f" (not {slots}: -n {cores_ // (slots * gpus)} each would halve them or worse)" if cut < slots else ""
            why.append(f"{cut * gpus} runs of -n {workers} would need {cut * gpus * workers} of {cores_} cores: "
                       f"-n {share} each{fewer}")
            slots = cut
        elif slots > 1:
            share = cores_ // (2 * gpus)
            fit = max(1, cores_ // (gpus * workers))
            why.append(f"{slots * gpus} runs of -n {workers} would need {slots * gpus * workers} of {cores_} cores, "
                       f"and -n {max(share, 0)} each would halve them or worse: {fit} per GPU")
            slots = fit
        else:  # one run per GPU, as before this module: the GPUs asked for are not second-guessed
            why.append(f"{gpus} run(s) of -n {workers} on {cores_} cores: one per GPU, each with its own -n")
    else:
        why.append(f"{slots * gpus * workers} of {cores_} cores for {slots * gpus} run(s) of -n {workers}")
    return Room(slots, scaled, "; ".join(why))
