"""Speed of the harness, measured side by side in one run: prints a table and writes JSON.

    python bench/run.py                                   # the CPU pairing of the shipped matrix
    MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse \\
        python bench/run.py --cell gpu-3.12-cu130 --wheelhouse /root/wheelhouse --out docs/evidence/bench-h200.json

What it measures, each against its target:
1. overhead: a mode session through nox on a reused venv, against a bare `python -m pytest` of the
   same files in the same venv, cwd and environment (paired, alternating); target <= 1.03x + 0.5 s;
2. warm no-op setup: a second `nox -s <cell>-normal` with nothing changed, traced with strace:
   no installer process is started, and nox start -> pytest start takes <= 0.5 s;
3. cold setup from a local wheelhouse: the venv built by the engine with uv and with virtualenv+pip,
   against a raw `uv venv && uv pip install` of the same requirements; target (uv) <= 1.2x raw;
4. `nox -l` on the shipped matrix; target <= 0.3 s;
5. plugin autoload: pytest's start in a venv with common plugins, autoload on against off (what each
   xdist worker saves);
6. GPU slots: 4 sleep-bound cells swept with `--gpus 0,1,2,3` against `--gpus 0` (the scheduler's
   own cost: child processes, one nox each); target <= 0.35x;
7. mode scheduling: the H200 workload of issue 19 (a 3-mode cell of 10/10/11 s, a 2-mode cell of
   15/15 s, a 1-mode cell of 12.5 s, a 3-mode cell of 11/9/10 s), sleep-bound and scaled down
   (--mode-scale), swept with `--gpus 0,1` against `--gpus 0` (A B A B, after a warm-up that records
   each run's duration); target <= 0.55x. Beside it, what scheduling whole cells would have given,
   worked out from the 1-slot sweeps' own per-run times (about 0.6x).
Timings are medians of --repeat runs. Nothing here is a test: a missed target is reported, not failed.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ort_gpu_matrix.config.loader import load_matrix  # noqa: E402
from ort_gpu_matrix.config.overrides import Overrides  # noqa: E402
from ort_gpu_matrix.envs.venvs import ensure_venv, venv_name  # noqa: E402
from ort_gpu_matrix.execute.testenv import mode_env  # noqa: E402
from ort_gpu_matrix.host.host import resolve  # noqa: E402
from ort_gpu_matrix.plan.cells import cells_of  # noqa: E402
from ort_gpu_matrix.util.voice import Voice, unheard  # noqa: E402

PLUGINS = ["pytest-benchmark", "hypothesis", "pytest-cov", "pytest-timeout", "pytest-mock", "anyio"]
# an installer: uv venv / uv pip, pip, virtualenv (nox itself runs `uv self version` at import: not an install)
INSTALLERS = re.compile(r'"(venv|pip|virtualenv)"|/(pip[0-9.]*|virtualenv)"')


def timed(cmd: list[str], **kw) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def median(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def nox_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args]


def overhead(env: dict[str, str], matrix, cell, repeat: int, posargs: list[str]) -> dict:
    """nox -s <cell>-normal against bare pytest, paired and alternating, on the same reused venv."""
    session = nox_cmd("-s", f"{cell.name}-normal", *(["--", *posargs] if posargs else []))
    subprocess.run(session, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = resolve(cell, matrix.workspace)
    with ensure_venv(cell, r, matrix.workspace.venvs_dir, Voice.plain(log=unheard)) as venv:
        pass
    suite = cell.suite
    cwd = Path(tempfile.mkdtemp(prefix="bench-bare-"))
    test_env, _ = mode_env("normal", suite, r, venv.path, {})
    test_env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD")  # bare: pytest as a user runs it
    (cwd / "pytest.ini").write_text("[pytest]\n")
    bare_cmd = [str(venv.python), "-m", "pytest", "-c", str(cwd / "pytest.ini"), "--rootdir", r.suite_root,
                "-p", "no:cacheprovider", "-q", *suite.pytest_args, *posargs, *r.test_files]
    bare, harness = [], []
    for _ in range(repeat):
        bare.append(_timed_any(bare_cmd, cwd, test_env))
        harness.append(_timed_any(session, REPO, env))
    shutil.rmtree(cwd, ignore_errors=True)
    b, h = median(bare), median(harness)
    return {"bare_s": b, "nox_s": h, "ratio": round(h / b, 3), "pytest_args": posargs,
            "target": "nox <= 1.03 x bare + 0.5 s",
            "met": h <= 1.03 * b + 0.5, "runs": {"bare": bare, "nox": harness}}


def _timed_any(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall time of a command whose exit code is the suite's business (a failing verdict still ran)."""
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def warm_noop(env: dict[str, str], cell, repeat: int) -> dict:
    """Every process a warm `nox -s <cell>-normal` starts (strace, once), and its time outside pytest."""
    strace = shutil.which("strace")
    execs: list[str] = []
    if strace is not None:
        with tempfile.NamedTemporaryFile("r", suffix=".trace") as trace:
            subprocess.run([strace, "-f", "-qq", "-e", "trace=execve", "-s", "200", "-o", trace.name,
                            *nox_cmd("-s", f"{cell.name}-normal")], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            execs = [ln.split(None, 1)[1] for ln in Path(trace.name).read_text().splitlines()
                     if "execve(" in ln and "= 0" in ln]
    installers = [ln for ln in execs if INSTALLERS.search(ln)]
    outside = []  # nox's wall time minus the pytest run the harness timed: setup and storing
    for _ in range(repeat):
        wall = _timed_any(nox_cmd("-s", f"{cell.name}-normal"), REPO, env)
        result = json.loads((Path(env["MATRIX_RESULTS"]) / f"{cell.name}-normal.json").read_text())
        outside.append(round(wall - result["duration_s"], 3))
    s = median(outside)
    return {"outside_pytest_s": s, "processes": execs, "installer_processes": len(installers) if strace else None,
            "target": "no installer process; setup <= 0.5 s",
            "met": bool(strace) and not installers and s <= 0.5, "runs": outside,
            "note": "outside_pytest_s is nox's whole wall time minus pytest's (nox start, setup, storing)"
                    + ("" if strace else "; strace is not installed, so the processes were not traced")}


def cold_setup(matrix, cell, wheelhouse: Path, repeat: int) -> dict:
    """Fresh venvs from the wheelhouse, uv's cache warm for all (one uncounted run first), runs interleaved."""
    r = resolve(cell, matrix.workspace)
    if cell.torch.environment:
        return {"skipped": "this cell reuses a torch environment, which uv cannot serve (.pth paths)"}
    specs = [r.ort_install, *cell.ort.with_, *matrix.settings.tools, *cell.suite.installs]
    settings = dataclasses.replace(matrix.settings, offline=True, wheelhouse=(str(wheelhouse),))
    rr = dataclasses.replace(r, wheelhouse=(str(wheelhouse),))
    uv = shutil.which("uv") or _uv_bin()

    def engine(backend: str) -> float:
        root = Path(tempfile.mkdtemp(prefix=f"bench-cold-{backend}-"))
        c = dataclasses.replace(cell, settings=dataclasses.replace(settings, backend=backend))
        t = time.perf_counter()
        with ensure_venv(c, rr, root, Voice.plain(log=unheard)):
            took = time.perf_counter() - t
        shutil.rmtree(root, ignore_errors=True)
        return took

    def raw() -> float:
        root = Path(tempfile.mkdtemp(prefix="bench-cold-raw-"))
        t = time.perf_counter()
        subprocess.run([uv, "venv", "--quiet", "--python", r.interpreter, str(root / "v")], check=True)
        subprocess.run([uv, "pip", "install", "--quiet", "--python", str(root / "v" / "bin" / "python"), "--no-index",
                        "--find-links", str(wheelhouse), *specs], check=True)
        took = time.perf_counter() - t
        shutil.rmtree(root, ignore_errors=True)
        return took

    raw()  # warms uv's cache, uncounted
    runs: dict[str, list[float]] = {"uv": [], "raw_uv": [], "virtualenv": []}
    for _ in range(repeat):
        runs["uv"].append(engine("uv"))
        runs["raw_uv"].append(raw())
    for _ in range(max(1, repeat // 2)):
        runs["virtualenv"].append(engine("virtualenv"))
    out: dict = {k: median(v) for k, v in runs.items()}
    out["ratio_uv"] = round(out["uv"] / out["raw_uv"], 3)
    out["target"] = "engine with uv <= 1.2 x raw uv"
    out["met"] = out["uv"] <= 1.2 * out["raw_uv"]
    out["runs"] = {k: [round(x, 3) for x in v] for k, v in runs.items()}
    return out


def _uv_bin() -> str:
    import uv

    return str(uv.find_uv_bin())


def nox_list(env: dict[str, str], repeat: int) -> dict:
    runs = [timed(nox_cmd("-l"), env=env) for _ in range(repeat)]
    s = median(runs)
    return {"median_s": s, "target": "<= 0.3 s", "met": s <= 0.3, "runs": [round(x, 3) for x in runs]}


def autoload(python: str | None, wheelhouse: Path | None, repeat: int) -> dict:
    """pytest --co of one trivial test, with and without plugin autoload, in a venv that has common plugins."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-autoload-"))
    if python is None:
        uv = shutil.which("uv") or _uv_bin()
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(tmp / "v")], check=True)
        index = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
        subprocess.run([uv, "pip", "install", "--quiet", "--python", str(tmp / "v" / "bin" / "python"), *index,
                        "pytest", "pytest-xdist", *PLUGINS], check=True)
        python = str(tmp / "v" / "bin" / "python")
    (tmp / "test_one.py").write_text("def test_one():\n    pass\n")
    cmd = [python, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", str(tmp / "test_one.py")]
    on, off = [], []
    for _ in range(repeat):
        on.append(timed(cmd, cwd=tmp, env={**os.environ}))
        off.append(timed([*cmd[:3], "-p", "xdist.plugin", *cmd[3:]], cwd=tmp,
                         env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}))
    plugins = subprocess.run([python, "-c", "import importlib.metadata as m; print(sorted({e.dist.name for e in "
                              "m.entry_points(group='pytest11')}))"], capture_output=True, text=True).stdout.strip()
    shutil.rmtree(tmp, ignore_errors=True)
    a, b = median(on), median(off)
    return {"autoload_on_s": a, "autoload_off_s": b, "saved_per_worker_s": round(a - b, 3), "python": python,
            "plugins": plugins}


SLOTS_MATRIX = """
[matrix]
pythons = ["{py}"]
suite = "sleep"
modes = ["normal"]
[ort.cpu]
requirement = "{ort}"
with = {with_}
[torch.none]
skip = true
{libs}
[pairing]
include = [{pairings}]
[suite.sleep]
root = "{root}"
files = ["test_sleep.py"]
env = {{ SLOT_LOG = "{log}", SLOT_SLEEP = "{sleep}" }}
"""


def slots(env: dict[str, str], cell, work: Path, repeat: int, sleep: float = 6.0) -> dict:
    """4 cells that each sleep `sleep` s in pytest: 4 slots against 1, paired, after one untimed warm-up."""
    ids = "abcd"
    matrix = work / "slots.toml"
    matrix.write_text(SLOTS_MATRIX.format(
        py=cell.python, ort=cell.ort.requirement, with_=json.dumps(list(cell.ort.with_)),
        libs="\n".join(f"[libs.{i}]\nnone = true" for i in ids),
        pairings=", ".join(f'{{ python = "{cell.python}", ort = "cpu", torch = "none", libs = "{i}" }}' for i in ids),
        root=REPO / "tests" / "fixtures" / "suites" / "slots", log=work / "slots.jsonl", sleep=sleep))
    senv = {**env, "MATRIX_TOML": str(matrix), "MATRIX_RESULTS": str(work / "slots-results")}
    sweep = nox_cmd("-s", "sweep", "--", "--gpus")
    timed([*sweep, "0,1,2,3"], env=senv)  # builds the venv if it is not there yet
    four, one = [], []
    for _ in range(max(1, min(repeat, 2))):  # two pairs at most: a 1-slot sweep takes 4 x sleep
        four.append(timed([*sweep, "0,1,2,3"], env=senv))
        one.append(timed([*sweep, "0"], env=senv))
    ratio = round(median(four) / median(one), 3)
    return {"cells": len(ids), "sleep_s": sleep, "four_slots_s": median(four), "one_slot_s": median(one),
            "ratio": ratio, "target": "4 slots <= 0.35 x 1 slot", "met": ratio <= 0.35,
            "runs": {"four": [round(x, 3) for x in four], "one": [round(x, 3) for x in one]}}


# issue 19's H200 workload, in seconds of sleep per mode run: the order of the matrix, as a sweep meets it
MODE_SHAPE = {"a": {"normal": 10.0, "require_cudnn": 10.0, "teeth": 11.0}, "b": {"normal": 15.0, "require_cudnn": 15.0},
              "c": {"normal": 12.5}, "d": {"normal": 11.0, "require_cudnn": 9.0, "teeth": 10.0}}

MODES_MATRIX = """
[matrix]
pythons = ["{py}"]
[ort.cpu]
requirement = "{ort}"
with = {with_}
[torch.none]
skip = true
{libs}
[pairing]
include = [{pairings}]
{suites}
"""


def _modes_matrix(cell, work: Path, scale: float) -> Path:
    """One cell per entry of MODE_SHAPE, each with a suite of its own whose mode runs sleep as the shape says
    (tests/fixtures/suites/slots/test_modes.py; a fake cuDNN test lets teeth bite, so every verdict passes)."""
    root = REPO / "tests" / "fixtures" / "suites" / "slots"
    suites = []
    for c, modes in MODE_SHAPE.items():
        sleeps = ", ".join(f'SLOT_SLEEP_{m.upper()} = "{s * scale:g}"' for m, s in modes.items())
        suites.append(f'[suite.s{c}]\nroot = "{root}"\nfiles = ["test_modes.py"]\npythonpath = [".", "../canary", ".."]\n'
                      f'env = {{ SLOT_LOG = "{work / "modes.jsonl"}", SLOT_CELL = "{c}", {sleeps} }}\n')
    path = work / "modes.toml"
    path.write_text(MODES_MATRIX.format(
        py=cell.python, ort=cell.ort.requirement, with_=json.dumps(list(cell.ort.with_)),
        libs="\n".join(f"[libs.{c}]\nnone = true" for c in MODE_SHAPE),
        pairings=", ".join(f'{{ python = "{cell.python}", ort = "cpu", torch = "none", libs = "{c}", suite = "s{c}", '
                           f"modes = {json.dumps(list(m))} }}" for c, m in MODE_SHAPE.items()),
        suites="\n".join(suites)))
    return path


def _cell_makespan(results: Path, slots: int) -> tuple[float, float, float]:
    """From a 1-slot sweep's timeline: the sum of its children's times, what whole cells in the matrix's order
    would take on `slots` slots, and what the mode-run plan would take, each child's measured time as its cost."""
    from ort_gpu_matrix.drive.makespan import plan, simulate

    runs = json.loads((results / "sweep-timeline.json").read_text())
    wall = {(t["cell"], t["mode"]): t["ended"] - t["started"] for t in runs}
    cells: dict[str, float] = {}
    for (c, _), w in wall.items():
        cells[c] = cells.get(c, 0.0) + w
    units = [dataclasses.replace(_unit(c), predicted_s=w) for c, w in cells.items()]  # matrix order, as before
    whole = simulate(units, {u: u.predicted_s for u in units}, slots)
    jobs = _jobs_of(wall)
    _, modes = plan(jobs, slots)
    return sum(wall.values()), whole, modes or 0.0


def _unit(name: str):
    from ort_gpu_matrix.config.model import Libs, Ort, Suite, Torch
    from ort_gpu_matrix.drive.scheduler import Job
    from ort_gpu_matrix.plan.cells import Cell

    return Job(Cell(name, "3", Ort(id="o"), Torch(id="t"), Libs(id="l"), Suite(id="s"), ("normal",), "bench"), "normal",
               Path(os.devnull))


def _jobs_of(wall: dict):
    from ort_gpu_matrix.config.model import Libs, Ort, Suite, Torch
    from ort_gpu_matrix.drive.scheduler import jobs_of
    from ort_gpu_matrix.plan.cells import Cell

    by_cell: dict[str, list[str]] = {}
    for c, m in wall:
        by_cell.setdefault(c, []).append(m)
    cells = [(Cell(c, "3", Ort(id="o"), Torch(id="t"), Libs(id="l"), Suite(id="s"), tuple(ms), "bench"), tuple(ms))
             for c, ms in by_cell.items()]
    jobs = jobs_of(cells, Path(tempfile.mkdtemp(prefix="bench-plan-")))
    for j in jobs:
        j.predicted_s = wall[j.cell.name, j.mode]
    return jobs


def mode_slots(env: dict[str, str], cell, work: Path, repeat: int, scale: float) -> dict:
    """Issue 19's workload: 2 slots against 1 with mode scheduling, A B A B, after one untimed warm-up that builds
    the venv and records every run's duration (the plan reads them)."""
    matrix = _modes_matrix(cell, work, scale)
    senv = {**env, "MATRIX_TOML": str(matrix)}
    sweep = nox_cmd("-s", "sweep", "--", "--gpus")
    timed([*sweep, "0,1"], env={**senv, "MATRIX_RESULTS": str(work / "modes-warm")})
    two, one, cell_two, plan_two, per_run_sum = [], [], [], [], []
    for i in range(max(1, min(repeat, 2))):
        results = work / f"modes-{i}"
        shutil.copytree(work / "modes-warm", results, symlinks=True)  # the same last known durations for both
        shutil.copytree(work / "modes-warm", work / f"modes-one-{i}", symlinks=True)
        two.append(timed([*sweep, "0,1"], env={**senv, "MATRIX_RESULTS": str(results)}))
        one.append(timed([*sweep, "0"], env={**senv, "MATRIX_RESULTS": str(work / f"modes-one-{i}")}))
        total, whole, planned = _cell_makespan(work / f"modes-one-{i}", 2)
        outside = one[-1] - total  # the parent's own time: nox, the plan, the report
        per_run_sum.append(total)
        cell_two.append(whole + outside)
        plan_two.append(planned + outside)
    ratio = round(median(two) / median(one), 3)
    cells_ratio = round(median(cell_two) / median(one), 3)
    plan_ratio = round(median(plan_two) / median(one), 3)
    runs = sum(len(m) for m in MODE_SHAPE.values())
    return {"cells": len(MODE_SHAPE), "mode_runs": runs, "scale": scale,
            "sleep_s": {c: {m: s * scale for m, s in modes.items()} for c, modes in MODE_SHAPE.items()},
            "two_slots_s": median(two), "one_slot_s": median(one), "ratio": ratio,
            "cell_scheduling_two_slots_s": median(cell_two), "cell_scheduling_ratio": cells_ratio,
            "plan_ratio_from_measured_runs": plan_ratio,
            "target": "2 slots <= 0.55 x 1 slot", "met": ratio <= 0.55,
            "note": "cell_scheduling is worked out, not run: the 1-slot sweep's per-run times, summed per cell, "
                    "list-scheduled in matrix order on 2 slots, plus the 1-slot sweep's time outside its children",
            "runs": {"two": [round(x, 3) for x in two], "one": [round(x, 3) for x in one],
                     "cell_scheduling": [round(x, 3) for x in cell_two], "children_sum": [round(x, 3) for x in per_run_sum]}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--matrix", default=str(REPO / "matrix.toml"))
    ap.add_argument("--cell", help="default: the first cell of the matrix this host can run")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--wheelhouse", help="for cold setup: a dir of wheels (default: pip download them)")
    ap.add_argument("--autoload-python", help="an interpreter that already has many pytest plugins (the torch env)")
    ap.add_argument("--skip", action="append", default=[],
                    choices=["overhead", "warm", "cold", "list", "autoload", "slots", "modes"])
    ap.add_argument("--mode-scale", type=float, default=0.5, help="the mode-scheduling workload's sleeps x this")
    ap.add_argument("--out", default=str(REPO / "bench" / "results.json"))
    ap.add_argument("--pytest-args", default="", help='extra pytest arguments for the overhead runs, e.g. "-n 8"')
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-"))
    env = {**os.environ, "MATRIX_TOML": args.matrix, "MATRIX_RESULTS": str(work / "results"),
           "MATRIX_VENVS": os.environ.get("MATRIX_VENVS", str(work / "venvs"))}
    overrides = Overrides.from_environ(env)
    matrix = load_matrix(Path(args.matrix), overrides)
    cells = cells_of(matrix)
    cell = next((c for c in cells if c.name == args.cell), None) if args.cell else None
    if cell is None:
        for c in cells:
            try:
                resolve(c, matrix.workspace)
                cell = c
                break
            except Exception:
                continue
    if cell is None:
        print("bench: no cell of the matrix can run on this host", file=sys.stderr)
        return 2
    wheelhouse = Path(args.wheelhouse) if args.wheelhouse else None
    out: dict = {"host": socket.gethostname(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                 "python": platform.python_version(), "cell": cell.name, "repeat": args.repeat,
                 "venv": venv_name(cell), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if "overhead" not in args.skip:
        out["overhead"] = overhead(env, matrix, cell, args.repeat, args.pytest_args.split())
    if "warm" not in args.skip:
        out["warm_noop"] = warm_noop(env, cell, args.repeat)
    if "cold" not in args.skip:
        if wheelhouse is None:
            wheelhouse = work / "wheelhouse"
            r = resolve(cell, matrix.workspace)
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheelhouse), r.ort_install,
                            *cell.ort.with_, *matrix.settings.tools, *cell.suite.installs, *PLUGINS], check=True)
        out["cold_setup"] = cold_setup(matrix, cell, wheelhouse, args.repeat)
    if "list" not in args.skip:
        out["nox_list"] = nox_list({**env, "MATRIX_TOML": str(REPO / "matrix.toml")}, max(args.repeat, 10))
    if "autoload" not in args.skip:
        out["autoload"] = autoload(args.autoload_python, wheelhouse, args.repeat)
    if "slots" not in args.skip:
        out["slots"] = slots(env, cell, work, args.repeat)
    if "modes" not in args.skip:
        out["modes"] = mode_slots(env, cell, work, args.repeat, args.mode_scale)
    shutil.rmtree(work, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(table(out))
    print(f"\nwritten: {args.out}")
    return 0


def table(out: dict) -> str:
    rows = [("measure", "result", "target", "met")]
    o = out.get("overhead")
    if o:
        rows.append((f"overhead: nox vs bare pytest {' '.join(o['pytest_args'])}".rstrip(), f"{o['nox_s']} s vs {o['bare_s']} s ({o['ratio']}x)", o["target"],
                     str(o["met"])))
    w = out.get("warm_noop")
    if w:
        rows.append(("warm no-op: nox outside pytest", f"{w['outside_pytest_s']} s, {len(w['processes'])} processes, "
                     f"{w['installer_processes']} installers", w["target"], str(w["met"])))
    c = out.get("cold_setup")
    if c and "skipped" not in c:
        rows.append(("cold setup (wheelhouse)", f"uv {c['uv']} s, virtualenv+pip {c['virtualenv']} s, raw uv "
                     f"{c['raw_uv']} s ({c['ratio_uv']}x)", c["target"], str(c["met"])))
    elif c:
        rows.append(("cold setup", c["skipped"], "", ""))
    n = out.get("nox_list")
    if n:
        rows.append(("nox -l (shipped matrix)", f"{n['median_s']} s", n["target"], str(n["met"])))
    a = out.get("autoload")
    if a:
        rows.append(("plugin autoload per worker", f"on {a['autoload_on_s']} s, off {a['autoload_off_s']} s: "
                     f"saves {a['saved_per_worker_s']} s", "-", "-"))
    sl = out.get("slots")
    if sl:
        rows.append((f"GPU slots: {sl['cells']} cells sleeping {sl['sleep_s']} s", f"4 slots {sl['four_slots_s']} s, "
                     f"1 slot {sl['one_slot_s']} s ({sl['ratio']}x)", sl["target"], str(sl["met"])))
    mo = out.get("modes")
    if mo:
        rows.append((f"mode scheduling: {mo['mode_runs']} runs of {mo['cells']} cells, issue 19's shape x {mo['scale']}",
                     f"2 slots {mo['two_slots_s']} s, 1 slot {mo['one_slot_s']} s ({mo['ratio']}x); whole cells would "
                     f"take {mo['cell_scheduling_two_slots_s']} s ({mo['cell_scheduling_ratio']}x)", mo["target"],
                     str(mo["met"])))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    head = f"{out['host']} ({out['machine']}, python {out['python']}), cell {out['cell']}, median of {out['repeat']}"
    return "\n".join([head, *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)])


if __name__ == "__main__":
    raise SystemExit(main())
