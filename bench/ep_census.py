"""What the EP census, or its node census alone, costs a mode run: a stored run replayed with it on and off, alternating.

    python3 bench/ep_census.py RESULT.json [RESULT.json ...] [--what ep|nodes] [--repeat 3] [--out FILE.json]

Each RESULT.json is a session's stored result (results/<session>.json). Its pytest command is run again
exactly as the harness ran it (the same venv, probe, xdist, files and environment; a fresh private dir
in place of its workdir, with the same empty ini), `--repeat` times with the census off and as often with it
on, alternating, so drift on a shared host hits both. `--what ep` (the default) toggles the whole EP census
(ORT_MATRIX_EP_CENSUS=off on the off side); `--what nodes` keeps the EP census on both sides and toggles only
its node census (ORT_MATRIX_NODE_CENSUS=off on the off side: ORT is not asked to record each CUDA-served
build's placement, and nothing reads it), so the ratio is what the node census adds to the EP census. Printed and written: each run's
wall time and CPU time (user + system of the whole process tree: what the census itself would add, with
less of the GPU's and the scheduler's spread), the medians, on/off of the medians, of the fastest runs
and the median of each pair's on/off. `--previous FILE.json` (an earlier --out of the same result, on the
same machine, of the same --what) adds its runs to these: more pairs from calls that each fit the device's time
limit. The target (issue 32 for the EP census, issue 48 for the node census): at most 1.02. A run whose exit code differs
from the stored one is reported beside its time. Nothing here is a test: a missed target is reported,
not failed.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.02
OFF_ENV = {"ep": {"ORT_MATRIX_EP_CENSUS": "off"},  # what the off side of each --what sets
           "nodes": {"ORT_MATRIX_NODE_CENSUS": "off"}}
TOGGLED = tuple(name for env in OFF_ENV.values() for name in env)  # never inherited from the caller's shell
DROPPED = ("PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTEST_ADDOPTS", "PYTHONSTARTUP", *TOGGLED)


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def replay(result: dict, census: bool, what: str = "ep") -> tuple[float, float, int]:
    """One run of the stored command, with `what` on or off: its wall time, its process tree's CPU time and its
    exit code."""
    old = result["workdir"]
    work = tempfile.mkdtemp(prefix="ep-census-bench-")  # 0700, as the harness's own
    try:
        Path(work, "pytest.ini").write_text("[pytest]\n")
        command = [arg.replace(old, work) for arg in result["command"]]
        env = {k: v for k, v in os.environ.items() if k not in DROPPED}
        for name, value in result["env"].items():  # as the test process had it: None is unset there
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", ORT_MATRIX_ISOLATION=result.get("isolation", "restore"))
        if not census:
            env.update(OFF_ENV[what])
        start, cpu = time.monotonic(), _children_cpu()
        proc = subprocess.run(command, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.monotonic() - start, _children_cpu() - cpu, proc.returncode
    finally:
        subprocess.run(["rm", "-rf", work], check=False)


def summary(result: dict, times: dict[str, list[float]], cpus: dict[str, list[float]],
            codes: dict[str, list[int]], what: str = "ep") -> dict:
    """The row for one session: every run, and the ratios that judge the target."""
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    pairs = [b / a for a, b in zip(times["off"], times["on"], strict=True)]  # each pair ran back to back: drift hits both
    cpu_off, cpu_on = statistics.median(cpus["off"]), statistics.median(cpus["on"])
    cpu_pairs = [b / a for a, b in zip(cpus["off"], cpus["on"], strict=True) if a]
    return {"session": result["session"], "what": what, "tests": result["counts"]["collected"], "stored_exit": result["pytest_exit_code"],
            "pairs": len(pairs), "off_s": times["off"], "on_s": times["on"], "off_cpu_s": cpus["off"],
            "on_cpu_s": cpus["on"], "codes": codes, "median_off_s": off, "median_on_s": on,
            "ratio": round(on / off, 4),
            "fastest_ratio": round(min(times["on"]) / min(times["off"]), 4),  # the least disturbed run of each
            "paired_ratio": round(statistics.median(pairs), 4),
            "cpu_ratio": round(cpu_on / cpu_off, 4) if cpu_off else None,
            "cpu_paired_ratio": round(statistics.median(cpu_pairs), 4) if cpu_pairs else None,
            "target": TARGET, "met": on / off <= TARGET}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--what", choices=sorted(OFF_ENV), default="ep",
                    help="ep: the whole EP census on and off; nodes: the EP census on both sides, its node census "
                         "on and off")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--previous", type=Path, help="an earlier --out: its runs of the same sessions are added")
    args = ap.parse_args()
    earlier = {row["session"]: row for row in json.loads(args.previous.read_text())
               if row.get("what", "ep") == args.what} if args.previous else {}
    rows = []
    for path in args.results:
        result = json.loads(path.read_text())
        before = earlier.get(result["session"], {})
        times = {side: list(before.get(f"{side}_s", [])) for side in ("off", "on")}
        cpus = {side: list(before.get(f"{side}_cpu_s", [])) for side in ("off", "on")}
        codes = {side: list(before.get("codes", {}).get(side, [])) for side in ("off", "on")}
        for _ in range(args.repeat):
            for side in ("off", "on"):
                t, cpu, code = replay(result, census=side == "on", what=args.what)
                times[side].append(round(t, 3))
                cpus[side].append(round(cpu, 3))
                codes[side].append(code)
        row = summary(result, times, cpus, codes, args.what)
        rows.append(row)
        print(f"{row['session']}: {row['tests']} tests; {'node census' if args.what == 'nodes' else 'census'} off {row['median_off_s']:.2f} s, on {row['median_on_s']:.2f} s "
              f"(medians of {row['pairs']} pairs): {row['ratio']:.3f}x (fastest of each: {row['fastest_ratio']:.3f}x, "
              f"median of the pairs: {row['paired_ratio']:.3f}x; CPU time {row['cpu_ratio']:.3f}x, its pairs' median "
              f"{row['cpu_paired_ratio']:.3f}x), target <= {TARGET}: "
              f"{'met' if row['met'] else 'MISSED'}; exit codes {codes}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
