"""The developer loop, measured as CI runs it: a fresh clone of a commit, then `bash .ci/run`, timed.

    python3 bench/dev_loop.py                 # HEAD of this checkout
    python3 bench/dev_loop.py --ref main --out loop.json

Issue 33's finish line is a fresh-clone `.ci/run` within 12 minutes on the 2-core machine. This prints that wall
time, pytest's own, the CPU the run used (user + system, children included: how far from two full cores it
was), and where the test time goes: the worker-seconds of each test file (setup, call and teardown, from a
JUnit XML that PYTEST_ADDOPTS adds to the README's test command) and the slowest tests.

`.ci/run` installs the clone in editable mode, as CI does; at the end this checkout is installed again
(`pip install -e . --no-deps`), so the interpreter's `ort_gpu_matrix` points back here. Nothing here is a test.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET  # noqa: S405 - our own pytest's JUnit file, not untrusted input
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIMIT_S = 12 * 60


def per_file(junit: Path) -> tuple[Counter[str], list[tuple[float, str]], float]:
    """(worker-seconds per test file, every test's seconds, pytest's own wall time) from one JUnit XML."""
    root = ET.parse(junit).getroot()  # noqa: S314
    files: Counter[str] = Counter()
    tests = []
    wall = 0.0
    for suite in root.iter("testsuite"):
        wall = max(wall, float(suite.get("time", 0)))
        for case in suite.iter("testcase"):
            seconds = float(case.get("time", 0))
            module = (case.get("classname") or "").split(".")
            name = ("/".join(module[:2]) + ".py") if len(module) >= 2 else "?"
            files[name] += seconds
            tests.append((seconds, f"{name}::{case.get('name')}"))
    return files, sorted(tests, reverse=True), wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="HEAD", help="the commit to clone (default: HEAD)")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here too")
    ap.add_argument("--top", type=int, default=15, help="how many files and tests to list")
    args = ap.parse_args()
    sha = subprocess.run(["git", "rev-parse", args.ref], cwd=REPO, capture_output=True, text=True, check=True)
    with tempfile.TemporaryDirectory(prefix="ort-matrix-loop-") as tmp:  # 0700, removed at the end
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", sha.stdout.strip()], cwd=clone, check=True)
        junit = Path(tmp) / "junit.xml"
        env = {**os.environ, "CI": "true", "PYTEST_ADDOPTS": f"--junitxml={junit}"}
        env.pop("PYTHONPATH", None)
        start, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(["bash", ".ci/run"], cwd=clone, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        files, tests, pytest_wall = per_file(junit) if junit.exists() else (Counter(), [], 0.0)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)], check=False,
                   stdout=subprocess.DEVNULL)
    out = {"ref": sha.stdout.strip(), "rc": proc.returncode, "wall_s": round(wall, 1),
           "pytest_wall_s": round(pytest_wall, 1), "cpu_s": round(cpu, 1), "cores": os.cpu_count(),
           "limit_s": LIMIT_S, "tests": len(tests), "worker_s": round(sum(files.values()), 1),
           "files": {f: round(s, 1) for f, s in files.most_common()},
           "slowest": [{"test": t, "s": round(s, 1)} for s, t in tests[:args.top]]}
    print(f"fresh-clone .ci/run at {out['ref'][:10]}: rc {proc.returncode}, {wall:.0f} s "
          f"({'within' if wall <= LIMIT_S else 'over'} {LIMIT_S} s); pytest {pytest_wall:.0f} s, {len(tests)} tests, "
          f"{out['worker_s']:.0f} worker-s; CPU {cpu:.0f} s = {cpu / wall:.2f} of {os.cpu_count()} cores")
    for f, s in files.most_common(args.top):
        print(f"  {s:7.1f} s  {f}")
    print("slowest tests:")
    for s, t in tests[:args.top]:
        print(f"  {s:7.1f} s  {t}")
    if proc.returncode != 0:
        print(proc.stdout[-3000:])
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
