"""Which resource a one-GPU schedule is bound by: the CPU's and the GPU's use in each phase of a sweep's timeline.

    python bench/util_phases.py UTIL.txt TIMELINE [TIMELINE ...]

UTIL.txt is what docs/evidence/run-one-gpu-cells-h200.sh samples every second: a wall time, /proc/stat's first
line (the CPU's jiffies) and nvidia-smi's utilization.gpu. Each TIMELINE is a sweep's sweep-timeline.json, or a
results dir: its sweep-timeline.json, else every stored run's start and duration (bench/stored_runs.py).
A phase runs from one run's start or end to the next (of 1 s or more); for each: the runs going, the share of all cores busy
(from the jiffies), and the GPU's mean utilization. Nothing here is a test.
"""
from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.stored_runs import stored_runs  # noqa: E402


def samples(path: Path) -> list[tuple[float, int, int, float | None]]:
    """(time, busy jiffies, all jiffies, GPU %) per sample line that parses."""
    out = []
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) < 9 or f[1] != "cpu":
            continue
        try:
            t, ticks = float(f[0]), [int(x) for x in f[2:12] if x.isdigit()]
        except ValueError:
            continue
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
        gpu = float(f[-1]) if f[-1].replace(".", "", 1).isdigit() and len(f) > 12 else None
        out.append((t, sum(ticks) - idle, sum(ticks), gpu))
    return out


def phases(timeline: list[dict], util: list[tuple[float, int, int, float | None]]) -> list[str]:
    edges = sorted({r["started"] for r in timeline} | {r["ended"] for r in timeline})
    t0 = edges[0] if edges else 0.0
    lines = []
    for a, b in itertools.pairwise(edges):
        if b - a < 1.0:
            continue  # runs starting or ending together: no sample tells them apart
        going = [r["session"].split("-", 2)[-1] for r in timeline if r["started"] < b and r["ended"] > a]
        inside = [s for s in util if a <= s[0] <= b]
        if len(inside) >= 2:
            (_, b0, a0, _), (_, b1, a1, _) = inside[0], inside[-1]
            cpu = f"{100 * (b1 - b0) / max(1, a1 - a0):.0f}% CPU"
        else:
            cpu = "CPU ?"
        gpus = [s[3] for s in inside if s[3] is not None]
        gpu = f"{sum(gpus) / len(gpus):.0f}% GPU" if gpus else "GPU ?"
        lines.append(f"{a - t0:6.1f} -> {b - t0:6.1f} s: {cpu}, {gpu}: {', '.join(going)}")
    return lines


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    util = samples(Path(sys.argv[1]))
    for d in sys.argv[2:]:
        path = Path(d) / "sweep-timeline.json" if Path(d).is_dir() else Path(d)
        try:
            timeline = json.loads(path.read_text()) if path.exists() or not Path(d).is_dir() else stored_runs(Path(d))
        except (OSError, ValueError) as exc:
            print(f"## {d}: no timeline to read ({exc})")
            continue
        print(f"## {d}")
        for line in phases(timeline, util):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
