"""The physical anchor of a mode-scheduled sweep: the same pytest commands, started by hand, one queue per GPU.

Reads a sweep's results dir: each result records its exact pytest command and the environment the
harness applied, and sweep-timeline.json says which GPU ran each mode run and in what order. One
thread per GPU runs its queue in that order, all queues starting at the same moment; a teeth run
waits for its cell's require_cudnn, as the sweep's does. No nox, no harness, no probe files read:
only the pytest processes, each in a fresh private dir. Prints and writes the timings.

    python3 anchor.py RESULTS_DIR --out anchor.json
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
    if (result.get("teeth_coverage") or {}).get("scope") == "cudnn":
        raise SystemExit(f"{result['session']}: a scoped teeth needs the probe's node-id file; replay unscoped sweeps")
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
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    sweep = json.loads((args.results / "sweep.json").read_text())
    results = {c["session"]: json.loads(Path(c["result"]).read_text()) for c in sweep["cells"]}
    timeline = sorted(json.loads((args.results / "sweep-timeline.json").read_text()), key=lambda t: t["started"])
    queues: dict[str, list[dict]] = {}
    for t in timeline:  # each slot's runs in the order it ran them (several slots of one GPU: one queue each)
        queues.setdefault(f"{t['gpu']}/{t['slot']}", []).append(t)
    done = {t["session"]: threading.Event() for t in timeline}
    runs: list[dict] = []

    def queue(runs_of_slot: list[dict]) -> None:
        for t in runs_of_slot:
            if t["mode"] == "teeth":
                wait_for = f"{t['cell']}-require_cudnn"
                if wait_for in done:
                    done[wait_for].wait()
            runs.append(replay(results[t["session"]], t["gpu"]))
            done[t["session"]].set()

    start = time.time()
    threads = [threading.Thread(target=queue, args=(q,)) for q in queues.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - start
    for r in sorted(runs, key=lambda r: r["started"]):
        print(f"  [gpu {r['gpu']}] {r['session']}: {r['started'] - start:6.1f} -> {r['ended'] - start:6.1f} s,"
              f" pytest exit {r['exit']}")
    print(f"anchor wall: {wall:.1f} s over {len(runs)} pytest runs in {len(queues)} queues")
    args.out.write_text(json.dumps({"wall_s": round(wall, 3), "start": start, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
