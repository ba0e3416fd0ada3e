"""What the EP census costs a mode run: a stored run replayed with the census on and off, alternating.

    python3 bench/ep_census.py RESULT.json [RESULT.json ...] [--repeat 3] [--out FILE.json]

Each RESULT.json is a session's stored result (results/<session>.json). Its pytest command is run again
exactly as the harness ran it (the same venv, probe, xdist, files and environment; a fresh private dir
in place of its workdir, with the same empty ini), `--repeat` times with ORT_MATRIX_EP_CENSUS=off and as
often with it on, alternating, so drift on a shared host hits both. Printed and written: each run's
wall time, the medians, on/off of the medians and of the fastest runs. The target (issue 32): at most 1.02. A run whose exit code differs
from the stored one is reported beside its time. Nothing here is a test: a missed target is reported,
not failed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.02
DROPPED = ("PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTEST_ADDOPTS", "PYTHONSTARTUP")


def replay(result: dict, census: bool) -> tuple[float, int]:
    old = result["workdir"]
    work = tempfile.mkdtemp(prefix="ep-census-bench-")  # 0700, as the harness's own
    try:
        Path(work, "pytest.ini").write_text("[pytest]\n")
        command = [arg.replace(old, work) for arg in result["command"]]
        env = {k: v for k, v in os.environ.items() if k not in DROPPED}
        env.update(result["env"], PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", ORT_MATRIX_ISOLATION=result.get("isolation", "restore"))
        if not census:
            env["ORT_MATRIX_EP_CENSUS"] = "off"
        start = time.monotonic()
        proc = subprocess.run(command, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.monotonic() - start, proc.returncode
    finally:
        subprocess.run(["rm", "-rf", work], check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    for path in args.results:
        result = json.loads(path.read_text())
        times: dict[str, list[float]] = {"off": [], "on": []}
        codes: dict[str, list[int]] = {"off": [], "on": []}
        for _ in range(args.repeat):
            for side in ("off", "on"):
                t, code = replay(result, census=side == "on")
                times[side].append(round(t, 3))
                codes[side].append(code)
        off, on = statistics.median(times["off"]), statistics.median(times["on"])
        fastest = round(min(times["on"]) / min(times["off"]), 4)  # the least disturbed run of each: robust to spikes
        row = {"session": result["session"], "tests": result["counts"]["collected"], "stored_exit": result["pytest_exit_code"],
               "off_s": times["off"], "on_s": times["on"], "codes": codes, "median_off_s": off, "median_on_s": on,
               "ratio": round(on / off, 4), "fastest_ratio": fastest, "target": TARGET, "met": on / off <= TARGET}
        rows.append(row)
        print(f"{row['session']}: {row['tests']} tests; census off {off:.2f} s, on {on:.2f} s (medians of {args.repeat}): "
              f"{row['ratio']:.3f}x (fastest of each: {fastest:.3f}x), target <= {TARGET}: {'met' if row['met'] else 'MISSED'}; "
              f"exit codes {codes}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
