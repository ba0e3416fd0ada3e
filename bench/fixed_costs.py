"""Where a bare run's time goes: the fixed costs every pytest run pays before its first test, against the tests' own.

    python bench/fixed_costs.py --matrix M --cell gpu-3.12-h200 [--workers 2,4,8] [--out DIR]

Issue 49 asks for a cell under 1.4x one bare run. What a cut mode can save depends on how much of a run is fixed
(interpreter, plugins, imports of torch, onnx and ORT, collection, in each xdist worker) and how much is the
tests'. Each step runs in the cell's venv with require_cudnn's environment, as the bare run of below_floor.py:
1. import: `python -c "import torch, onnx, onnxruntime"`;
2. collect: `pytest --collect-only -n 0` (one process imports and collects every test file);
3. empty at -n N: every worker starts, imports and collects, and no test runs (`-k` matching nothing; exit 5);
4. serial: every test in one process (`-n 0`), with a JUnit file: each test's own time;
5. full at the suite's -n, with a JUnit file.
Wall time and the reaped process tree's CPU time of each. The JUnit files are written to --out for a look at which
tests cost what. Nothing here is a test.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.below_floor import timed  # noqa: E402
from bench.one_gpu import bare_cmd  # noqa: E402
from ort_gpu_matrix.config.loader import load_matrix  # noqa: E402
from ort_gpu_matrix.config.overrides import Overrides  # noqa: E402
from ort_gpu_matrix.host.host import resolve  # noqa: E402
from ort_gpu_matrix.plan.cells import cells_of  # noqa: E402

NOTHING = "no_test_is_named_this_f1x3d"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--matrix", default=str(REPO / "matrix.toml"))
    ap.add_argument("--cell", required=True)
    ap.add_argument("--workers", default="2,4,8", help="the -n of each empty run")
    ap.add_argument("--steps", default="", help="e.g. serial,full: only these steps")
    ap.add_argument("--env", action="append", default=[], help="K=V set for every step (e.g. OMP_WAIT_POLICY=PASSIVE)")
    ap.add_argument("--spin-off", action="store_true", help="every ORT session with its threads' spinning off "
                    "(bench/plugins/ort_spin_off.py)")
    ap.add_argument("--tag", default="", help="a suffix for the JUnit and JSON files")
    ap.add_argument("--imports", default="torch,onnx,onnxruntime", help="what step 1 imports")
    ap.add_argument("--out", default=str(REPO / "bench" / "fixed-costs"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("BENCH_WORK") or tempfile.mkdtemp(prefix="bench-fixed-"))
    work.mkdir(parents=True, exist_ok=True)
    base = {**os.environ, "MATRIX_TOML": args.matrix, "MATRIX_RESULTS": str(work / "r")}
    base.setdefault("MATRIX_VENVS", str(work / "venvs"))
    matrix = load_matrix(Path(args.matrix), Overrides.from_environ(base))
    cell = next(c for c in cells_of(matrix) if c.name == args.cell)
    root = resolve(cell, matrix.workspace).suite_root  # its conftests cut there, as below_floor.py's bare run
    cmd, env, cwd = bare_cmd(matrix, cell, work, "require_cudnn", ("--confcutdir", root))
    env |= dict(kv.split("=", 1) for kv in args.env)
    if args.spin_off:
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "bench" / "plugins"), *filter(None, [env.get("PYTHONPATH")])])
        cmd = [*cmd, "-p", "ort_spin_off"]
    tag = f"-{args.tag}" if args.tag else ""
    log = out / f"fixed-costs{tag}.log"
    steps: dict[str, list[str]] = {"import": [cmd[0], "-c", f"import {args.imports}"],
                                   "collect": [*cmd, "--collect-only", "-n", "0"]}
    for n in args.workers.split(","):
        steps[f"empty -n {n}"] = [*cmd, "-k", NOTHING, "-n", n]
    steps["serial"] = [*cmd, "-n", "0", f"--junitxml={out / f'serial{tag}.xml'}"]
    steps["full"] = [*cmd, f"--junitxml={out / f'full{tag}.xml'}"]
    got = {}
    for name, argv in steps.items():
        if args.steps and name.split(" ")[0] not in args.steps.split(","):
            continue
        wall, cpu, code, _ = timed(argv, env, cwd, log)
        got[name] = {"wall": wall, "cpu": cpu, "exit": code}
        print(f"{name}: {wall} s, {cpu} CPU-s, exit {code}", flush=True)
    (out / f"fixed-costs{tag}.json").write_text(json.dumps({"cell": cell.name, "env": args.env, "spin_off": args.spin_off, "steps": got}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
