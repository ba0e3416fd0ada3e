"""`nox -s bisect` over a fixture series of locally built ORT wheels, with real venvs, real nox and pytest runs.

The series is the CPU wheel re-versioned 1.40.0 to 1.40.6, each carrying a behaviour in its build info
(fixtures/suites/bisect): 1.40.2 breaks test_outcome, 1.40.3 is a wheel that will not install (a build that
cannot be tested), and 1.40.5 makes test_tier dispatch MATH instead of cuDNN and leaves Relu on the CPU EP
(test_series_nodes.py). A sweep of 1.40.0 is saved as a baseline, a sweep of 1.40.6 against it confirms the
regressions, and bisect must name the build of each.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from helpers import CELL, REPO, SUITES, once_per_run
from test_index import _write_wheel

from ort_gpu_matrix.report.render import bisect as render
from ort_gpu_matrix.store.bisection import load

SERIES = {"1.40.0": {}, "1.40.1": {}, "1.40.2": {"fails": True}, "1.40.3": None, "1.40.4": {"fails": True},
          "1.40.5": {"fails": True, "tier": "MATH", "cpu_ops": "Relu"},
          "1.40.6": {"fails": True, "tier": "MATH", "cpu_ops": "Relu"}}
OUTCOME, TIER = "test_series.py::test_outcome", "test_series.py::test_tier"
RELU = "test_series_nodes.py::test_relu"


def series_wheel(wheel: Path, where: Path, version: str, behaviour: dict | None) -> Path:
    """The CPU wheel as onnxruntime `version`, its build info saying how it behaves; None: a wheel that is no zip."""
    name, old, rest = wheel.name.split("-", 2)
    out = where / f"{name}-{version}-{rest}"
    if behaviour is None:
        out.write_bytes(b"not a zip: this build cannot be installed\n")
        return out
    old_info, new_info = f"{name}-{old}.dist-info", f"{name}-{version}.dist-info"
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as z:
        for item in z.namelist():
            if item == f"{old_info}/RECORD":
                continue
            data = z.read(item)
            if item == f"{old_info}/METADATA":
                data = re.sub(rb"^Version: .*$", f"Version: {version}".encode(), data, count=1, flags=re.M)
            if item == "onnxruntime/capi/build_and_package_info.py":
                data += f"fixture_behaviour = {behaviour!r}\n".encode()
            files[item.replace(old_info, new_info, 1) if item.startswith(old_info) else item] = data
    _write_wheel(out, files, new_info)
    return out


@pytest.fixture(scope="module")
def series(tmp_path_factory, wheelhouse) -> Path:
    def build(top: Path) -> None:
        d = top / "house"
        d.mkdir()
        for w in wheelhouse.glob("*.whl"):
            if not w.name.startswith("onnxruntime-"):
                (d / w.name).write_bytes(w.read_bytes())
        (ort,) = wheelhouse.glob("onnxruntime-1.32.0-*.whl")
        for version, behaviour in SERIES.items():
            series_wheel(ort, d, version, behaviour)
    return once_per_run(tmp_path_factory, "bisect-series", build) / "house"


class Bisector:
    def __init__(self, harness, series: Path):
        self.h, self.series = harness, series
        harness.venvs = harness.tmp / "own-venvs"  # its own: these venvs hold builds no other test has
        self.env = {"MATRIX_BASELINES": str(harness.tmp / "baselines")}

    def write(self, version: str, files: tuple[str, ...] = ("test_series.py",)) -> None:
        self.h.write(list(files), root=SUITES / "bisect", pythonpath=(".", ".."), ort=f"onnxruntime=={version}",
                     matrix_extra=f'offline = true\nwheelhouse = ["{self.series}"]')

    def nox(self, *args: str):
        return self.h.nox(*args, env=self.env)

    def swept(self) -> None:
        """A baseline of 1.40.0, then a sweep of 1.40.6 against it: the regressions bisect follows by default."""
        self.write("1.40.0")
        assert self.nox("-s", "sweep", "--", "--save-baseline", "b0").proc.returncode == 0
        self.write("1.40.6")
        run = self.nox("-s", "sweep", "--", "--baseline", "b0", "--gate", "regressions")
        assert run.proc.returncode != 0, run.output[-3000:]
        kinds = {(c["kind"], c["test"]) for c in json.loads((self.h.results / "sweep.json").read_text())["regressions"]}
        assert {("test", OUTCOME), ("tier", TIER)} <= kinds, kinds  # and the passed count, which bisect leaves

    def bisect(self, *args: str):
        run = self.nox("-s", "bisect", "--", *args)
        where = self.h.results / "bisect" / f"{CELL}-normal-regressions"
        record = json.loads((where / "bisect.json").read_text()) if (where / "bisect.json").exists() else None
        return run, record


@pytest.fixture
def bisector(harness, series):
    return Bisector(harness, series)


def test_bisect_names_the_build_that_changed_an_outcome_and_the_one_that_changed_a_tier(bisector):
    bisector.swept()
    run, record = bisector.bisect("--between", "1.40.0", "1.40.6")
    assert run.proc.returncode == 0, run.output[-3000:]
    assert record["source"] == "regressions" and sorted(record["followed"]) == [OUTCOME, TIER]
    assert [b["version"] for b in record["builds"]] == list(SERIES)  # listed from the wheelhouse, in order
    groups = {tuple(g["tests"]): (g["last_good"], g["first_bad"], g["located"]) for g in record["groups"]}
    assert groups == {(OUTCOME,): ("1.40.1", "1.40.2", True), (TIER,): ("1.40.4", "1.40.5", True)}
    skip = [s for s in record["steps"] if s["skipped"]]
    assert [s["build"]["version"] for s in skip] == ["1.40.3"] and "venv would not build" in skip[0]["skipped"]
    assert all(v == "skip" for v in skip[0]["verdicts"].values())  # never good, never bad
    tier_bad = next(s for s in record["steps"] if s["build"]["version"] == "1.40.5")
    assert tier_bad["lines"][TIER] == ["passed MATH"] * 3  # the first run and its two confirming reruns
    # halving: each test ran on fewer builds than all, and only the followed tests ran (never test_steady)
    assert sum(len(s["tests"]) for s in record["steps"]) < 2 * len(SERIES)
    assert all(set(s["tests"]) <= {OUTCOME, TIER} for s in record["steps"])
    assert "bisect OK: every followed change located (2 group(s))" in run.output
    assert "group 1: 1 test(s): last good 1.40.1, first bad 1.40.2" in run.output
    md = (bisector.h.results / "bisect" / f"{CELL}-normal-regressions" / "bisect.md").read_text()
    html = (bisector.h.results / "bisect" / f"{CELL}-normal-regressions" / "bisect.html").read_text()
    assert "last good 1.40.4, first bad 1.40.5" in md and "<td>1.40.5</td>" in html
    # a saved record reads back whole: its reports render again from bisect.json alone, as they were
    saved = load(bisector.h.results / "bisect" / f"{CELL}-normal-regressions")
    assert (render.markdown(saved), render.html(saved)) == (md, html)
    assert record["whole_suite_s"] and record["saved_seconds"] is not None
    assert oct((bisector.h.results / "bisect" / f"{CELL}-normal-regressions").stat().st_mode & 0o777) == "0o700"


def test_bad_input_is_one_line_each_and_builds_nothing(bisector):
    bisector.swept()
    venvs = set(os.listdir(bisector.h.venvs))
    cases = {
        ("--versions", "1.40.0", "1.40.9"): "--versions 1.40.0 1.40.9: onnxruntime 1.40.9 is not on the wheelhouse",
        ("--versions", "1.40.2", "1.40.0"): "out of order at 1.40.2 then 1.40.0",
        ("--between", "1.40.0", "1.40.6", "--improvement"): "has no confirmed improvements",
        ("--tests", "no_such_test", "--cell", CELL, "--versions", "1.40.0", "1.40.6"): "the test set is empty",
        ("--versions", "1.40.0"): "a bisect needs two builds at least",
    }
    for args, said in cases.items():
        run, _ = bisector.bisect(*args)
        assert run.proc.returncode != 0 and said in run.output, (args, run.output[-1500:])
        assert "Traceback" not in run.output
    assert set(os.listdir(bisector.h.venvs)) == venvs  # nothing was built


def test_ends_that_are_not_what_they_must_be_stop_the_bisect_and_say_which_test(bisector):
    bisector.swept()
    run, record = bisector.bisect("--versions", "1.40.2", "1.40.6")
    assert run.proc.returncode != 0 and record["problem"].startswith(
        f"the good end 1.40.2 is not good: {OUTCOME} gave 'failed' where the baseline has outcome 'passed'")
    run, record = bisector.bisect("--versions", "1.40.0", "1.40.1")
    assert run.proc.returncode != 0 and record["problem"].startswith(f"the bad end 1.40.1 is not bad: {OUTCOME} and 1 more")
    assert len(record["steps"]) == 2  # the two ends, no halving


def test_ctrl_c_keeps_the_steps_done_and_resume_goes_on_from_them(bisector):
    bisector.swept()
    where = bisector.h.results / "bisect" / f"{CELL}-normal-regressions"
    env = {**os.environ, **bisector.env, "MATRIX_TOML": str(bisector.h.matrix), "MATRIX_RESULTS": str(bisector.h.results),
           "MATRIX_VENVS": str(bisector.h.venvs)}
    args = [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "bisect", "--", "--between", "1.40.0",
            "1.40.6"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # two steps kept (both ends), then Ctrl-C in the middle of the walk
        if (where / "bisect.json").exists() and len(json.loads((where / "bisect.json").read_text())["steps"]) >= 2:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    kept = json.loads((where / "bisect.json").read_text())
    assert proc.returncode != 0 and "--resume goes on" in out, out[-2000:]
    assert kept["interrupted"] and len(kept["steps"]) >= 2
    done = [s["build"]["version"] for s in kept["steps"]]
    run, record = bisector.bisect("--between", "1.40.0", "1.40.6", "--resume")
    assert run.proc.returncode == 0, run.output[-3000:]
    assert [s["build"]["version"] for s in record["steps"]][:len(done)] == done  # kept, not run again
    ran_again = re.findall(r"bisect: (1\.40\.\d): ", run.output)
    assert not set(ran_again) & set(done), (ran_again, done)
    assert {tuple(g["tests"]): g["first_bad"] for g in record["groups"]} == {(OUTCOME,): "1.40.2", (TIER,): "1.40.5"}
    run, _ = bisector.bisect("--versions", "1.40.0", "1.40.6", "--resume")  # other builds: refused, one line
    assert run.proc.returncode != 0 and "--resume: " in run.output and "followed other builds or tests" in run.output


def test_bisect_follows_an_op_that_fell_to_the_cpu_to_the_build_that_moved_it(bisector):
    nodes = ("test_series_nodes.py",)
    bisector.write("1.40.0", nodes)
    assert bisector.nox("-s", "sweep", "--", "--save-baseline", "b0").proc.returncode == 0
    bisector.write("1.40.6", nodes)
    swept = bisector.nox("-s", "sweep", "--", "--baseline", "b0", "--gate", "regressions")
    data = json.loads((bisector.h.results / "sweep.json").read_text())
    assert swept.proc.returncode != 0 and [(c["kind"], c["test"], c.get("op"), c["before"], c["after"])
                                           for c in data["regressions"]] == [("ep", RELU, "Relu", "CUDA", "CPU")]
    run, record = bisector.bisect("--between", "1.40.0", "1.40.6")
    assert run.proc.returncode == 0, run.output[-3000:]
    assert record["followed"] == {RELU: "ep Relu: CUDA -> CPU"}
    groups = {tuple(g["tests"]): (g["last_good"], g["first_bad"], g["located"]) for g in record["groups"]}
    assert groups == {(RELU,): ("1.40.4", "1.40.5", True)}
    lines = {s["build"]["version"]: s["lines"][RELU] for s in record["steps"] if not s["skipped"]}
    assert lines["1.40.0"] == ["passed ep=CUDA ops.CUDA=Relu"]  # the step's line says where the followed op ran
    assert lines["1.40.5"] == ["passed ep=CUDA ops.CPU=Relu"] * 3  # the first run and its two confirming reruns
    # a good end where the op already ran on the CPU is not good, and says what the baseline had
    run, record = bisector.bisect("--versions", "1.40.5", "1.40.6")
    assert run.proc.returncode != 0 and record["problem"] == (
        f"the good end 1.40.5 is not good: {RELU} gave 'passed ep=CUDA ops.CPU=Relu' where the baseline has Relu on "
        "'CUDA'; fix: an older good end")
