"""One GPU, whole cells: a cell session overlaps its mode runs where the host has room (room.py, overlap.py).

Sleep-bound fixture cells (suites/slots/test_modes.py) record when each mode's test ran; a fake nvidia-smi
stands for the GPU (its free memory, and every process at 100 MiB). Checked on those records and on the
stored results, never on wall time.
"""
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import PY, REPO
from test_scheduler import records, sweep, write_modes_matrix

CELL = f"gpu-{PY}-x"
FAKE_SMI = """#!{python}
import os, sys
a = sys.argv[1:]
if a == ["-L"]:
    print("GPU 0: NVIDIA Fake (UUID: GPU-aaaa)")
elif a and a[0] == "--query-gpu=index,memory.free,memory.total":
    print("0, " + os.environ.get("FAKE_GPU_FREE", "100000") + ", 140000")
elif a and a[0] == "--query-gpu=index,memory.used":
    print("0, 500")
elif a and a[0] == "--query-compute-apps=pid,used_memory":
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            print(pid + ", 100")
"""


def fake_gpu(tmp_path, free="100000"):
    """PATH with a fake nvidia-smi first: one GPU with `free` MiB free."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(python=sys.executable))
    smi.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_GPU_FREE": free}


def no_gpu():
    return {"PATH": ":".join(d for d in os.environ["PATH"].split(":") if not (Path(d) / "nvidia-smi").exists())}


def cell_session(tmp_path, venvs, *args, session=CELL, env=None, timeout=600):
    full = {**os.environ, "MATRIX_TOML": str(tmp_path / "m.toml"), "MATRIX_RESULTS": str(tmp_path / "results"),
            "MATRIX_VENVS": str(venvs), **(env or {})}
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", session,
                           *(["--", *args] if args else [])],
                          env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def stored(tmp_path, mode, cell="x"):
    return json.loads((tmp_path / "results" / f"gpu-{PY}-{cell}-{mode}.json").read_text())


def overlaps(a, b):
    return a["start"] < b["end"] and b["start"] < a["end"]


def edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_cell_session_overlaps_its_modes_and_teeth_waits_for_the_stored_census(tmp_path, venvs):
    log = tmp_path / "slots.jsonl"
    write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 3, "require_cudnn": 6, "teeth": 0.5}})
    proc = cell_session(tmp_path, venvs, env=fake_gpu(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    assert (f"nox > {CELL}: overlapping: 2 mode run(s) at once on one GPU (GPU 100000 of 140000 MiB free, no peak "
            "recorded (each run counted as 35000 MiB, a quarter of the GPU): 2 fit; 2 of ") in out, out[-3000:]
    rec = records(log)
    n, rc, teeth = rec["x", "normal"], rec["x", "require_cudnn"], rec["x", "teeth"]
    assert overlaps(n, rc)  # normal and require_cudnn at once
    assert teeth["start"] > rc["end"]  # teeth waited for its census, though normal's slot was free from its end on
    assert n["end"] < rc["end"]
    results = {m: stored(tmp_path, m) for m in ("normal", "require_cudnn", "teeth")}
    census = tmp_path / "results" / results["require_cudnn"]["bundle"] / "result.json"
    assert census.stat().st_mtime < teeth["start"]  # the census was stored before teeth's test process began
    cov = results["teeth"]["teeth_coverage"]
    assert cov["checked"] and cov["tier_tests"] == 1 and cov["bitten"] == 1, results["teeth"]["warnings"]
    assert all(r["verdict"] == "pass" for r in results.values())
    workdirs = {r["workdir"] for r in results.values()}
    assert len(workdirs) == 3 and not any(Path(w).exists() for w in workdirs)  # a private dir each, removed
    assert len({r["bundle"] for r in results.values()}) == 3
    for m in ("normal", "require_cudnn"):  # sampled through the run: its one pytest process at 100 MiB
        assert results[m]["gpu_memory"]["peak_mib"] == 100 and results[m]["gpu_memory"]["how"] == "process group"
    logs = tmp_path / "results" / "sweep-logs"
    assert {p.name for p in logs.iterdir()} == {f"{CELL}-{m}.log" for m in results}  # each run's own log
    assert f"[slot 0] {CELL}-" in out and f"[slot 1] {CELL}-" in out

    again = cell_session(tmp_path, venvs, env=fake_gpu(tmp_path))  # now each run has a peak on record
    assert again.returncode == 0, again.stdout[-3000:]
    assert "MiB free, last peaks 100 MiB, 100 MiB" in again.stdout, again.stdout[-3000:]


@pytest.mark.parametrize("how", ["command line", "suite", "no GPU", "memory"])
def test_the_cap_or_a_full_gpu_keeps_the_serial_order(tmp_path, venvs, how):
    log = tmp_path / "slots.jsonl"
    write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 1.5, "require_cudnn": 1.5, "teeth": 0}})
    args, env = (), fake_gpu(tmp_path)
    if how == "command line":
        args = ("--slots-per-gpu", "1")
    elif how == "suite":
        edit(tmp_path / "m.toml", "[suite.sx]\n", "[suite.sx]\nslots_per_gpu = 1\n")
    elif how == "no GPU":
        env = no_gpu()
    else:
        env = fake_gpu(tmp_path, free="60000")  # two unknown runs at 35000 MiB each do not fit
    proc = cell_session(tmp_path, venvs, *args, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    why = {"command line": "(--slots-per-gpu 1; ",
           "suite": "the suite caps it at slots_per_gpu = 1",
           "no GPU": "(no GPU memory to read (nvidia-smi is not on PATH): one run at a time; --slots-per-gpu 2 "
                     "overlaps them anyway; ",
           "memory": "(GPU 60000 of 140000 MiB free, no peak recorded (each run counted as 35000 MiB, a quarter of "
                     "the GPU): 1 fit; "}[how]
    line = next((ln for ln in proc.stdout.splitlines() if f"{CELL}: one after another: 1 mode run(s)" in ln), "")
    assert why in line, proc.stdout[-3000:]
    ends = records(log)
    assert len(ends) == 3
    assert not any(overlaps(a, b) for a, b in itertools.combinations(ends.values(), 2))
    assert "sweep-logs" not in proc.stdout  # in this process, as before


def test_a_failing_and_a_hanging_mode_run_stop_only_themselves(tmp_path, venvs):
    """normal hangs until its suite's timeout; require_cudnn fails; teeth still runs on require_cudnn's census,
    without waiting for the hung run, and the session fails naming both."""
    log = tmp_path / "slots.jsonl"
    m = write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 120, "require_cudnn": 0.5, "teeth": 0}})
    edit(m, "[suite.sx]\n", "[suite.sx]\ntimeout = 12\n")
    edit(m, 'SLOT_CELL = "x", ', 'SLOT_CELL = "x", SLOT_FAIL_REQUIRE_CUDNN = "1", ')
    proc = cell_session(tmp_path, venvs, "--slots-per-gpu", "2", env=no_gpu())
    out = proc.stdout
    assert proc.returncode != 0, out[-3000:]
    results = {m: stored(tmp_path, m) for m in ("normal", "require_cudnn", "teeth")}
    assert results["normal"]["verdict"] == "fail" and results["normal"]["stopped"] == "timed out after 12 s"
    assert results["require_cudnn"]["verdict"] == "fail"
    assert any("this mode fails on purpose" in r for r in results["require_cudnn"]["reasons"]), results["require_cudnn"]
    assert results["teeth"]["verdict"] == "pass" and results["teeth"]["teeth_coverage"]["checked"]
    rec = records(log)
    assert ("x", "normal") not in rec  # it never ended: it was stopped
    starts = {r["mode"]: r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "start"}
    assert rec["x", "teeth"]["start"] < starts["normal"]["start"] + 12  # teeth did not wait for the hung run
    assert "--slots-per-gpu 2 overlaps them anyway" not in out and "(--slots-per-gpu 2; " in out
    assert f"nox > Session {CELL} aborted: verdict FAIL: {CELL}-normal, {CELL}-require_cudnn" in out, out[-2000:]


def test_a_sweep_on_one_gpu_overlaps_two_cells_when_there_is_room(tmp_path, venvs):
    log = tmp_path / "slots.jsonl"
    write_modes_matrix(tmp_path / "m.toml", log, {"a": {"normal": 3}, "b": {"normal": 3}})
    proc = sweep(tmp_path, venvs, "--gpus", "0", env=fake_gpu(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "\nsweep: 2 mode run(s) at once per GPU (GPU 100000 of 140000 MiB free" in proc.stdout
    rec = records(log)
    assert overlaps(rec["a", "normal"], rec["b", "normal"])
    assert {r["cuda_visible_devices"] for r in rec.values()} == {"0"}
    capped = sweep(tmp_path, venvs, "--gpus", "0", "--slots-per-gpu", "1", env=fake_gpu(tmp_path))
    assert capped.returncode == 0, capped.stdout[-3000:]
    assert "\nsweep: 1 mode run(s) at once per GPU (--slots-per-gpu 1; " in capped.stdout
    log.unlink()


def test_a_sweep_unasked_overlaps_on_the_gpus_nvidia_smi_lists_unless_told_not_to(tmp_path, venvs):
    """No --gpus on a host with a GPU: the sweep takes --gpus all and says so, so its mode runs overlap as a cell
    session's do; --gpus none, or CUDA_VISIBLE_DEVICES set by the caller, keeps them one after another."""
    log = tmp_path / "slots.jsonl"
    write_modes_matrix(tmp_path / "m.toml", log, {"a": {"normal": 3}, "b": {"normal": 3}})
    proc = sweep(tmp_path, venvs, "--confirm", "0", env=fake_gpu(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert ("\nsweep: nvidia-smi lists 1 GPU(s): --gpus all unasked, so each GPU overlaps the mode runs it has "
            "room for (--gpus none: one after another in this process)\n") in proc.stdout, proc.stdout[-3000:]
    rec = records(log)
    assert overlaps(rec["a", "normal"], rec["b", "normal"])
    assert {r["cuda_visible_devices"] for r in rec.values()} == {"0"}
    for how, env in (("--gpus none", {}), ("the caller's CUDA_VISIBLE_DEVICES", {"CUDA_VISIBLE_DEVICES": "0"})):
        log.unlink()
        serial = sweep(tmp_path, venvs, "--confirm", "0", *(how.split() if how.startswith("--") else []),
                       env={**fake_gpu(tmp_path), **env})
        assert serial.returncode == 0, serial.stdout[-3000:]
        rec = records(log)
        assert not overlaps(rec["a", "normal"], rec["b", "normal"]), how
        assert "--gpus all unasked" not in serial.stdout, how
        assert ("\nsweep: CUDA_VISIBLE_DEVICES='0' is set, and --gpus all would count every GPU nvidia-smi lists: "
                "the mode runs go one after another in this process" in serial.stdout) == bool(env), how


def test_the_probe_records_where_each_process_start_went(tmp_path, venvs):
    write_modes_matrix(tmp_path / "m.toml", tmp_path / "slots.jsonl", {"x": {"normal": 0}})
    proc = cell_session(tmp_path, venvs, "-n", "2", session=f"{CELL}-normal", env=no_gpu())
    assert proc.returncode == 0, proc.stdout[-3000:]
    result = stored(tmp_path, "normal")
    report = json.loads((tmp_path / "results" / result["bundle"] / "report.json").read_text())
    timings = report["timings"]
    assert set(timings) == {"controller", "gw0", "gw1"}, timings
    order = ["process_start", "probe_imported", "configured", "collection_start", "collected", "first_test_start",
             "first_test_end", "last_test_end", "finished"]
    for process, marks in timings.items():
        present = [marks[k] for k in order if k in marks]
        assert present == sorted(present), (process, marks)
        if process != "controller":  # a worker ran tests; its start followed the controller's configure
            assert all(k in marks for k in order), marks
            assert marks["process_start"] >= timings["controller"]["configured"] - 0.01
    # what isolation cost each worker: seconds > 0 spent watching, and the tests it watched
    watched = {p: m["isolation_tests"] for p, m in timings.items() if p != "controller"}
    assert sum(watched.values()) == result["counts"]["passed"] and all(n > 0 for n in watched.values()), timings
    assert all(0 < timings[p]["isolation_s"] < 5 for p in watched), timings
    bench = subprocess.run([sys.executable, str(REPO / "bench" / "isolation.py"),
                            str(tmp_path / "results" / f"{CELL}-normal.json")], capture_output=True, text=True)
    assert bench.returncode == 0, bench.stderr
    assert f"(isolation restore): {result['counts']['passed']} tests in 2 process(es), " in bench.stdout, bench.stdout


def test_the_room_decision():
    from ort_gpu_matrix.host.room import Ask, Room, decide, parse_wanted, workers_of

    free = (100000, 140000)
    assert decide(Ask(2, 8, [None, None], None, None), 16, free).slots == 2  # two -n 8 on 16 cores: the ceiling
    two = decide(Ask(2, 8, [None, None], None, None), 16, free)
    assert two.workers is None and "16 of 16 cores for 2 run(s) of -n 8" in two.why
    cut = decide(Ask(2, 8, [None, None], None, None), 12, free)
    assert (cut.slots, cut.workers) == (2, 6) and "-n 6 each" in cut.why  # never oversubscribed: cut to the share
    assert cut.pytest_args(8) == ["-n", "6"] and cut.pytest_args(1) == []
    serial = decide(Ask(2, 8, [None, None], None, None), 6, free)
    assert (serial.slots, serial.workers) == (1, None)  # -n 3 each would halve them or worse: serial, own -n
    assert decide(Ask(2, 8, [60000, 50000], None, None), 16, free).slots == 1  # the last peaks do not fit together
    assert decide(Ask(2, 8, [40000, 50000], None, None), 16, free).slots == 2
    assert decide(Ask(4, 1, [1, 1, 1, 1], None, None), 64, free).slots == 4
    assert decide(Ask(6, 1, [1] * 6, None, None), 64, free).slots == 4  # never more than four unasked
    four = decide(Ask(6, 8, [4000] * 6, None, None), 16, free)  # a two-cell sweep, both teeth early, on the H200
    assert (four.slots, four.workers) == (4, 4) and "4 runs of -n 8 would need 32 of 16 cores: -n 4 each" in four.why
    three = decide(Ask(3, 8, [7000, 7000, 5000], None, None), 16, free)  # a scoped teeth with the pair
    assert (three.slots, three.workers) == (3, 5) and "3 runs of -n 8 would need 24 of 16 cores: -n 5 each" in three.why
    assert decide(Ask(3, 8, [50000, 40000, 30000], None, None), 16, free).slots == 2  # memory for two only
    assert decide(Ask(3, 1, [], 3, None), 64, 'no GPU').slots == 3  # asked for
    assert decide(Ask(2, 1, [], 2, 1), 64, free).slots == 1  # the suite's cap wins
    assert decide(Ask(1, 1, [], 2, None), 64, free).slots == 1  # require_cudnn and teeth: one waits on the other
    assert decide(Ask(2, 8, [None], None, None), 16, 'nvidia-smi is not on PATH').slots == 1
    assert isinstance(two, Room)
    assert workers_of(["-n", "8"], 16) == 8 and workers_of(["-n8"], 16) == 8 and workers_of([], 16) == 1
    assert workers_of(["-n", "8", "-n", "2"], 16) == 2 and workers_of(["--numprocesses=auto"], 16) == 16
    assert parse_wanted("auto") is None and parse_wanted("2") == 2
    for bad in ("0", "x", "-1"):
        with pytest.raises(Exception, match="--slots-per-gpu"):
            parse_wanted(bad)


def test_a_scoped_teeth_of_fewer_tests_than_its_workers_starts_no_idle_worker(tmp_path, venvs):
    m = write_modes_matrix(tmp_path / "m.toml", tmp_path / "slots.jsonl", {"x": {"require_cudnn": 0, "teeth": 0}})
    edit(m, "[suite.sx]\n", '[suite.sx]\nteeth_scope = "cudnn"\n')
    both = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", f"{CELL}-require_cudnn",
                           f"{CELL}-teeth", "--", "-n", "2"],
                          env={**os.environ, **no_gpu(), "MATRIX_TOML": str(m), "MATRIX_RESULTS": str(tmp_path / "results"),
                               "MATRIX_VENVS": str(venvs)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    assert both.returncode == 0, both.stdout[-3000:]
    assert f"nox > {CELL}-teeth: 1 test(s) to run: -n 0 instead of -n 2\n" in both.stdout
    teeth, rc = stored(tmp_path, "teeth"), stored(tmp_path, "require_cudnn")
    def n_of(r):
        return [r["command"][i + 1] for i, a in enumerate(r["command"]) if a == "-n"]

    assert n_of(teeth) == ["2", "0"] and n_of(rc) == ["2"]  # the last -n wins: teeth ran in one process
    assert teeth["verdict"] == "pass" and teeth["counts"]["collected"] == 1
    assert teeth["teeth_coverage"]["checked"]


def test_a_cells_confirmation_reruns_share_the_gpu_as_its_mode_runs_do(tmp_path, venvs):
    """--confirm reruns normal's and require_cudnn's failures: where the GPU has room for two (a fake nvidia-smi's
    memory) each round's reruns run at once; where none can be read (no nvidia-smi), in turn."""
    log = tmp_path / "slots.jsonl"
    write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 4, "require_cudnn": 4}})
    fail = {"SLOT_FAIL_NORMAL": "1", "SLOT_FAIL_REQUIRE_CUDNN": "1"}
    proc = sweep(tmp_path, venvs, "--gpus", "none", "--confirm", "1", "--verbose", env={**fake_gpu(tmp_path), **fail})
    assert proc.returncode == 1, proc.stdout[-3000:]  # both failures reproduce: confirmed, the sweep fails
    assert f"confirm: gpu-{PY}-x: rerun 1 of 1: 2 mode rerun(s) at once (GPU 100000 of 140000 MiB free" in proc.stdout, \
        proc.stdout[-3000:]
    ends = [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"]
    assert [r["mode"] for r in ends[:2]] == ["normal", "require_cudnn"] and len(ends) == 4, ends
    first, reruns = ends[:2], {r["mode"]: r for r in ends[2:]}
    assert not overlaps(*first)  # the sweep's own runs: serial
    assert overlaps(reruns["normal"], reruns["require_cudnn"])  # the confirmation round: side by side
    from ort_gpu_matrix.drive.history import last_duration, last_peak_mib

    for mode in ("normal", "require_cudnn"):
        r = stored(tmp_path, mode)
        assert r["verdict"] == "fail" and len(r["confirmation"]["reruns"]) == 1, r.get("confirmation")
        rerun = json.loads((tmp_path / "results" / r["confirmation"]["reruns"][0]["bundle"] / "result.json").read_text())
        assert rerun["rerun_of"] == r["run_id"] and r["rerun_of"] is None
        # the next plan reads the whole run's length and peak, not its rerun's (the rerun is the newer bundle)
        assert last_duration(tmp_path / "results", r["session"]) == r["duration_s"] != rerun["duration_s"]
        assert last_peak_mib(tmp_path / "results", r["session"]) == (r.get("gpu_memory") or {}).get("peak_mib")
    log.unlink()
    one = sweep(tmp_path, venvs, "--confirm", "1", "--verbose", env={**no_gpu(), **fail})
    assert one.returncode == 1, one.stdout[-3000:]
    assert f"confirm: gpu-{PY}-x: rerun 1 of 1: 1 mode rerun(s) at once (no GPU memory to read" in one.stdout
    ends = [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"]
    assert len(ends) == 4 and not overlaps(ends[2], ends[3]), ends


def test_ctrl_c_while_a_cell_waits_on_its_side_rerun_stops_it_and_still_writes_the_report(tmp_path, venvs):
    """normal's rerun (short) runs on the sweep's thread, require_cudnn's (long) beside it in a thread, where no
    signal arrives. A SIGINT while the sweep waits for the long one stops it (its test never ends), the first
    runs stand, and sweep.json is still written, saying SIGINT."""
    import signal
    import time

    log = tmp_path / "slots.jsonl"
    write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 0.5, "require_cudnn": 20}})
    env = {**os.environ, "MATRIX_TOML": str(tmp_path / "m.toml"), "MATRIX_RESULTS": str(tmp_path / "results"),
           "MATRIX_VENVS": str(venvs), **fake_gpu(tmp_path), "SLOT_FAIL_NORMAL": "1", "SLOT_FAIL_REQUIRE_CUDNN": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", "--",
                             "--confirm", "1", "--verbose"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if f"gpu-{PY}-x-require_cudnn: rerun 1 of 1" in line:
            break
    bundles = tmp_path / "results" / "runs" / f"gpu-{PY}-x-normal"
    deadline = time.monotonic() + 120  # only a bound against a sweep that hangs: the loop ends on an event
    while len([b for b in bundles.iterdir() if (b / "result.json").exists() and not b.name.startswith(".")]) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "normal's rerun was never stored"
        time.sleep(0.05)  # until normal's short rerun is stored: then the sweep waits on the long one
    stopped_at = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    took = time.monotonic() - stopped_at
    text = "".join(seen) + out
    assert took < 15, (took, text[-3000:])  # not the 20 s the side rerun sleeps
    ends = [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"]
    assert [r["mode"] for r in ends] == ["normal", "require_cudnn", "normal"], ends  # the long rerun never ended
    assert "sweep: SIGINT during confirmation: every change counts as it was first seen" in text, text[-3000:]
    doc = json.loads((tmp_path / "results" / "sweep.json").read_text())
    assert doc["interrupted"] == "SIGINT", doc.get("interrupted")


def marks(tmp_path, result):
    """The probe's marks of a run's processes (timings.py), from its stored report."""
    return json.loads((tmp_path / "results" / result["bundle"] / "report.json").read_text())["timings"]


def teeth_process_start(tmp_path, result):
    """When the teeth run's pytest started."""
    return marks(tmp_path, result)["controller"]["process_start"]


def test_a_scoped_teeth_starts_early_on_a_second_run_and_runs_its_tests_only_once_the_census_is_stored(tmp_path, venvs):
    """Where there is room for three runs, a scoped teeth's process starts with the pair, collects on the
    files of its last run, and its tests wait for the census, handed over only once require_cudnn's child stored
    it. On a first run there is no last run to collect on: it waits, then starts. Every figure is the same."""
    log = tmp_path / "slots.jsonl"
    m = write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 1, "require_cudnn": 8, "teeth": 0}})
    edit(m, "[suite.sx]\n", '[suite.sx]\nteeth_scope = "cudnn"\n')
    env = {**fake_gpu(tmp_path, free="139000"), "MATRIX_CORES": "3"}  # memory and cores for three runs of -n 1
    first = cell_session(tmp_path, venvs, env=env)
    assert first.returncode == 0, first.stdout[-3000:]
    # no last teeth run to collect on: the pair at once, teeth after (a third slot would only wait)
    assert f"nox > {CELL}: overlapping: 2 mode run(s) at once on one GPU (" in first.stdout, first.stdout[-3000:]
    assert "may start while" not in first.stdout
    before = {m: stored(tmp_path, m) for m in ("normal", "require_cudnn", "teeth")}
    assert teeth_process_start(tmp_path, before["teeth"]) > records(log)["x", "require_cudnn"]["end"]
    log.unlink()

    second = cell_session(tmp_path, venvs, env=env)
    out = second.stdout
    assert second.returncode == 0, out[-3000:]
    assert f"nox > {CELL}: overlapping: 3 mode run(s) at once on one GPU (" in out, out[-3000:]
    assert f"{CELL}-teeth: may start while {CELL}-require_cudnn runs: its processes collect meanwhile" in out
    after = {m: stored(tmp_path, m) for m in ("normal", "require_cudnn", "teeth")}
    rc = records(log)["x", "require_cudnn"]
    assert teeth_process_start(tmp_path, after["teeth"]) < rc["end"]  # it started while require_cudnn slept
    census = tmp_path / "results" / after["require_cudnn"]["bundle"] / "result.json"
    first_test = min(m["first_test_start"] for m in marks(tmp_path, after["teeth"]).values() if m.get("first_test_start"))
    assert census.stat().st_mtime < first_test  # yet its one test ran only after the census was stored
    teeth_log = (tmp_path / "results" / "sweep-logs" / f"{CELL}-teeth.log").read_text()
    assert "census handed over after " in teeth_log and ": 1 test(s) to keep" in teeth_log, teeth_log[-2000:]
    assert f"handed the census of {CELL}-require_cudnn run {after['require_cudnn']['run_id']}" in out
    for mode in before:  # every figure as on the first run
        for key in ("verdict", "counts", "outcomes", "dispatch", "teeth_coverage", "reasons"):
            assert after[mode][key] == before[mode][key], (mode, key)
    assert after["teeth"]["teeth_coverage"]["checked"] and after["teeth"]["teeth_coverage"]["bitten"] == 1
    handed = Path(out.split("(handed over in ", 1)[1].split(")", 1)[0])
    assert handed.name.startswith("ort-matrix-handoff-") and not handed.exists()  # its private dir, removed at the end


def test_matrix_cores_sets_the_cores_the_room_counts_and_a_bad_value_says_how_to_fix_it(monkeypatch):
    from ort_gpu_matrix.host.room import RoomError, cores
    monkeypatch.setenv("MATRIX_CORES", "12")
    assert cores() == 12
    for bad in ("0", "many", "-3"):
        monkeypatch.setenv("MATRIX_CORES", bad)
        with pytest.raises(RoomError, match=f"MATRIX_CORES='{bad}': give a whole number of cores, 1 or more, or unset it"):
            cores()


def test_a_handoff_says_which_run_or_why_none_in_a_private_dir_and_a_file_that_never_comes_is_an_error(tmp_path):
    """handoff.py: the parent writes SESSION=RUN_ID, or `none: why` when require_cudnn stored nothing (teeth then
    refuses as it would after require_cudnn, teeth.teeth_selection); the child bounds its wait."""
    import stat

    from helpers import result

    from ort_gpu_matrix.drive.handoff import Handoff, HandoffError, wait_ref
    from ort_gpu_matrix.util.voice import Voice

    handoff = Handoff(Voice.plain())
    try:
        assert stat.S_IMODE(handoff.dir.stat().st_mode) == 0o700
        handoff.give("c-teeth", "it stored no\nresult")
        assert wait_ref(handoff.path("c-teeth"), 1) == (None, "it stored no result")
        stored = result("require_cudnn", name="c")
        handoff.give("c-teeth", stored)
        assert wait_ref(handoff.path("c-teeth"), 1) == (f"c-require_cudnn={stored.run_id}", None)
        with pytest.raises(HandoffError, match=r"--census-file .*never\.census: no census was handed over within 0\.2 s"):
            wait_ref(handoff.dir / "never.census", 0.2)
    finally:
        handoff.close()
    assert not handoff.dir.exists()


@pytest.mark.parametrize("cores_", [8, 10, 11])
def test_three_candidate_runs_never_give_less_room_than_two(cores_):
    """With AUTO_MOST 3, three runs of -n 8 that cannot be cut to half their workers fall back to `cores // 8` = 1 slot,
    where two runs (-n 4 or 5 each) were chosen before: a sweep, or a cell with a scoped teeth, on 8-11 cores goes
    serial."""
    from ort_gpu_matrix.host.room import Ask, decide
    two = decide(Ask(2, 8, [1000, 1000], None, None), cores_, (139000, 140000))
    three = decide(Ask(3, 8, [1000, 1000, 1000], None, None), cores_, (139000, 140000))
    four = decide(Ask(4, 8, [1000] * 4, None, None), cores_, (139000, 140000))
    assert two.slots == 2
    assert three.slots >= two.slots, three.why
    assert four.slots >= two.slots, four.why


def test_matrix_cores_a_non_ascii_digit_is_a_clear_error_not_a_traceback(monkeypatch):
    from ort_gpu_matrix.host.room import RoomError, cores
    monkeypatch.setenv("MATRIX_CORES", "\u00b2")  # str.isdigit() is True, int() raises ValueError
    with pytest.raises(RoomError):
        cores()


def test_an_early_teeth_takes_its_workers_from_the_census_not_from_its_last_run(tmp_path, venvs):
    """A teeth started early gets `few_workers(basis)`: -n from its last run's tests. Once its census keeps a
    different number of tests in the same files, it runs under another -n than a serial run of the same census."""
    log = tmp_path / "slots.jsonl"
    m = write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 0, "require_cudnn": 4, "teeth": 0}})
    edit(m, "[suite.sx]\n", '[suite.sx]\nteeth_scope = "cudnn"\n')
    env = {**fake_gpu(tmp_path, free="139000"), "MATRIX_CORES": "6"}  # three runs of -n 2
    first = cell_session(tmp_path, venvs, "-n", "2", env=env)
    assert first.returncode == 0, first.stdout[-3000:]
    cmd1 = stored(tmp_path, "teeth")["command"]
    assert [cmd1[i + 1] for i, a in enumerate(cmd1) if a == "-n"][-1] == "0"  # serial path: 1 kept test, -n 0
    # its last run as if it had kept two tests (the census of an older wheel): the basis now holds two
    current = tmp_path / "results" / f"gpu-{PY}-x-teeth.json"
    doc = json.loads(current.read_text())
    (only,) = doc["outcomes"]
    doc["outcomes"][only.split("::")[0] + "::test_sleeps_in_its_slot"] = doc["outcomes"][only]
    current.write_text(json.dumps(doc))
    second = cell_session(tmp_path, venvs, "-n", "2", env=env)
    assert second.returncode == 0, second.stdout[-3000:]
    teeth_log = (tmp_path / "results" / "sweep-logs" / f"{CELL}-teeth.log").read_text()
    assert "started early" in teeth_log, teeth_log[-2000:]
    cmd = stored(tmp_path, "teeth")["command"]
    ns = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-n"]
    assert ns[-1] == "0", f"a serial teeth of 1 kept test runs at -n 0; the early one ran at -n {ns[-1]}"


def test_ctrl_c_while_an_early_teeth_waits_stores_no_teeth_result_and_its_last_one_stays_current(tmp_path, venvs):
    """A SIGINT while require_cudnn runs and teeth's processes wait for its census: teeth ran no test, as it would
    not have started serially, so it stores nothing, and its last result stays the session's current one."""
    import signal
    import time

    log = tmp_path / "slots.jsonl"
    m = write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 0, "require_cudnn": 0, "teeth": 0}})
    edit(m, "[suite.sx]\n", '[suite.sx]\nteeth_scope = "cudnn"\n')
    env = {**fake_gpu(tmp_path, free="139000"), "MATRIX_CORES": "3"}
    assert cell_session(tmp_path, venvs, env=env).returncode == 0  # a last teeth run to start on
    last = stored(tmp_path, "teeth")
    edit(m, 'SLOT_SLEEP_REQUIRE_CUDNN = "0"', 'SLOT_SLEEP_REQUIRE_CUDNN = "60", SLOT_MARK_COLLECTION = "1"')
    full = {**os.environ, "MATRIX_TOML": str(m), "MATRIX_RESULTS": str(tmp_path / "results"),
            "MATRIX_VENVS": str(venvs), **env}
    proc = subprocess.Popen([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", CELL], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    teeth_log = tmp_path / "results" / "sweep-logs" / f"{CELL}-teeth.log"
    teeth_log.unlink()  # the first run's
    deadline = time.monotonic() + 120  # only a bound against a run that hangs: the loop ends on an event
    while not any(r["event"] == "collected" and r["mode"] == "teeth" for r in map(json.loads, log.read_text().splitlines())):
        assert time.monotonic() < deadline and proc.poll() is None, "teeth's pytest never collected its file"
        time.sleep(0.05)  # until teeth's pytest collected: then it waits for its census; require_cudnn sleeps on
    assert "started early" in teeth_log.read_text(), teeth_log.read_text()[-2000:]
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode != 0
    text = teeth_log.read_text()
    assert "stopped while it waited for its census: nothing stored" in text, text[-3000:]
    assert stored(tmp_path, "teeth")["run_id"] == last["run_id"]  # its last result stays current
    bundles = list((tmp_path / "results" / "runs" / f"{CELL}-teeth").iterdir())
    assert [b.name for b in bundles if not b.name.startswith(".")] == [last["run_id"]]  # and no new bundle
    assert stored(tmp_path, "require_cudnn")["stopped"].startswith("interrupted")  # the run that was going: stored


def test_a_sweep_starts_a_scoped_teeth_while_its_require_cudnn_runs_and_its_tests_wait_for_the_stored_census(
        tmp_path, venvs):
    """In a `--gpus` sweep as in a cell session, in the H200's shape: two cells on four slots. Each scoped
    teeth with a last run to collect on starts beside its require_cudnn, both require_cudnn runs start before
    either normal, and a teeth's test runs only after its census is stored and handed over. Every figure is as in
    the sweep before, where each teeth started after its require_cudnn."""
    log = tmp_path / "slots.jsonl"
    m = write_modes_matrix(tmp_path / "m.toml", log, {c: {"normal": 1, "require_cudnn": 8, "teeth": 0} for c in "xy"})
    for c in "xy":
        edit(m, f"[suite.s{c}]\n", f'[suite.s{c}]\nteeth_scope = "cudnn"\n')
    env = {**fake_gpu(tmp_path, free="139000"), "MATRIX_CORES": "4"}  # four runs of -n 1
    modes = [(c, mode) for c in "xy" for mode in ("normal", "require_cudnn", "teeth")]
    first = sweep(tmp_path, venvs, "--gpus", "0", "--confirm", "0", env=env)
    assert first.returncode == 0, first.stdout[-3000:]
    assert "may start while" not in first.stdout  # no last teeth run to collect on
    before = {(c, mode): stored(tmp_path, mode, c) for c, mode in modes}
    for c in "xy":
        assert teeth_process_start(tmp_path, before[c, "teeth"]) > records(log)[c, "require_cudnn"]["end"]
    log.unlink()

    second = sweep(tmp_path, venvs, "--gpus", "0", "--confirm", "0", env=env)
    out = second.stdout
    assert second.returncode == 0, out[-3000:]
    assert "\nsweep: 4 mode run(s) at once per GPU (" in out, out[-3000:]
    after = {(c, mode): stored(tmp_path, mode, c) for c, mode in modes}
    for c in "xy":
        cell = f"gpu-{PY}-{c}"
        assert f"{cell}-teeth: may start while {cell}-require_cudnn runs: its processes collect meanwhile" in out
        assert f"{cell}-teeth: starts while {cell}-require_cudnn runs; its census is handed over when that ends" in out
        assert teeth_process_start(tmp_path, after[c, "teeth"]) < records(log)[c, "require_cudnn"]["end"]
        census = tmp_path / "results" / after[c, "require_cudnn"]["bundle"] / "result.json"
        first_test = min(m["first_test_start"] for m in marks(tmp_path, after[c, "teeth"]).values()
                         if m.get("first_test_start"))
        assert census.stat().st_mtime < first_test
        assert f"handed the census of {cell}-require_cudnn run {after[c, 'require_cudnn']['run_id']}" in out
    started = [r["mode"] for r in sorted(json.loads((tmp_path / "results" / "sweep-timeline.json").read_text()),
                                         key=lambda r: r["started"])]
    assert started[-2:] == ["normal", "normal"], started  # both require_cudnn (and their teeth) went first
    for key in modes:
        for field in ("verdict", "counts", "outcomes", "dispatch", "teeth_coverage", "reasons"):
            assert after[key][field] == before[key][field], (key, field)
    assert all(after[c, "teeth"]["teeth_coverage"]["bitten"] == 1 for c in "xy")
    handed = Path(out.split("(handed over in ", 1)[1].split(")", 1)[0])
    assert not handed.exists()


def test_a_cell_on_two_slots_overlaps_its_pair_and_starts_no_teeth_early(tmp_path, venvs):
    """On two slots an early teeth would take the slot normal runs in, so normal would wait for require_cudnn.
    With a last teeth run on record, `--slots-per-gpu 2` still overlaps the pair, and teeth follows its census."""
    log = tmp_path / "slots.jsonl"
    m = write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 4, "require_cudnn": 4, "teeth": 0}})
    edit(m, "[suite.sx]\n", '[suite.sx]\nteeth_scope = "cudnn"\n')
    env = {**fake_gpu(tmp_path, free="139000"), "MATRIX_CORES": "3"}
    assert cell_session(tmp_path, venvs, "--slots-per-gpu", "2", env=env).returncode == 0  # a last teeth run
    log.unlink()
    again = cell_session(tmp_path, venvs, "--slots-per-gpu", "2", env=env)
    assert again.returncode == 0, again.stdout[-3000:]
    rec = records(log)
    assert overlaps(rec["x", "normal"], rec["x", "require_cudnn"]), rec
    assert "may start while" not in again.stdout
    assert teeth_process_start(tmp_path, stored(tmp_path, "teeth")) > rec["x", "require_cudnn"]["end"]


def test_a_handoff_dir_left_by_a_killed_parent_is_removed_by_the_next_run(tmp_path):
    """A SIGKILLed parent cannot remove its handoff dir; it is named for its maker (orphans.py), so the next
    run's clean-up removes it, and never one whose maker still runs."""
    import signal

    from ort_gpu_matrix.util.orphans import clean_stale_workdirs

    code = ("import sys, time\nfrom ort_gpu_matrix.drive.handoff import Handoff\n"
            "from ort_gpu_matrix.util.voice import Voice\n"
            "h = Handoff(Voice.plain()); print(h.dir, flush=True); time.sleep(120)\n")
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    live = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    killed = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        alive, dead = Path(live.stdout.readline().strip()), Path(killed.stdout.readline().strip())
        assert alive.parent == dead.parent == tmp_path and dead.is_dir()
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert dead.is_dir()  # nothing could remove it
        assert clean_stale_workdirs(tmp_path) == [dead]
        assert not dead.exists() and alive.is_dir()
    finally:
        live.kill()
        live.wait()


def test_a_census_given_to_a_sweep_that_is_no_child_is_refused(tmp_path, venvs):
    write_modes_matrix(tmp_path / "m.toml", tmp_path / "slots.jsonl", {"x": {"normal": 0}})
    for flag in ("--census", "--census-file"):
        proc = sweep(tmp_path, venvs, flag, f"{CELL}-require_cudnn=x", env=no_gpu())
        assert proc.returncode != 0
        assert ("sweep: --census and --census-file are what a --gpus sweep gives its own child runs; a sweep reads "
                "each census itself from the require_cudnn run it makes: drop them") in proc.stdout, proc.stdout[-2000:]
        assert not (tmp_path / "results" / f"{CELL}-normal.json").exists()  # nothing ran


def _harness_of(pid, session):
    """The child nox (the harness) above a test process: the first ancestor whose command line selects `session`."""
    while pid > 1:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            return None
        if b"--select" in cmd and session.encode() in cmd:
            return pid
        pid = parent
    return None


def test_a_require_cudnn_killed_while_its_early_teeth_waits_stops_only_itself(tmp_path, venvs):
    """After the teeth-start change, a failing run still stops only itself: require_cudnn's harness is SIGKILLed
    while its teeth, started early, waits. It stored nothing, so the parent hands over `none`, teeth runs no test
    and refuses as it would after a require_cudnn that stored nothing, and normal passes as ever."""
    import signal
    import time

    log = tmp_path / "slots.jsonl"
    m = write_modes_matrix(tmp_path / "m.toml", log, {"x": {"normal": 0, "require_cudnn": 0, "teeth": 0}})
    edit(m, "[suite.sx]\n", '[suite.sx]\nteeth_scope = "cudnn"\n')
    env = {**fake_gpu(tmp_path, free="139000"), "MATRIX_CORES": "3"}
    assert cell_session(tmp_path, venvs, env=env).returncode == 0  # a last teeth run to start on
    edit(m, 'SLOT_SLEEP_REQUIRE_CUDNN = "0"', 'SLOT_SLEEP_REQUIRE_CUDNN = "60"')
    log.unlink()
    full = {**os.environ, "MATRIX_TOML": str(m), "MATRIX_RESULTS": str(tmp_path / "results"),
            "MATRIX_VENVS": str(venvs), **env}
    proc = subprocess.Popen([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", CELL], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    teeth_log = tmp_path / "results" / "sweep-logs" / f"{CELL}-teeth.log"
    teeth_log.unlink()
    deadline = time.monotonic() + 120
    started = None
    while time.monotonic() < deadline and started is None:
        starts = [r for r in map(json.loads, log.read_text().splitlines())] if log.exists() else []
        started = next((r for r in starts if r["event"] == "start" and r["mode"] == "require_cudnn"), None)
        time.sleep(0.2)
    assert started is not None, "require_cudnn's test never started"
    while time.monotonic() < deadline and not (teeth_log.exists() and "started early" in teeth_log.read_text()):
        time.sleep(0.2)
    harness = _harness_of(started["pid"], f"{CELL}-require_cudnn")
    assert harness is not None
    os.kill(harness, signal.SIGKILL)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
        raise AssertionError("teeth never got word that its census would not come: " + out[-3000:]) from None
    assert proc.returncode != 0, out[-3000:]
    assert f"{CELL}-teeth: handed the census of {CELL}-require_cudnn: none (it stored no result)" in out, out[-3000:]
    text = teeth_log.read_text()
    assert "the early start is given up" in text and "no test ran in it" in text, text[-3000:]
    teeth = stored(tmp_path, "teeth")
    assert teeth["command"] == [] and teeth["verdict"] == "fail", teeth["reasons"]  # refused: no census
    assert any("needs the census of" in r for r in teeth["reasons"]), teeth["reasons"]
    assert stored(tmp_path, "normal")["verdict"] == "pass"  # it ran as ever
    assert [r["mode"] for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"] == ["normal"]
    assert f"{CELL}-require_cudnn: require_cudnn: it stored no result; its child exited -9" in out, out[-3000:]
