"""The physical anchor of the two-GPU sweep: the same cells' pytest commands, started by hand, one queue per GPU.

Reads the results a sweep stored (each records its exact pytest command and the environment the
harness applied), gives cell i to GPU i % len(gpus), and starts one queue per GPU at the same moment;
each queue runs its cells' mode commands one after another, as a slot of the sweep does. No nox, no
harness: only the pytest processes, each in a fresh private dir. Prints and writes the timings.

    python3 anchor.py RESULTS_DIR --gpus 0,1 --out anchor.json
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

SCRUBBED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "LD_PRELOAD", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
            "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "ORT_TEST_REQUIRE_CUDNN_SDPA")


def replay(result: dict, gpu: str) -> dict:
    old = result["workdir"]
    work = tempfile.mkdtemp(prefix="anchor-")
    Path(work, "pytest.ini").write_text("[pytest]\n")
    cmd = [arg.replace(old, work) for arg in result["command"]]
    venv = result["venv"]["path"]
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED and not k.startswith("ORT_MATRIX_")}
    env.update(result["env"])
    env.update({"PATH": f"{venv}/bin:{env.get('PATH', '')}", "VIRTUAL_ENV": venv, "PYTHONSAFEPATH": "1",
                "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                "ORT_MATRIX_REPORT": f"{work}/report.json", "ORT_MATRIX_PROGRESS": f"{work}/progress.tsv",
                "CUDA_VISIBLE_DEVICES": gpu, "NCCL_NVLS_ENABLE": "0"})
    started = time.time()
    with open(f"{work}/pytest.log", "wb") as log:
        code = subprocess.call(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    ended = time.time()
    shutil.rmtree(work, ignore_errors=True)
    return {"session": result["session"], "gpu": gpu, "started": started, "ended": ended, "exit": code}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results", type=Path)
    p.add_argument("--gpus", default="0,1")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    sweep = json.loads((args.results / "sweep.json").read_text())
    cells: dict[str, list[dict]] = {}
    for entry in sweep["cells"]:
        cells.setdefault(entry["cell"], []).append(json.loads(Path(entry["result"]).read_text()))
    gpus = args.gpus.split(",")
    queues: dict[str, list[dict]] = {g: [] for g in gpus}
    for i, modes in enumerate(cells.values()):
        queues[gpus[i % len(gpus)]].extend(modes)
    runs: list[dict] = []
    start = time.time()
    threads = [threading.Thread(target=lambda g=g: runs.extend(replay(r, g) for r in queues[g])) for g in gpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - start
    for r in sorted(runs, key=lambda r: r["started"]):
        print(f"  [gpu {r['gpu']}] {r['session']}: {r['started'] - start:6.1f} -> {r['ended'] - start:6.1f} s,"
              f" pytest exit {r['exit']}")
    print(f"anchor wall: {wall:.1f} s over {len(runs)} pytest runs on GPUs {args.gpus}")
    args.out.write_text(json.dumps({"wall_s": round(wall, 3), "start": start, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
