"""Several GPUs of one host: cells as child processes, one per slot at a time, checked on the records the
tests themselves wrote (the slot they were given, when they started and ended), never on wall time."""
import itertools
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import PY, REPO, SUITES

MATRIX = """
[matrix]
pythons = ["{py}"]
suite = "slots"
modes = ["normal"]
[ort.cpu]
requirement = "onnxruntime==1.32.0"
with = ["onnx==1.20.1"]
[torch.none]
skip = true
[libs.a]
none = true
[libs.b]
none = true
[libs.c]
none = true
[libs.d]
none = true
[pairing]
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


def _start(tmp_path, venvs, *args, sleep="1.5"):
    log = tmp_path / "slots.jsonl"
    (tmp_path / "m.toml").write_text(MATRIX.format(py=PY, root=SUITES / "slots", log=log, sleep=sleep))
    env = {**os.environ, "MATRIX_TOML": str(tmp_path / "m.toml"), "MATRIX_RESULTS": str(tmp_path / "results"),
           "MATRIX_VENVS": str(venvs)}
    return log, subprocess.Popen([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", "--",
                                  *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_cells_overlap_across_slots_and_never_share_one(tmp_path, venvs):
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
    assert sorted(t["cell"] for t in timeline) == [f"gpu-{PY}-{c}" for c in "abcd"]
    for t in timeline:  # each cell's own log, named in the timeline
        assert "test session starts" in open(t["log"]).read()
    sweep = json.loads((tmp_path / "results" / "sweep.json").read_text())
    assert [c["verdict"] for c in sorted(sweep["cells"], key=lambda c: c["cell"])] == ["pass", "pass", "pass", "fail"]
    assert sum(line.endswith("started (log " + str(tmp_path / "results" / "sweep-logs" / f"gpu-{PY}-a.log") + ")")
               for line in out.splitlines()) == 1


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
    assert f"{name}: stopping 2 running cell(s)" in out and "2 not started" in out, out[-3000:]
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
