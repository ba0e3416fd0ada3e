"""Several GPUs of one host: mode runs as child processes, one per slot at a time, checked on the records the
tests themselves wrote (the slot they were given, when they started and ended), never on wall time."""
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import PY, REPO, SUITES, ends_line, matrix_head, suite_head

from ort_gpu_matrix.util.voice import Voice, unheard

MATRIX = matrix_head(suite="slots", modes=["normal"], libs=["a", "b", "c", "d"]) + """[pairing]
include = [
  {{ python = "{py}", ort = "cpu", torch = "none", libs = "a" }},
  {{ python = "{py}", ort = "cpu", torch = "none", libs = "b" }},
  {{ python = "{py}", ort = "cpu", torch = "none", libs = "c" }},
  {{ python = "{py}", ort = "cpu", torch = "none", libs = "d", suite = "failing" }},
]
[suite.slots]
root = "{root}"
files = ["test_sleep.py"]
env = {{ SLOT_LOG = "{log}", SLOT_SLEEP = "{sleep}" }}
[suite.failing]
root = "{root}"
files = ["test_sleep.py"]
env = {{ SLOT_LOG = "{log}", SLOT_FAIL = "1", SLOT_SLEEP = "{sleep}" }}
"""


def _start(tmp_path, venvs, *args, sleep="1.5", env=None):
    log = tmp_path / "slots.jsonl"
    (tmp_path / "m.toml").write_text(MATRIX.format(py=PY, root=SUITES / "slots", log=log, sleep=sleep))
    env = {**os.environ, "MATRIX_TOML": str(tmp_path / "m.toml"), "MATRIX_RESULTS": str(tmp_path / "results"),
           "MATRIX_VENVS": str(venvs), **(env or {})}
    # --confirm 0: these tests count the scheduler's runs; a confirmation rerun of cell d's failure runs in
    # the parent after them, outside any slot (tests/test_flakes.py tests confirmation)
    return log, subprocess.Popen([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", "--",
                                  "--confirm", "0", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_runs_overlap_across_slots_and_never_share_one(tmp_path, venvs):
    log, proc = _start(tmp_path, venvs, "--gpus", "0,1")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode != 0, out[-3000:]  # cell d fails on purpose: the sweep fails, the others still ran
    records = [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"]
    assert len(records) == 4, out[-3000:]  # every cell ran, the failing one included
    assert {r["cuda_visible_devices"] for r in records} <= {"0", "1"}
    assert {r["nccl_nvls_enable"] for r in records} == {"0"}  # NVLink multicast off in every child
    for a, b in itertools.combinations(records, 2):
        overlap = a["start"] < b["end"] and b["start"] < a["end"]
        if a["cuda_visible_devices"] == b["cuda_visible_devices"]:
            assert not overlap, (a, b)  # no two cells in one slot at once
    assert any(a["start"] < b["end"] and b["start"] < a["end"] for a, b in itertools.combinations(records, 2)
               if a["cuda_visible_devices"] != b["cuda_visible_devices"])  # cells in different slots overlapped
    results = {c: json.loads((tmp_path / "results" / f"gpu-{PY}-{c}-normal.json").read_text()) for c in "abcd"}
    assert {r["gpu"]["cuda_visible_devices"] for r in results.values()} <= {"0", "1"}
    assert results["d"]["verdict"] == "fail" and all(results[c]["verdict"] == "pass" for c in "abc")
    timeline = json.loads((tmp_path / "results" / "sweep-timeline.json").read_text())
    assert sorted(t["session"] for t in timeline) == [f"gpu-{PY}-{c}-normal" for c in "abcd"]
    for t in timeline:  # each run's own log, named in the timeline, and the GPU its result records
        assert "test session starts" in open(t["log"]).read()
        assert results[t["cell"][-1]]["gpu"]["cuda_visible_devices"] == t["gpu"]
    sweep = json.loads((tmp_path / "results" / "sweep.json").read_text())
    assert [c["verdict"] for c in sorted(sweep["cells"], key=lambda c: c["cell"])] == ["pass", "pass", "pass", "fail"]
    assert sum(line.startswith(f"start  gpu-{PY}-a-normal  (") for line in out.splitlines()) == 1
    assert sum(bool(re.match(rf"(PASS|FAIL) +gpu-{PY}-a-normal  1/0/0 .* gpu [01]  \[\d/4\]$", line))
               for line in out.splitlines()) == 1, out[-3000:]  # its end line: verdict, counts, the GPU it had


def _alive(pid):
    """Running: not gone and not a zombie (an orphan's zombie waits for whoever reaps it here)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for_starts(log, n, proc, timeout=300.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if log.exists():
            starts = [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "start"]
            if len(starts) >= n:
                return starts
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} cells started within {timeout} s")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_every_slot_and_the_report_says_what_finished(tmp_path, venvs, sig):
    """Ctrl-C (or SIGTERM) to the sweep: both running cells store an interrupted result, the two waiting
    cells never start, no test process is left, and the report and sweep.json are still written."""
    log, proc = _start(tmp_path, venvs, "--gpus", "0,1", sleep="120")
    starts = _wait_for_starts(log, 2, proc)
    proc.send_signal(sig)  # to the sweep only, as a terminal's Ctrl-C: the children are in sessions of their own
    out, _ = proc.communicate(timeout=120)
    name = signal.Signals(sig).name
    assert proc.returncode != 0, out[-3000:]
    assert f"{name}: stopping 2 running mode run(s)" in out and "2 not started" in out, out[-3000:]
    assert f"sweep interrupted ({name})" in out, out[-3000:]
    assert not [r["pid"] for r in starts if _alive(r["pid"])]  # no test runs on into a removed dir
    assert not [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"]
    results = tmp_path / "results"
    stored = sorted(results.glob(f"gpu-{PY}-*-normal.json"))
    assert len(stored) == 2, out[-3000:]
    for path in stored:
        r = json.loads(path.read_text())
        assert r["verdict"] == "fail" and r["stopped"] == "interrupted (SIGINT)", r["reasons"]
        assert r["gpu"]["cuda_visible_devices"] in {"0", "1"}
    sweep = json.loads((results / "sweep.json").read_text())
    assert sweep["interrupted"] == name and not sweep["ok"]
    assert sorted(sweep["errors"].values()) == [f"not started: the sweep was interrupted ({name})"] * 2
    assert (results / "report.md").exists()


# ---------------------------------------------------------------- mode runs, not cells


def write_modes_matrix(path, log, cells, extra="", ort=None):
    """cells: id -> {mode: seconds of sleep}; each cell gets a libs set and a suite of its own (test_modes.py).
    extra: more tables (ORT entries); ort: cell id -> the ORT id it pairs with, where not cpu. Each suite sets
    `full = true`: these tests time whole mode runs against each other, not what a mode may leave out
    (tests/test_carry.py)."""
    pairings = ", ".join(f'{{ python = "{PY}", ort = "{(ort or {}).get(c, "cpu")}", torch = "none", libs = "{c}", '
                         f'suite = "s{c}", modes = {json.dumps(list(modes))} }}' for c, modes in cells.items())
    suites = "\n".join(
        suite_head(f"s{c}", ["test_modes.py"], root=str(SUITES / "slots")) + "full = true\n"
        + f'env = {{ SLOT_LOG = "{log}", SLOT_CELL = "{c}", '
        + ", ".join(f'SLOT_SLEEP_{m.upper()} = "{s}"' for m, s in modes.items()) + " }\n"
        for c, modes in cells.items())
    head = matrix_head(pythons=[PY], libs=list(cells)) + (f"{extra}\n\n" if extra else "")
    path.write_text(head + f"[pairing]\ninclude = [{pairings}]\n" + suites + "\n")
    return path


def sweep(tmp_path, venvs, *args, env=None, timeout=600):
    full = {**os.environ, "MATRIX_TOML": str(tmp_path / "m.toml"), "MATRIX_RESULTS": str(tmp_path / "results"),
            "MATRIX_VENVS": str(venvs), **(env or {})}
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", "--", *args],
                          env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def records(log):
    ends = [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"]
    return {(r["cell"], r["mode"]): r for r in ends}


def test_the_modes_of_one_cell_share_the_slots_and_teeth_follows_its_census_on_its_slot(tmp_path, venvs):
    """Four slots, four mode runs: normal and require_cudnn of one cell run at once, but teeth waits for its
    require_cudnn to store, then checks its coverage against that run's census, from another process. The
    next sweep puts the longest run first, though the matrix lists a short cell before it."""
    log = tmp_path / "slots.jsonl"
    write_modes_matrix(tmp_path / "m.toml", log, {"y": {"normal": 0},
                                                  "x": {"normal": 14, "require_cudnn": 3, "teeth": 0.5}})
    proc = sweep(tmp_path, venvs, "--gpus", "0,1,2,3")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "plan: 4 mode run(s) on 4 slot(s), longest first: " in proc.stdout
    assert "no predicted makespan: no run has a recorded duration yet" in proc.stdout
    rec = records(log)
    n, rc, teeth = rec["x", "normal"], rec["x", "require_cudnn"], rec["x", "teeth"]
    assert n["start"] < rc["end"] and rc["start"] < n["end"]  # one cell, two modes at once
    assert n["cuda_visible_devices"] != rc["cuda_visible_devices"]
    assert teeth["start"] > rc["end"]  # teeth waited for its census, though a slot was free all along
    assert teeth["start"] < n["end"]  # ... and only for it, not for the whole cell
    assert teeth["cuda_visible_devices"] == rc["cuda_visible_devices"]  # on the slot that ran require_cudnn
    results = tmp_path / "results"
    stored = {m: json.loads((results / f"gpu-{PY}-x-{m}.json").read_text()) for m in ("normal", "require_cudnn", "teeth")}
    cov = stored["teeth"]["teeth_coverage"]
    assert cov["checked"] and cov["tier_tests"] == 1 and cov["bitten"] == 1, stored["teeth"]["warnings"]
    for m, r in stored.items():  # each result records the GPU its own run was given
        assert r["gpu"]["cuda_visible_devices"] == rec["x", m]["cuda_visible_devices"]
    timeline = {t["session"]: t for t in json.loads((results / "sweep-timeline.json").read_text())}
    assert len(timeline) == 4 and {t["gpu"] for t in timeline.values()} <= {"0", "1", "2", "3"}
    assert timeline[f"gpu-{PY}-x-teeth"]["slot"] == timeline[f"gpu-{PY}-x-require_cudnn"]["slot"]
    for session, t in timeline.items():  # each run's own log
        assert t["log"] == str(results / "sweep-logs" / f"{session}.log") and "test session starts" in open(t["log"]).read()

    again = sweep(tmp_path, venvs, "--gpus", "0,1,2,3")  # now each run has a last known duration
    assert again.returncode == 0, again.stdout[-3000:]
    plan_line = next(ln for ln in again.stdout.splitlines() if "plan: " in ln)
    assert "?" not in plan_line and "predicted makespan " in plan_line, plan_line
    queue = plan_line.split("longest first: ")[1].split(";")[0].split(", ")
    assert queue[0].startswith(f"gpu-{PY}-x-normal "), queue  # the longest (14 s) first, not the matrix's first


def test_slots_per_gpu_runs_n_mode_runs_on_one_gpu(tmp_path, venvs):
    log, proc = _start(tmp_path, venvs, "--gpus", "0", "--slots-per-gpu", "2", sleep="2")
    out, _ = proc.communicate(timeout=600)
    ends = [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"]
    assert len(ends) == 4 and {r["cuda_visible_devices"] for r in ends} == {"0"}, out[-3000:]
    most = max(sum(1 for b in ends if b["start"] < a["start"] < b["end"]) + 1 for a in ends)
    assert most == 2, ends  # two at once on GPU 0, never three
    timeline = json.loads((tmp_path / "results" / "sweep-timeline.json").read_text())
    assert {t["slot"] for t in timeline} == {0, 1} and {t["gpu"] for t in timeline} == {"0"}
    assert re.search(rf"^start  gpu-{PY}-\w-normal  \(\d of 4, gpu 0 slot 1, ", out, re.M), out[-3000:]


@pytest.mark.parametrize("args, message", [
    (("--gpus", "0", "--slots-per-gpu", "0"), "--slots-per-gpu 0: give 1 or more mode runs per GPU"),
    (("--gpus", "none", "--slots-per-gpu", "2"), "--slots-per-gpu 2 needs GPUs to overlap on, and --gpus none runs "
                                                "the mode runs one after another: give --gpus 0,1 or all, or leave "
                                                "--slots-per-gpu out"),
    (("--gpus", "9"), "--gpus 9: no GPU 9 on this host; nvidia-smi -L lists: 0 (NVIDIA Fake), 1 (NVIDIA Fake)"),
    (("--gpus", "1,2"), "--gpus 1,2: no GPU 2 on this host; nvidia-smi -L lists: 0 (NVIDIA Fake), 1 (NVIDIA Fake)"),
], ids=["zero slots", "slots without gpus", "no such gpu", "one of two missing"])
def test_bad_gpu_options_are_clean_errors_before_anything_runs(tmp_path, venvs, args, message):
    write_modes_matrix(tmp_path / "m.toml", tmp_path / "slots.jsonl", {"x": {"normal": 0}})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/bin/sh\n[ "$1" = "-L" ] && printf "GPU 0: NVIDIA Fake (UUID: GPU-aaaa)\\n'
                   'GPU 1: NVIDIA Fake (UUID: GPU-bbbb)\\n"\n')
    smi.chmod(0o755)
    proc = sweep(tmp_path, venvs, *args, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert proc.returncode != 0
    assert ends_line(proc.stdout, f"nox > Session sweep aborted: {message}"), proc.stdout[-2000:]
    assert "Traceback" not in proc.stdout
    assert not (tmp_path / "results").exists()  # nothing ran, nothing was written


def test_without_nvidia_smi_indices_are_slots_and_all_runs_in_process(tmp_path, venvs):
    log = tmp_path / "slots.jsonl"
    write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 0}})
    path = ":".join(d for d in os.environ["PATH"].split(":") if not (Path(d) / "nvidia-smi").exists())
    every = sweep(tmp_path, venvs, "--gpus", "all", env={"PATH": path})
    assert every.returncode == 0, every.stdout[-3000:]
    assert ("nox > --gpus all: nvidia-smi is not on PATH, so no GPU can be listed: running the cells one after "
            "another in this process\n") in every.stdout
    assert not (tmp_path / "results" / "sweep-logs").exists()  # no child, no slot
    assert json.loads((tmp_path / "results" / f"gpu-{PY}-x-normal.json").read_text())["gpu"] is None
    given = sweep(tmp_path, venvs, "--gpus", "3", env={"PATH": path})
    assert given.returncode == 0, given.stdout[-3000:]
    assert "nox > --gpus 3: nvidia-smi is not on PATH, so the indices cannot be checked: taken as given, as slots\n" \
        in given.stdout
    assert records(log)["x", "normal"]["cuda_visible_devices"] == "3"
    slotted = sweep(tmp_path, venvs, "--slots-per-gpu", "2", env={"PATH": path})  # no GPU listed: nothing to overlap on
    assert slotted.returncode != 0 and "Traceback" not in slotted.stdout
    assert ends_line(slotted.stdout, "nox > Session sweep aborted: --slots-per-gpu 2 needs GPUs to overlap on, and "
                     "without --gpus this sweep runs the mode runs one after another: give --gpus 0,1 or all, or leave "
                     "--slots-per-gpu out"), slotted.stdout[-2000:]


def _processes_with(results):
    """pids of this user's processes whose environment names this test's results dir (the sweep's children)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if f"MATRIX_RESULTS={results}".encode() in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") \
                    and _alive(int(pid)):
                found.append(int(pid))
        except OSError:
            continue
    return found


def test_a_killed_sweep_takes_its_children_with_it_and_the_next_start_removes_their_dirs(tmp_path, venvs):
    """SIGKILL to a --gpus sweep: its child noxes and their pytest die at once; the private dirs they could not
    remove are removed by the next run that starts, and a live run's dir is left alone. A TMPDIR of the test's
    own keeps every other run on this machine out of it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    log, proc = _start(tmp_path, venvs, "--gpus", "0,1", sleep="120", env={"TMPDIR": str(tmp)})
    starts = _wait_for_starts(log, 2, proc)
    results = tmp_path / "results"
    children = [p for p in _processes_with(results) if p != proc.pid]
    dirs = [d for p in children for d in tmp.glob(f"ort-matrix-gpu-{PY}-*-p{p}.*")]
    assert len(dirs) == 2 and all(d.is_dir() for d in dirs), (children, list(tmp.iterdir()))  # one per child nox
    proc.kill()  # SIGKILL: nothing of the sweep can react
    proc.wait()
    deadline = time.time() + 30
    while time.time() < deadline and (_processes_with(results) or any(_alive(r["pid"]) for r in starts)):
        time.sleep(0.1)
    assert not _processes_with(results), "a child nox outlived its sweep"
    assert not [r["pid"] for r in starts if _alive(r["pid"])], "a pytest outlived its sweep"
    assert all(d.is_dir() for d in dirs)  # a SIGKILL leaves them: nobody could remove them
    live = Path(tempfile.mkdtemp(prefix=f"ort-matrix-gpu-{PY}-live-p{os.getpid()}.{_start_time(os.getpid())}-",
                                 dir=tmp))
    (tmp_path / "m.toml").write_text((tmp_path / "m.toml").read_text().replace('SLOT_SLEEP = "120"', 'SLOT_SLEEP = "0"'))
    nxt = sweep(tmp_path, venvs, "--select", f"gpu-{PY}-a", env={"TMPDIR": str(tmp)})  # the next start, in-process
    assert nxt.returncode == 0, nxt.stdout[-3000:]
    assert not any(d.exists() for d in dirs)
    for d in dirs:
        # a watched sweep keeps the harness's own lines in sweep.log (--verbose streams them)
        assert f"removed {d}: the run that made it was killed\n" in (results / "sweep.log").read_text()
    assert live.is_dir()  # a live process's dir is never touched
    assert [p.name for p in tmp.iterdir()] == [live.name]  # the next run removed its own dir, as always


def _start_time(pid):
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]


DELETER = """
import os, sys, time
path = sys.argv[1]
deadline = time.time() + 120
while time.time() < deadline:
    if os.path.exists(path):
        os.unlink(path)
        break
    time.sleep(0.01)
"""


def test_a_child_that_stored_no_fresh_result_fails_its_cell_with_its_last_log_lines(tmp_path, venvs):
    """A first sweep stores a PASS for every cell. In the second, one child's venv build fails before its run
    starts, so that old PASS is still the current result; another child exits 0 but its result is gone (a
    detached process deletes it as it appears). Both fail their cells, naming the exit code and the child's
    last log lines; the old PASS never stands in."""
    log = tmp_path / "slots.jsonl"
    cells = {"ok": {"normal": 8}, "bad": {"normal": 0}, "gone": {"normal": 0}}
    write_modes_matrix(tmp_path / "m.toml", log, cells)
    assert sweep(tmp_path, venvs, "--gpus", "0,1,2").returncode == 0
    results = tmp_path / "results"
    old = json.loads((results / f"gpu-{PY}-bad-normal.json").read_text())
    assert old["verdict"] == "pass"

    broken = tmp_path / "onnxruntime-1.32.0-py3-none-any.whl"
    broken.write_text("not a zip\n")
    write_modes_matrix(tmp_path / "m.toml", log, cells, extra=f'[ort.broken]\nwheel = "{broken}"', ort={"bad": "broken"})
    target = results / f"gpu-{PY}-gone-normal.json"
    target.unlink()
    deleter = subprocess.Popen([sys.executable, "-c", DELETER, str(target)], start_new_session=True)
    try:
        proc = sweep(tmp_path, venvs, "--gpus", "0,1,2")
    finally:
        deleter.kill()
        deleter.wait()
    assert proc.returncode != 0
    data = json.loads((results / "sweep.json").read_text())
    errors = data["errors"]
    bad_log = results / "sweep-logs" / f"gpu-{PY}-bad-normal.log"
    assert errors[f"gpu-{PY}-bad"].startswith(
        f"normal: {results / f'gpu-{PY}-bad-normal.json'} is older than this sweep (run {old['run_id']}); its child "
        f"exited 1 (log {bad_log}): "), errors
    assert "Session sweep aborted" in errors[f"gpu-{PY}-bad"]  # the child's own last lines
    gone_log = results / "sweep-logs" / f"gpu-{PY}-gone-normal.log"
    assert errors[f"gpu-{PY}-gone"].startswith(f"normal: it stored no result; its child exited 0 (log {gone_log}): ")
    assert "Session sweep was successful" in errors[f"gpu-{PY}-gone"]
    assert [c["cell"] for c in data["cells"]] == [f"gpu-{PY}-ok"]  # the others still ran and count
    assert f"  gpu-{PY}-bad: could not run: normal: {results / f'gpu-{PY}-bad-normal.json'} is older than this sweep" \
        in proc.stdout


def test_a_child_log_tail_is_shown_escaped(tmp_path):
    from ort_gpu_matrix.drive.readback import last_lines

    log = tmp_path / "child.log"
    log.write_bytes(b"one\n\ntwo\x1b]0;pwned\x07\nthree\r\x1b[2Afour\nfive\nsix\n")
    assert last_lines(log, 4) == "two\\x1b]0;pwned\\x07 | three\\x0d\\x1b[2Afour | five | six"
    assert last_lines(tmp_path / "missing.log").startswith("(its log cannot be read: ")


def test_two_children_of_one_cell_build_its_venv_once(tmp_path):
    """A fresh venvs dir: normal and require_cudnn start at once and both need the venv; one builds, one waits."""
    write_modes_matrix(tmp_path / "m.toml", tmp_path / "slots.jsonl", {"x": {"normal": 0, "require_cudnn": 0}})
    proc = sweep(tmp_path, tmp_path / "venvs", "--gpus", "0,1")
    assert proc.returncode == 0, proc.stdout[-3000:]
    logs = {p.name: p.read_text() for p in (tmp_path / "results" / "sweep-logs").glob("*.log")}
    assert len(logs) == 2
    assert sum(text.count("nox > built venv ") for text in logs.values()) == 1, logs
    assert sum(text.count("reusing venv ") for text in logs.values()) == 1, logs


# ---------------------------------------------------------------- the plan, on its own

# An H200 workload, in seconds: four cells, nine mode runs
SHAPE = {"a": {"normal": 10, "require_cudnn": 10, "teeth": 11}, "b": {"normal": 15, "require_cudnn": 15},
         "c": {"normal": 12.5}, "d": {"normal": 11, "require_cudnn": 9, "teeth": 10}}


def _jobs(shape, tmp_path):
    from ort_gpu_matrix.config.model import Libs, Ort, Suite, Torch
    from ort_gpu_matrix.drive.scheduler import jobs_of
    from ort_gpu_matrix.plan.cells import Cell

    cells = [(Cell(f"g-{c}", PY, Ort(id="o"), Torch(id="t"), Libs(id=c), Suite(id="s"), tuple(modes), "k"), tuple(modes))
             for c, modes in shape.items()]
    jobs = jobs_of(cells, tmp_path)
    for job in jobs:
        job.predicted_s = shape[job.cell.name[2:]][job.mode]
    return jobs


def test_the_plan_beats_cell_scheduling_on_the_h200_shape(tmp_path):
    from ort_gpu_matrix.drive.makespan import plan, simulate

    jobs = _jobs(SHAPE, tmp_path)
    total = sum(j.predicted_s for j in jobs)
    order, makespan = plan(jobs, 2)
    assert makespan <= 0.55 * total  # 52.0 of 103.5 s
    assert makespan == simulate(order, {j: j.predicted_s for j in jobs}, 2)
    teeth = [j for j in jobs if j.mode == "teeth"]
    assert all(t.after is not None and t.after.mode == "require_cudnn" and t.after.cell is t.cell for t in teeth)
    cells = _jobs({c: {"normal": sum(m.values())} for c, m in SHAPE.items()}, tmp_path)
    assert simulate(cells, {j: j.predicted_s for j in cells}, 2) == 61.0  # whole cells in matrix order: 0.59x
    assert makespan < simulate(sorted(jobs, key=lambda j: -j.predicted_s), {j: j.predicted_s for j in jobs}, 2) + 1e-9


def test_the_plan_runs_what_it_knows_nothing_about_first(tmp_path):
    from ort_gpu_matrix.drive.makespan import plan

    jobs = _jobs({"a": {"normal": 3}, "b": {"normal": 5}, "c": {"normal": 1}}, tmp_path)
    jobs[2].predicted_s = None  # no data: as long as the longest
    order, makespan = plan(jobs, 1)
    assert [j.cell.name for j in order] == ["g-c", "g-b", "g-a"] and makespan == 13.0
    unknown = _jobs({"a": {"normal": 1, "require_cudnn": 1, "teeth": 1}}, tmp_path)
    for j in unknown:
        j.predicted_s = None
    order, makespan = plan(unknown, 2)
    assert makespan is None  # nothing to predict from
    assert [j.mode for j in order][0] == "require_cudnn"  # the one teeth waits on goes first


def test_teeth_prefers_the_slot_its_require_cudnn_ran_on(tmp_path):
    from ort_gpu_matrix.drive.scheduler import pick

    rc, teeth = _jobs({"a": {"require_cudnn": 1, "teeth": 1}}, tmp_path)
    assert pick([teeth], [0, 1, 2], set(), {rc: 2}) is None  # require_cudnn has not ended: teeth waits
    assert pick([teeth], [0, 1, 2], {rc}, {rc: 2}) == (teeth, 2)
    assert pick([teeth], [0, 1], {rc}, {rc: 2}) == (teeth, 0)  # its slot is busy: any free one


def test_the_last_known_duration_skips_runs_that_tell_nothing(tmp_path):
    from ort_gpu_matrix.drive.history import last_duration

    runs = tmp_path / "runs" / "s-teeth"
    for run_id, data in [("20261130T100000Z-aaaaaaaa", {"duration_s": 7.5, "command": ["pytest"], "stopped": None}),
                         ("20261130T110000Z-bbbbbbbb", {"duration_s": 2.0, "command": ["pytest"],
                                                        "stopped": "interrupted (SIGINT)"}),
                         ("20261130T120000Z-cccccccc", {"duration_s": 0.0, "command": [], "stopped": None})]:
        (runs / run_id).mkdir(parents=True)
        (runs / run_id / "result.json").write_text(json.dumps(data))
    assert last_duration(tmp_path, "s-teeth") == 7.5  # not the refused run, not the interrupted one
    assert last_duration(tmp_path, "s-normal") is None


def test_a_teeth_that_may_start_early_goes_first_and_the_plan_counts_its_start_as_paid_meanwhile(tmp_path):
    """A job with `early_s` takes a free slot before any other once its require_cudnn runs (it waits
    holding no core), and the simulation ends it `tail_s` after that require_cudnn, its start paid meanwhile:
    the predicted makespan is what the real schedule does, not a serial teeth's."""
    from ort_gpu_matrix.drive.makespan import plan, simulate
    from ort_gpu_matrix.drive.scheduler import pick

    normal, rc, teeth = _jobs({"a": {"normal": 10, "require_cudnn": 10, "teeth": 8}}, tmp_path)
    other, = _jobs({"b": {"normal": 10}}, tmp_path)
    cost = {j: j.predicted_s for j in (normal, rc, teeth, other)}
    assert pick([other, teeth], [1, 2], set(), {rc: 0}, {rc: 0.0}, 0.0) == (other, 1)  # not early: in order
    teeth.early_s, teeth.tail_s = 0.0, 3.0
    assert pick([other, teeth], [1, 2], set(), {rc: 0}, {rc: 0.0}, 0.0) == (teeth, 1)  # early: first
    assert pick([other, teeth], [1, 2], set(), {}, {}, 0.0) == (other, 1)  # its require_cudnn not started yet
    assert simulate([rc, normal, teeth], cost, 3, {teeth: 3.0}) == 13.0  # max(0 + 5, 10) + 3
    assert simulate([rc, normal, teeth], cost, 3) == 14.0  # no tail known: half its cost after the census
    assert simulate([rc, normal, teeth], cost, 3, {teeth: 20.0}) == 18.0  # a tail longer than its cost: the cost
    teeth.early_s = None
    assert simulate([rc, normal, teeth], cost, 3, {teeth: 3.0}) == 18.0  # after require_cudnn: 10 + 8
    teeth.early_s = 0.0
    order, makespan = plan([normal, rc, teeth], 3)
    assert makespan == 13.0 and order[0] is rc


def test_a_runs_cost_leaves_out_its_wait_for_a_census_and_its_tail_is_from_its_first_test(tmp_path):
    """An early teeth counts its duration from its census (execute/mode_run.py): the plan's cost of it is its
    processes' span less the wait (the shortest worker wait), and its tail the controller's first test to its end."""
    from ort_gpu_matrix.drive.history import last_duration, last_whole

    bundle = tmp_path / "runs" / "s-teeth" / "20261201T100000Z-aaaaaaaa"
    bundle.mkdir(parents=True)
    (bundle / "result.json").write_text(json.dumps({"duration_s": 4.0, "command": ["pytest"], "stopped": None}))
    assert last_whole(tmp_path, "s-teeth") == (4.0, None)  # no marks: its duration, no tail
    marks = {"controller": {"process_start": 100.0, "first_test_start": 124.0, "finished": 128.0},
             "gw0": {"keep_wait_start": 105.0, "kept": 123.5}, "gw1": {"keep_wait_start": 107.0, "kept": 123.5}}
    (bundle / "report.json").write_text(json.dumps({"timings": marks}))
    assert last_whole(tmp_path, "s-teeth") == (11.5, 4.0)  # 28 s of span less 16.5 s of wait
    assert last_duration(tmp_path, "s-teeth") == 11.5
    for m in ("gw0", "gw1"):
        del marks[m]["kept"], marks[m]["keep_wait_start"]
    (bundle / "report.json").write_text(json.dumps({"timings": marks}))
    assert last_whole(tmp_path, "s-teeth") == (4.0, 4.0)  # it waited for nothing: its duration as stored


def test_with_teeth_started_early_every_require_cudnn_goes_ahead_of_the_runs_nothing_waits_on(tmp_path):
    """The costs the H200's 4-slot sweep planned with (docs/evidence/one-gpu-cells-h200.md): blind to runs slowing
    each other, the search put a normal ahead of a require_cudnn, so that require_cudnn's teeth could not start
    early. With a teeth that may start early, both require_cudnn runs are first, and both teeth start with them."""
    from ort_gpu_matrix.drive.makespan import plan

    shape = {"s": {"normal": 40.6, "require_cudnn": 39.6, "teeth": 13.5},
             "t": {"normal": 40.2, "require_cudnn": 40.2, "teeth": 13.2}}
    jobs = _jobs(shape, tmp_path)
    for job in jobs:
        job.carry_from = None  # measured with every test in every mode (before require_cudnn carried from normal)
        if job.mode == "teeth":
            job.early_s, job.tail_s = 0.0, 6.5
    order, makespan = plan(jobs, 4)
    assert [j.mode for j in order[:2]] == ["require_cudnn", "require_cudnn"], [j.session for j in order]
    assert makespan == 80.4  # the normals after the first require_cudnn ends: 39.6 + 40.6, 40.2 + 40.2


def test_teeth_start_early_only_in_the_shapes_measured(tmp_path, monkeypatch):
    """earlyteeth.mark: every run of the plan at once (a cell's three), or four slots and more, where the first
    `slots // 2` scoped teeth start beside their require_cudnn. On two or three slots with more runs than slots, a
    waiting teeth would hold the slot a normal runs in."""
    import dataclasses

    import ort_gpu_matrix.drive.earlyteeth as et

    monkeypatch.setattr(et, "basis", lambda results_dir, session: ["t.py::test"])  # each teeth has a last run

    def early(cells, slots):
        jobs = _jobs({c: {"normal": 10, "require_cudnn": 10, "teeth": 5} for c in cells}, tmp_path)
        for job in jobs:
            job.cell = dataclasses.replace(job.cell, suite=dataclasses.replace(job.cell.suite, teeth_scope="cudnn"))
        handoff = et.mark(jobs, slots, tmp_path, Voice.plain(log=unheard))
        if handoff is not None:
            handoff.close()
        return [j.cell.name for j in jobs if j.early_s is not None]

    assert early("a", 3) == ["g-a"]  # a cell's three at once
    assert early("a", 2) == []  # normal would wait
    assert early("ab", 3) == []
    assert early("ab", 4) == ["g-a", "g-b"]  # the H200's two-cell sweep
    assert early("abc", 4) == ["g-a", "g-b"]  # each of the first two beside its require_cudnn
    assert early("abc", 9) == ["g-a", "g-b", "g-c"]


def test_a_runs_cost_leaves_out_a_wait_of_its_one_process_without_xdist(tmp_path):
    """Without -n the pytest process itself collects and waits, and marks it on the controller."""
    from ort_gpu_matrix.drive.history import last_whole

    bundle = tmp_path / "runs" / "s-teeth" / "20261201T100000Z-aaaaaaaa"
    bundle.mkdir(parents=True)
    (bundle / "result.json").write_text(json.dumps({"duration_s": 4.5, "command": ["pytest"], "stopped": None}))
    marks = {"controller": {"process_start": 100.0, "keep_wait_start": 106.0, "kept": 123.5,
                            "first_test_start": 124.0, "finished": 128.0}}
    (bundle / "report.json").write_text(json.dumps({"timings": marks}))
    assert last_whole(tmp_path, "s-teeth") == (10.5, 4.0)  # 28 s of span less 17.5 s of wait


def test_a_census_none_is_handed_over_with_its_reason_escaped(tmp_path):
    """The reason may quote a run id read from a stored file; it reaches the terminal escaped."""
    from helpers import result

    from ort_gpu_matrix.drive import earlyteeth
    from ort_gpu_matrix.drive.handoff import Handoff
    from ort_gpu_matrix.store.results import current_path

    _normal, rc, teeth = _jobs({"x": {"normal": 1.0, "require_cudnn": 1.0, "teeth": 1.0}}, tmp_path)
    stale = result("require_cudnn", name="g-x", run_id="\x1b[2J\x1b[31mOK", started="2026-01-01T00:00:00+00:00")
    current_path(tmp_path, rc.session).write_text(json.dumps(stale.to_dict()))  # older than this sweep
    rc.started = time.time()
    teeth.proc = subprocess.Popen(["true"])
    teeth.proc.wait()
    said = []
    voice = Voice.plain(log=said.append)
    handoff = Handoff(voice)
    try:
        earlyteeth.hand_over(rc, [rc, teeth], handoff, tmp_path, voice)
    finally:
        handoff.close()
    handed = [line for line in said if "handed the census" in line]
    assert handed and "is older than this sweep" in handed[0], said
    assert not any("\x1b" in line for line in said), said
