"""One GPU, whole cells (issue 24): a cell session's three modes overlapped against one bare run, a sweep on one
GPU against the same sweep run serially, and whether every figure came out the same. Prints the ratios.

    python bench/one_gpu.py --matrix M --cell gpu-3.12-h200 [--sweep-cells A B --gpu 0] [--repeat 3]
                            [--teeth-workers 8,4,2] [--out F.json]

1. bare: `python -m pytest` by hand in the cell's venv, same files, same -n, normal mode's environment;
2. the cell session `nox -s CELL` serial (`--slots-per-gpu 1`) and as the host decides (auto), alternating, each
   in a results dir of its own (warmed once, so the room is decided on recorded peaks, as on a second day);
   target: auto <= 1.8 x bare;
3. with --sweep-cells: `nox -s sweep -- --select A B` (one after another, in-process) against
   `--gpus G` (auto slots); target: <= 0.65 x serial;
4. figures: for every session, the verdict, counts, the tiers of every test, the outcomes and teeth's
   coverage of the last overlapped run against the last serial one: SAME, or each difference;
5. where the start goes: from the probe's marks (report.json `timings`) of the last runs, per run and
   the median over its workers;
6. with --teeth-workers: the scoped teeth run after a require_cudnn, at each -n (the "fewer workers for
   small scoped runs" candidate), its duration from its result.
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
sys.path.insert(0, str(REPO))

from bench.run import median, nox_cmd  # noqa: E402
from ort_gpu_matrix.config.loader import load_matrix  # noqa: E402
from ort_gpu_matrix.config.overrides import Overrides  # noqa: E402
from ort_gpu_matrix.envs.venvs import ensure_venv  # noqa: E402
from ort_gpu_matrix.execute.testenv import mode_env  # noqa: E402
from ort_gpu_matrix.host.host import resolve  # noqa: E402
from ort_gpu_matrix.plan.cells import cells_of  # noqa: E402
from ort_gpu_matrix.util.voice import Voice, unheard  # noqa: E402
from ort_matrix_probe.quiet import QUIET_ENV  # noqa: E402

PHASES = [("interpreter + pytest imports", "process_start", "probe_imported"),
          ("plugins and options", "probe_imported", "configured"),
          ("collection (test modules: torch, onnx, ORT)", "collection_start", "collected"),
          ("first test (a first CUDA session: the context)", "first_test_start", "first_test_end"),
          ("the other tests", "first_test_end", "last_test_end"),
          ("finish", "last_test_end", "finished")]


def wall(cmd: list[str], env: dict[str, str], log: Path) -> tuple[float, int]:
    t = time.perf_counter()
    with log.open("ab") as sink:
        rc = subprocess.run(cmd, env=env, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT).returncode
    return round(time.perf_counter() - t, 3), rc


def env_for(results: Path, base: dict[str, str]) -> dict[str, str]:
    return {**base, "MATRIX_RESULTS": str(results)}


def figures(results: Path) -> dict[str, dict]:
    """What must not change with the schedule: per session, from its current result."""
    out = {}
    for p in sorted(results.glob("*.json")):
        try:
            r = json.loads(p.read_text())
        except ValueError:
            continue
        if not isinstance(r, dict) or "session" not in r:
            continue
        # tiers: which tiers each test dispatched, and the tests per tier. How many SdpaKernel lines a test printed
        # (1 or 2 of the same tier) varies between two serial runs alike (docs/evidence/one-gpu-cells-h200.md)
        tests = r["dispatch"]["tests"]
        out[r["session"]] = {"verdict": r["verdict"], "counts": r["counts"], "outcomes": r.get("outcomes"),
                             "tiers": {k: sorted(set(v)) for k, v in tests.items()},
                             "tests_per_tier": r["dispatch"].get("tests_per_tier"),
                             # a reason listed its failures in the order they ended (xdist's schedule) before
                             # verdicts sorted them (3100a79): compared as its head and the set of its items
                             "reasons": sorted(_items(x) for x in r.get("reasons") or []),
                             "teeth_coverage": r.get("teeth_coverage")}
    return out


def _items(reason: str) -> str:
    head, sep, rest = reason.partition(": ")
    return head + sep + "; ".join(sorted(rest.split("; "))) if sep else reason


def differences(a: dict[str, dict], b: dict[str, dict]) -> list[str]:
    diffs = [f"{s}: only in {'serial' if s in a else 'overlapped'}" for s in sorted(set(a) ^ set(b))]
    for s in sorted(set(a) & set(b)):
        diffs += [f"{s}: {k} differs" for k in a[s] if a[s][k] != b[s][k]]
    return diffs


def start_cost(results: Path) -> dict[str, dict]:
    """Per session: each phase's seconds in the controller, and the median over the xdist workers."""
    out: dict[str, dict] = {}
    for p in sorted(results.glob("*.json")):
        try:
            r = json.loads(p.read_text())
            report = json.loads((results / r["bundle"] / "report.json").read_text())
        except (ValueError, KeyError, TypeError, OSError):
            continue
        marks = report.get("timings") or {}
        ctl = marks.get("controller", {})
        workers = [m for k, m in marks.items() if k != "controller"]
        row: dict[str, object] = {"duration_s": r["duration_s"], "workers": len(workers)}
        for name, a, b in PHASES:
            in_workers = [m[b] - m[a] for m in workers if m.get(a) and m.get(b)]
            got = statistics.median(in_workers) if in_workers else (
                ctl[b] - ctl[a] if ctl.get(a) and ctl.get(b) else None)
            row[name] = None if got is None else round(got, 3)
        if workers and ctl.get("configured"):
            row["xdist start (controller configured -> last worker started)"] = round(
                max(m["process_start"] for m in workers if m.get("process_start")) - ctl["configured"], 3)
        if ctl.get("process_start") and (first := [m["first_test_start"] for m in workers or [ctl]
                                                   if m.get("first_test_start")]):
            row["process start -> first test"] = round(min(first) - ctl["process_start"], 3)
        out[r["session"]] = row
    return out


def bare_cmd(matrix, cell, work: Path, mode: str = "normal",
             extra: tuple[str, ...] = ()) -> tuple[list[str], dict[str, str], Path]:
    """pytest by hand in the cell's venv, with `mode`'s environment, in a dir of its own; `extra` before the files."""
    r = resolve(cell, matrix.workspace)
    with ensure_venv(cell, r, matrix.workspace.venvs_dir, Voice.plain(log=unheard)) as venv:
        pass
    cwd = Path(tempfile.mkdtemp(prefix="bench-bare-", dir=work))
    test_env, _ = mode_env(mode, cell.suite, r, venv.path, {})
    test_env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD")  # by hand: pytest as a user runs it
    if cell.suite.quiet_threads:  # and its threads as ORT and OpenMP leave them: the cell's choice is not the user's
        for name in ("OMP_WAIT_POLICY", QUIET_ENV):
            if name not in cell.suite.env:
                test_env.pop(name, None)
    (cwd / "pytest.ini").write_text("[pytest]\n")
    return ([str(venv.python), "-m", "pytest", "-c", str(cwd / "pytest.ini"), "--rootdir", r.suite_root,
             "-p", "no:cacheprovider", "-q", *extra, *cell.suite.pytest_args, *r.test_files], test_env, cwd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--matrix", default=str(REPO / "matrix.toml"))
    ap.add_argument("--cell", help="the cell session to bench (required unless --compare)")
    ap.add_argument("--sweep-cells", nargs="*", default=[])
    ap.add_argument("--gpu", default="0", help="the GPU the one-GPU sweep is given (--gpus)")
    ap.add_argument("--no-warm", action="store_true",
                    help="no warm-up sweeps (the room is then decided without recorded peaks, unless earlier runs left some)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--teeth-workers", default="", help="e.g. 8,4,2: the scoped teeth at each -n")
    ap.add_argument("--variant", action="append", default=[],
                    help="e.g. '-n 4': the overlapped cell once more with these arguments (after one warm-up run each)")
    ap.add_argument("--sweep-variant", action="append", default=[],
                    help="e.g. '--slots-per-gpu 4': the one-GPU sweep once more with these arguments (warmed once)")
    ap.add_argument("--part", choices=["all", "cell", "sweep", "variants"], default="all",
                    help="cell: 1, 2, 4, 5 for the cell; sweep: 3, 4 and 6 (one device call each)")
    ap.add_argument("--out", default=str(REPO / "bench" / "one-gpu.json"))
    ap.add_argument("--compare", nargs=2, metavar=("SERIAL", "OVERLAPPED"),
                    help="no run: the figures line for two results dirs of an earlier run (e.g. from its results tar)")
    args = ap.parse_args()
    if args.compare:
        diffs = differences(figures(Path(args.compare[0])), figures(Path(args.compare[1])))
        print("figures (verdicts, reasons, counts, outcomes, tiers of each test, tests per tier, teeth coverage), "
              "overlapped vs serial: " + ("SAME" if not diffs else "DIFFERENT: " + "; ".join(diffs)))
        return 1 if diffs else 0
    if not args.cell:
        ap.error("--cell is required")

    work = Path(os.environ.get("BENCH_WORK") or tempfile.mkdtemp(prefix="bench-one-gpu-"))
    work.mkdir(parents=True, exist_ok=True)
    base = {**os.environ, "MATRIX_TOML": args.matrix, "PYTHONUNBUFFERED": "1"}
    base.setdefault("MATRIX_VENVS", str(work / "venvs"))
    matrix = load_matrix(Path(args.matrix), Overrides.from_environ({**base, "MATRIX_RESULTS": str(work / "r")}))
    cell = next(c for c in cells_of(matrix) if c.name == args.cell)
    log = work / "bench.log"
    dirs = {k: work / k for k in ("serial", "auto", "sweep-serial", "sweep-gpu")}
    out: dict[str, object] = {"cell": cell.name, "repeat": args.repeat, "log": str(log)}

    diffs: list[str] = []
    if args.part in ("all", "cell"):
        diffs += cell_part(args, matrix, cell, base, dirs, log, work, out)
    if args.variant and args.part in ("all", "variants"):
        variants_part(args, cell, base, dirs, log, out)
    if args.sweep_cells and args.part in ("all", "sweep"):
        diffs += sweep_part(args, base, dirs, log, out)
    out["figures_differ"] = diffs
    print("figures (verdicts, reasons, counts, outcomes, tiers of each test, tests per tier, teeth coverage), overlapped vs serial: "
          + ("SAME" if not diffs else "DIFFERENT: " + "; ".join(diffs)))
    out["start_cost"] = {k: start_cost(d) for k, d in dirs.items() if d.exists()}
    for session, row in out["start_cost"].get("serial", {}).items():  # type: ignore[union-attr]
        print(f"start cost, {session} (serial): " + ", ".join(f"{k} {v}" for k, v in row.items()))
    if args.teeth_workers and args.part in ("all", "sweep"):
        teeth: dict[str, float] = {}
        for n in args.teeth_workers.split(","):
            d = work / f"teeth-n{n}"
            wall(nox_cmd("-s", cell.mode_session("require_cudnn"), cell.mode_session("teeth"), "--", "-n", n),
                 env_for(d, base), log)
            r = json.loads((d / f"{cell.mode_session('teeth')}.json").read_text())
            teeth[n] = r["duration_s"]
            print(f"scoped teeth at -n {n}: {r['duration_s']} s ({r['counts']})")
        out["teeth_workers"] = teeth
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"written: {args.out}")
    return 0


def cell_part(args, matrix, cell, base, dirs, log, work, out) -> list[str]:
    serial_cmd = nox_cmd("-s", cell.name, "--", "--slots-per-gpu", "1")
    auto_cmd = nox_cmd("-s", cell.name)
    for k, cmd in (("serial", serial_cmd), ("auto", auto_cmd)):  # warm: venv built, durations and peaks on record
        wall(cmd, env_for(dirs[k], base), log)
    bare, test_env, cwd = bare_cmd(matrix, cell, work)
    runs: dict[str, list[float]] = {"bare": [], "serial": [], "auto": []}
    for _ in range(args.repeat):
        t = time.perf_counter()
        subprocess.run(bare, cwd=cwd, env=test_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        runs["bare"].append(round(time.perf_counter() - t, 3))
        runs["serial"].append(wall(serial_cmd, env_for(dirs["serial"], base), log)[0])
        runs["auto"].append(wall(auto_cmd, env_for(dirs["auto"], base), log)[0])
    b, s, a = (median(runs[k]) for k in ("bare", "serial", "auto"))
    out["cell"] = {"bare_s": b, "serial_s": s, "auto_s": a, "auto_ratio": round(a / b, 3),
                   "serial_ratio": round(s / b, 3), "runs": runs}
    print(f"one cell, three modes: {a} s overlapped vs {b} s bare: {a / b:.2f} x (target <= 1.8); "
          f"serial {s} s: {s / b:.2f} x")
    return differences(figures(dirs["serial"]), figures(dirs["auto"]))


def variants_part(args, cell, base, dirs, log, out) -> None:
    """The overlapped cell with other pytest arguments (-n 4: the pair's workers halved), warmed once each; and for
    each, the bound a teeth started early would give: the pair's wall plus teeth's tests alone (its start hidden)."""
    got: dict[str, dict] = {}
    for text in args.variant:
        d = dirs.setdefault(f"variant {text}", log.parent / ("variant" + text.replace(" ", "_")))
        cmd = nox_cmd("-s", cell.name, "--", *text.split())
        wall(cmd, env_for(d, base), log)
        walls = [wall(cmd, env_for(d, base), log)[0] for _ in range(args.repeat)]
        cost = start_cost(d)
        teeth = cost.get(cell.mode_session("teeth"), {})
        pair = max((cost.get(cell.mode_session(m), {}).get("duration_s") or 0) for m in ("normal", "require_cudnn"))
        tests = sum(teeth.get(k) or 0 for k in ("first test (a first CUDA session: the context)", "the other tests"))
        got[text] = {"wall_s": median(walls), "walls": walls, "pair_s": pair, "teeth_s": teeth.get("duration_s"),
                     "teeth_tests_s": round(tests, 3), "bound_early_teeth_s": round(pair + tests, 3)}
        print(f"variant {text!r}: cell {median(walls)} s (pair {pair} s, teeth {teeth.get('duration_s')} s of which "
              f"tests {tests:.2f} s): with teeth's start hidden at best {pair + tests:.1f} s")
    out["variants"] = got


def sweep_part(args, base, dirs, log, out) -> list[str]:
    sel = ["--select", *args.sweep_cells]
    # --confirm 0: the schedule is what is compared; confirmation's own cost is issue 22's bench
    # (docs/evidence/run-confirm-bench-h200.sh), and with it both sweeps would rerun the unexpected failures
    sweep_serial = nox_cmd("-s", "sweep", "--", *sel, "--confirm", "0")
    sweep_gpu = nox_cmd("-s", "sweep", "--", *sel, "--gpus", args.gpu, "--confirm", "0")
    if not args.no_warm:
        for k, cmd in (("sweep-serial", sweep_serial), ("sweep-gpu", sweep_gpu)):
            wall(cmd, env_for(dirs[k], base), log)
    sw: dict[str, list[float]] = {"serial": [], "gpu": []}
    for _ in range(args.repeat):
        sw["serial"].append(wall(sweep_serial, env_for(dirs["sweep-serial"], base), log)[0])
        sw["gpu"].append(wall(sweep_gpu, env_for(dirs["sweep-gpu"], base), log)[0])
    ss, sg = median(sw["serial"]), median(sw["gpu"])
    out["sweep"] = {"serial_s": ss, "one_gpu_s": sg, "ratio": round(sg / ss, 3), "runs": sw,
                    "timeline": timeline(dirs["sweep-gpu"])}
    print(f"two-cell sweep on one GPU: {sg} s vs {ss} s serial: {sg / ss:.2f} x (target <= 0.65)")
    show_timeline("sweep-gpu", out["sweep"]["timeline"])
    diffs = differences(figures(dirs["sweep-serial"]), figures(dirs["sweep-gpu"]))
    for text in args.sweep_variant:
        d = dirs.setdefault(f"sweep-gpu {text}", log.parent / ("sweep-gpu" + text.replace(" ", "_")))
        cmd = [*sweep_gpu, *text.split()]
        if not args.no_warm:
            wall(cmd, env_for(d, base), log)
        walls = [wall(cmd, env_for(d, base), log)[0] for _ in range(args.repeat)]
        got, runs = median(walls), timeline(d)
        out.setdefault("sweep_variants", {})[text] = {"one_gpu_s": got, "ratio": round(got / ss, 3), "runs": walls,
                                                      "timeline": runs}
        print(f"two-cell sweep on one GPU, {text!r}: {got} s vs {ss} s serial: {got / ss:.2f} x")
        show_timeline(f"sweep-gpu {text}", runs)
        diffs += [f"{text}: {x}" for x in differences(figures(dirs["sweep-serial"]), figures(d))]
    return diffs


def timeline(results: Path) -> list[dict]:
    """The last sweep's runs (sweep-timeline.json): each one's slot and its start and end, from the sweep's first."""
    try:
        runs = json.loads((results / "sweep-timeline.json").read_text())
    except (OSError, ValueError):
        return []
    t0 = min((r["started"] for r in runs), default=0.0)
    return [{"session": r["session"], "slot": r["slot"], "start": round(r["started"] - t0, 1),
             "end": round(r["ended"] - t0, 1), "at": r["started"]} for r in sorted(runs, key=lambda r: r["started"])]


def show_timeline(name: str, runs: list[dict]) -> None:
    for r in runs:
        print(f"  {name}: slot {r['slot']} {r['session']}: {r['start']} -> {r['end']} s")


if __name__ == "__main__":
    raise SystemExit(main())
