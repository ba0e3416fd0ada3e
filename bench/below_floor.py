"""Below the floor: a full-truth cell (its three modes, each running only what it can change) against one bare require
run of the seed recipe, alternating pairs; wall time and the process tree's CPU time. Prints the ratios.

    python bench/below_floor.py --matrix M --cell gpu-3.12-h200 [--repeat 5] [--full] [--out F.json]

1. bare: `python -m pytest` by hand in the cell's venv, the suite's files and -n, with require_cudnn's environment
   (ORT_TEST_REQUIRE_CUDNN_SDPA=1: the recipe's canary run), plugin autoload on, as a user runs it;
2. cell: `nox -s CELL` (normal, require_cudnn, teeth as the host decides), in a results dir warmed by one untimed
   run first, so its census and the runs on record are there, as on any day after the first (skipped where
   BENCH_WORK holds a warmed dir already: `--repeat 0` warms only, so a large suite's pairs can be split
   across calls that each fit a time limit);
3. with --full: the same cell with `-- --full` too, every mode running every test (what a cell cost before);
4. with --serial: the same with its mode runs one after another (`--slots-per-gpu 1`; a sweep's `--gpus none`).
Each figure is the median of --repeat runs taken in turn (bare, cell[, full]). CPU time is that of every process
the command started, reaped (RUSAGE_CHILDREN). The cell's require_cudnn outcomes (ran and carried) are checked
against the bare run's per-test outcomes (`-rA`'s PASSED/FAILED/ERROR lines): the same, or each difference.
Target: cell <= 1.4 x bare, wall and CPU. Nothing here is a test: a missed target is reported, not failed.

`--cell` twice or more times a sweep instead: `nox -s sweep -- --select A B` (with `--full` on the full side)
against each cell's bare require run one after another, the bare figures summed: what a release engineer pays
for the cells by hand, the seed recipe once a cell, against what the sweep pays for every mode of each.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.one_gpu import bare_cmd  # noqa: E402
from bench.run import median, nox_cmd  # noqa: E402
from ort_gpu_matrix.config.loader import load_matrix  # noqa: E402
from ort_gpu_matrix.config.overrides import Overrides  # noqa: E402
from ort_gpu_matrix.host.host import resolve  # noqa: E402
from ort_gpu_matrix.plan.cells import cells_of  # noqa: E402

TARGET = 1.4
_LINE = re.compile(r"^(PASSED|FAILED|ERROR) (\S+)")


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the whole reaped tree, exit code, output)."""
    start, cpu = time.monotonic(), _children_cpu()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    wall, used = time.monotonic() - start, _children_cpu() - cpu
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(cmd)}\n{proc.stdout}\n")
    return round(wall, 3), round(used, 3), proc.returncode, proc.stdout


def bare_outcomes(output: str, cwd: Path, root: str) -> dict[str, str]:
    """The bare run's `-rA` lines as node ids relative to the suite's root (pytest prints them from its cwd)."""
    out = {}
    for line in output.splitlines():
        m = _LINE.match(line)
        if m:
            path, sep, rest = m.group(2).partition("::")
            out[os.path.relpath(os.path.normpath(cwd / path), root) + sep + rest] = m.group(1).lower()
    return out


def cell_outcomes(results: Path, session: str) -> dict[str, str] | None:
    """The cell's require_cudnn outcomes of tests (ran and carried), or None where it has no require_cudnn."""
    path = results / f"{session}.json"
    if not path.exists():
        return None
    r = json.loads(path.read_text())
    return {n: o for n, o in r["outcomes"].items() if " " not in n and o in ("passed", "failed", "error")}


def compare(bare: dict[str, str], cell: dict[str, str]) -> list[str]:
    return [f"{n}: bare {bare.get(n, '-')}, cell {cell.get(n, '-')}" for n in sorted(set(bare) | set(cell))
            if bare.get(n) != cell.get(n)]


def _add(walls: dict[str, list[float]], cpus: dict[str, list[float]], codes: dict[str, list[int]], name: str,
         got: tuple[float, float, int]) -> None:
    walls[name].append(got[0])
    cpus[name].append(got[1])
    codes[name].append(got[2])


def ratio(a: list[float], b: list[float]) -> float | None:
    return round(median(b) / median(a), 4) if a and median(a) else None


def side_cmd(names: list[str], full: bool, serial: bool = False) -> list[str]:
    """One cell: its nox session; several: one sweep of them (what a release sweep runs). `serial`: its mode runs
    one after another (a cell's --slots-per-gpu 1, a sweep's --gpus none), what either did before it overlapped."""
    if len(names) == 1:
        extra = [*(["--full"] if full else []), *(["--slots-per-gpu", "1"] if serial else [])]
        return nox_cmd("-s", names[0], *(["--", *extra] if extra else []))
    return nox_cmd("-s", "sweep", "--", "--select", *names, *(["--full"] if full else []),
                   *(["--gpus", "none"] if serial else []))


def warm(cells, sides: dict[str, tuple[bool, bool, Path]], base: dict[str, str], log: Path) -> None:
    """One untimed run of each side, so its census and the runs on record are there, as on day two."""
    for full, serial, results in sides.values():
        if all((results / f"{c.mode_session(c.modes[-1])}.json").exists() for c in cells):  # an earlier call warmed it
            continue
        timed(side_cmd([c.name for c in cells], full, serial), {**base, "MATRIX_RESULTS": str(results)}, REPO, log)


def bare_runs(matrix, cells, work: Path) -> list[tuple[list[str], dict[str, str], Path, str]]:
    """Each cell's bare require run (its command, environment, cwd and suite root, where its ids are read from)."""
    out = []
    for cell in cells:
        root = resolve(cell, matrix.workspace).suite_root  # its conftests cut there, its ids read from there
        cmd, env, cwd = bare_cmd(matrix, cell, work, "require_cudnn", ("--confcutdir", root, "-rA"))
        out.append((cmd, env, cwd, root))
    return out


def timed_bare(bares, log: Path) -> tuple[float, float, int, list[str]]:
    """The bare runs one after another: summed wall and CPU, the worst exit code, each run's output."""
    got = [timed(cmd, env, cwd, log) for cmd, env, cwd, _ in bares]
    worst = max((g[2] for g in got), key=lambda code: (code not in (0, 1), code))
    return (round(sum(g[0] for g in got), 3), round(sum(g[1] for g in got), 3), worst, [g[3] for g in got])


def outcome_diffs(cells, bares, outputs: list[str], work: Path) -> list[str]:
    """Each cell's require_cudnn outcomes (ran and carried) against its own bare run's."""
    diffs = []
    for cell, (_, _, cwd, root), output in zip(cells, bares, outputs, strict=True):
        mine = cell_outcomes(work / "cell", cell.mode_session("require_cudnn"))
        found = ["the cell has no require_cudnn run"] if mine is None else compare(bare_outcomes(output, cwd, root), mine)
        diffs += [f"{cell.name}: {d}" if len(cells) > 1 else d for d in found]
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--matrix", default=str(REPO / "matrix.toml"))
    ap.add_argument("--cell", required=True, action="append",
                    help="a cell session; given twice or more, those cells as one sweep against their bare runs")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--full", action="store_true", help="time the cell with --full too (every mode, every test)")
    ap.add_argument("--serial", action="store_true",
                    help="time it with its mode runs one after another too (--slots-per-gpu 1; a sweep's --gpus none)")
    ap.add_argument("--out", default=str(REPO / "bench" / "below-floor.json"))
    args = ap.parse_args()
    work = Path(os.environ.get("BENCH_WORK") or tempfile.mkdtemp(prefix="bench-below-floor-"))
    work.mkdir(parents=True, exist_ok=True)
    base = {**os.environ, "MATRIX_TOML": args.matrix, "PYTHONUNBUFFERED": "1"}
    base.setdefault("MATRIX_VENVS", str(work / "venvs"))
    matrix = load_matrix(Path(args.matrix), Overrides.from_environ({**base, "MATRIX_RESULTS": str(work / "r")}))
    by_name = {c.name: c for c in cells_of(matrix)}
    unknown = [n for n in args.cell if n not in by_name]
    if unknown:
        print(f"error: {args.matrix} has no cell {', '.join(unknown)}: the cells are {', '.join(sorted(by_name))}")
        return 2
    cells = [by_name[n] for n in args.cell]
    log = work / "bench.log"
    sides = {"cell": (False, False, work / "cell")} | ({"full": (True, False, work / "full")} if args.full else {}) \
        | ({"serial": (False, True, work / "serial")} if args.serial else {})
    warm(cells, sides, base, log)
    if args.repeat < 1:
        print(f"warmed only ({', '.join(str(r) for *_, r in sides.values())}): run again with --repeat N")
        return 0
    bares = bare_runs(matrix, cells, work)
    walls: dict[str, list[float]] = {k: [] for k in ("bare", *sides)}
    cpus: dict[str, list[float]] = {k: [] for k in walls}
    codes: dict[str, list[int]] = {k: [] for k in walls}
    outputs: list[str] = []
    for i in range(args.repeat):
        w, c, code, outputs = timed_bare(bares, log)
        _add(walls, cpus, codes, "bare", (w, c, code))
        for name, (full, serial, results) in sides.items():
            w, c, code, _ = timed(side_cmd(args.cell, full, serial), {**base, "MATRIX_RESULTS": str(results)}, REPO, log)
            _add(walls, cpus, codes, name, (w, c, code))
        print(f"pair {i + 1}: " + ", ".join(f"{k} {walls[k][-1]} s / {cpus[k][-1]} CPU-s" for k in walls), flush=True)
    diffs = outcome_diffs(cells, bares, outputs, work)
    out = {"cell": args.cell[0] if len(cells) == 1 else args.cell, "repeat": args.repeat, "walls": walls,
           "cpus": cpus, "codes": codes, "wall_ratio": ratio(walls["bare"], walls["cell"]),
           "cpu_ratio": ratio(cpus["bare"], cpus["cell"]), "target": TARGET, "outcomes_differ": diffs, "log": str(log)}
    for side in ("full", "serial"):
        if side in sides:
            out |= {f"{side}_wall_ratio": ratio(walls["bare"], walls[side]), f"{side}_cpu_ratio": ratio(cpus["bare"], cpus[side])}
    return report(out, codes, log, Path(args.out))


def report(out: dict[str, Any], codes: dict[str, list[int]], log: Path, dest: Path) -> int:
    if any(code not in (0, 1) for code in codes["bare"]):
        print(f"warning: the bare run exited {codes['bare']}: it did not run the tests, and no ratio means anything "
              f"(its output is in {log})")
    for key in ("wall_ratio", "cpu_ratio", "full_wall_ratio", "full_cpu_ratio", "serial_wall_ratio", "serial_cpu_ratio"):
        if key in out:
            print(f"{key}: {out[key]}")
    diffs = out["outcomes_differ"]
    print("require_cudnn outcomes (ran and carried) against the bare require run: "
          + ("SAME" if not diffs else f"DIFFERENT ({len(diffs)}): " + "; ".join(diffs[:10])))
    dest.write_text(json.dumps(out, indent=2) + "\n")
    for key, what in (("wall_ratio", "wall"), ("cpu_ratio", "CPU")):
        met = out[key] is not None and out[key] <= TARGET
        print(f"target <= {TARGET}x bare, {what}: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
