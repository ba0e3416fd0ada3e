"""What confirming regressions costs a sweep: 0, 7 and 700 regressions, with --confirm 2 against --confirm 0.

    python bench/confirm.py [--repeat 3] [--out docs/evidence/bench/cpu-confirm.json]

A CPU fixture cell (the CPU onnxruntime wheel, normal mode) of 1,400 tests, written to a temp dir:
700 tests that run a session printing a fake SdpaKernel tier (the canary suite's fake_sdpa) and 700
plain ones. After a baseline sweep, each case is swept against it with --confirm 0 and with
--confirm 2 (alternating, medians of --repeat):
  0    nothing changed;
  7    seven tests fail (BENCH_BREAK=7): confirmed, two reruns of 7 tests;
  700  MATH forced on every session (provider_options sdpa_kernel=16): 700 tier regressions, all
       confirmed, two reruns of 700 tests. The target: at most 2x the sweep without confirmation.
Nothing here is a test: a missed target is reported, not failed.
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

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "suites"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
N = 700

SUITE = '''import os
import numpy as np
import pytest
from fake_sdpa import session

BREAK = int(os.environ.get("BENCH_BREAK", "0"))


@pytest.mark.parametrize("i", range({n}))
def test_tier(i, capfd):
    sess = session()
    sess.run(None, {{"x": np.array([1.0, 2.0], dtype=np.float32)}})
    assert "SdpaKernel=" in capfd.readouterr().out
    assert i >= BREAK, "broken on purpose"


@pytest.mark.parametrize("i", range({n}))
def test_plain(i):
    assert i >= 0
'''

MATRIX = """
[matrix]
prefix = "b"
pythons = ["{py}"]
suite = "b"
modes = ["normal"]
[ort.cpu]
requirement = "onnxruntime==1.32.0"
with = ["onnx==1.20.1"]
[torch.none]
skip = true
[libs.x]
none = true
[suite.b]
root = "{root}"
files = ["test_bench.py"]
pythonpath = [".", "{canary}", "{suites}"]
env = {{ BENCH_BREAK = "{brk}" }}
{extra}
[suite.b.expect.normal]
known_failures = []
"""


def sweep(work: Path, venvs: Path, brk: int, math: bool, *args: str) -> float:
    root = work / "suite"
    (work / "matrix.toml").write_text(MATRIX.format(
        py=PY, root=root, canary=FIXTURES / "canary", suites=FIXTURES, brk=brk,
        extra='provider_options = { sdpa_kernel = "16" }' if math else ""))
    env = {**os.environ, "MATRIX_TOML": str(work / "matrix.toml"), "MATRIX_RESULTS": str(work / "results"),
           "MATRIX_VENVS": str(venvs), "MATRIX_BASELINES": str(work / "baselines")}
    env.pop("GITHUB_STEP_SUMMARY", None)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", "--", *args],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench" / "confirm.json"))
    ap.add_argument("--tier-tests", type=int, default=N, help="tests that dispatch a tier (as many plain ones)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-confirm-") as tmp:
        work, venvs = Path(tmp), Path(tmp) / "venvs"
        (work / "suite").mkdir()
        (work / "suite" / "test_bench.py").write_text(SUITE.format(n=a.tier_tests))
        sweep(work, venvs, 0, False, "--save-baseline", "base", "--confirm", "0")  # builds the venv too
        rows = {}
        for name, brk, math in (("0", 0, False), ("7", 7, False), (str(a.tier_tests), 0, True)):
            off, on = [], []
            for _ in range(a.repeat):
                off.append(sweep(work, venvs, brk, math, "--baseline", "base", "--confirm", "0"))
                on.append(sweep(work, venvs, brk, math, "--baseline", "base", "--confirm", "2"))
            doc = json.loads((work / "results" / "sweep.json").read_text())
            reruns = [r["selected"] for rec in doc["confirmation"].values() for r in rec["reruns"]]
            rows[name] = {"confirm_0_s": round(statistics.median(off), 3), "confirm_2_s": round(statistics.median(on), 3),
                          "ratio": round(statistics.median(on) / statistics.median(off), 3),
                          "regressions": len(doc["regressions"]), "unconfirmed": len(doc["unconfirmed"]),
                          "reruns_selected": reruns}
    out = {"tests": 2 * a.tier_tests, "repeat": a.repeat, "python": PY, "cases": rows}
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print("regressions  --confirm 0  --confirm 2  ratio  reruns (tests each)")
    for name, r in rows.items():
        print(f"{name:>11}  {r['confirm_0_s']:>9.3f} s  {r['confirm_2_s']:>9.3f} s  {r['ratio']:.3f}  {r['reruns_selected']}")
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
