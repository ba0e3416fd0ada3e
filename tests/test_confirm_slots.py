"""A confirmation rerun of a --gpus sweep runs under the GPU its first run was given: the slot's
CUDA_VISIBLE_DEVICES and NCCL_NVLS_ENABLE=0, as the test itself records them (suites/slots/test_sleep.py),
and its stored result records that GPU too."""
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import PY, REPO, SUITES
from test_scheduler import MATRIX


def test_a_rerun_confirms_under_the_slot_env_of_the_run_it_confirms(tmp_path, venvs):
    log = tmp_path / "slots.jsonl"
    (tmp_path / "m.toml").write_text(MATRIX.format(py=PY, root=SUITES / "slots", log=log, sleep="0"))
    path = ":".join(d for d in os.environ["PATH"].split(":") if not (Path(d) / "nvidia-smi").exists())
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE")}
    env.update({"PATH": path, "MATRIX_TOML": str(tmp_path / "m.toml"), "MATRIX_RESULTS": str(tmp_path / "results"),
                "MATRIX_VENVS": str(venvs)})
    # cell d fails on purpose, unexpectedly: --confirm 1 reruns it once; GPU 3 is taken as given (no nvidia-smi)
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", "--",
                           "--gpus", "3", "--select", f"gpu-{PY}-d", "--confirm", "1"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode != 0, proc.stdout[-3000:]  # the failure reproduces: the sweep fails
    session = f"gpu-{PY}-d-normal"
    assert f"confirm: {session}: rerun 1 of 1, 1 test(s) on gpu 3, as its first run" in proc.stdout, proc.stdout[-3000:]
    ends = [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"]
    assert len(ends) == 2 and ends[0]["pid"] != ends[1]["pid"], ends  # the first run and its rerun
    assert [(r["cuda_visible_devices"], r["nccl_nvls_enable"]) for r in ends] == [("3", "0")] * 2, ends
    doc = json.loads((tmp_path / "results" / "sweep.json").read_text())
    (rerun,) = doc["confirmation"][session]["reruns"]
    stored = json.loads((Path(rerun["bundle"]) / "result.json").read_text())
    assert stored["run_id"] == rerun["run_id"]
    assert stored["gpu"]["cuda_visible_devices"] == "3"  # the rerun's result records the slot's GPU
